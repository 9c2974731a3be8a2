"""Replay a session request by request through the pipeline; the engine's main entry point.

Two passes per thread. The first, in recorded mode, only measures the view of every request and
fits the display calibration (``a + b * raw``) against the recorded usage. The second runs the
requested mode with every step, decision counts, the prompt-cache model and cost.
"""

from __future__ import annotations

import functools
import io
import pickle
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from .config.fields import PipelineConfig
from .config.presets import thread_window
from .config.thresholds import Thresholds, compute_thresholds
from .input.model import Block, Usage
from .input.session import RequestInfo, Session, Thread, auto_compaction_pre_tokens, thread_requests
from .measures.anchors import ThreadAnchors, thinking_growth_factor, thread_anchors
from .measures.cost import PricingTable, iterations_cost, load_pricing, request_cost
from .measures.model_limits import model_info
from .measures.prompt_cache import CacheResult, CacheSimulator
from .measures.tokens import (
    DEFAULT_CALIBRATION,
    Calibration,
    TiktokenCounter,
    TokenCounter,
    block_rough,
    fit_calibration,
    scale_unsized_thinking,
    text_key,
)
from .pipeline import DEFAULT_STEPS, Step
from .pipeline.base import WHOLE_MESSAGE, StepContext, TransformLog, View
from .pipeline.boundary import preserved_before_boundary, preserved_head
from .results import (
    RESULT_VERSION,
    CacheRow,
    CalibrationJson,
    RecordedUsage,
    RequestRow,
    ResultJson,
    SessionSummary,
    SubagentResult,
)
from .summarizing import ExtractiveSummarizer, Summarizer

MODES = ("recorded", "whatif")
#: Recorded requests, none reading or writing the cache, that show caching was off.
CACHING_OFF_EVIDENCE = 3
ProgressCallback = Callable[[int, int], None]


def fit_per_model(
    requests: list[RequestInfo], raw: list[int], totals: list[int]
) -> dict[str, Calibration]:
    """Separate fits for each model of a thread that switched models (``/model``)."""
    # in order of first use: a set's order would change with the hash seed, and so the JSON
    models = list(dict.fromkeys(r.message.model or "" for r in requests))
    if len(models) < 2:
        return {}
    out: dict[str, Calibration] = {}
    for model in models:
        idx = [i for i, r in enumerate(requests) if (r.message.model or "") == model]
        cal = fit_calibration([raw[i] for i in idx], [totals[i] for i in idx])
        if cal is not None:
            out[model] = cal
    return out


def _continues_main(thread: Thread) -> bool:
    """A branch or a compaction fork: the main chain up to ``fork_index``, then its own part
    (replayed from the start so its state and cache match; requests emitted from the fork)."""
    return thread.kind == "branch" or thread.compaction_fork


def _first_time(thread: Thread) -> str:
    return next((m.timestamp for m in thread.messages if m.timestamp), "")


def _blocks_within(tokens: list[int], budget: int) -> int:
    """How many leading blocks fit in ``budget`` tokens (the one that crosses it counts when
    more than half of it fits; the read is then capped at the budget)."""
    total = 0
    for n, tok in enumerate(tokens):
        if total + tok > budget:
            return n + 1 if budget - total > tok / 2 else n
        total += tok
    return len(tokens)


def parse_time(stamp: str) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _window_evidence(thread: Thread) -> tuple[int, list[int]]:
    """A thread's largest recorded prompt (as Claude Code counted it: what its thresholds saw)
    and its automatic compactions' ``preTokens``."""
    largest = max(
        (m.usage.counted_prompt for m in thread.messages if m.usage is not None), default=0
    )
    return largest, auto_compaction_pre_tokens(thread.messages)


@dataclass
class ThreadResult:
    thread: Thread
    requests: list[RequestRow]
    raw: list[int]
    recorded_totals: list[int]
    calibration: Calibration
    summary_calls: int = 0
    #: per model, when a thread switched models (each has its own tokenizer and system prompt)
    model_calibrations: dict[str, Calibration] = field(default_factory=dict)
    anchors: ThreadAnchors | None = None


@dataclass
class ReplayResult:
    """Everything a replay computed; ``to_json`` gives the documented JSON shape."""

    session: Session
    mode: str
    preset: str
    config: PipelineConfig
    threads: list[ThreadResult]
    log: TransformLog
    summarizer: str

    def main_requests(self) -> list[RequestRow]:
        out: list[RequestRow] = []
        for tr in self.threads:
            if tr.thread.kind in ("main", "branch"):
                out.extend(tr.requests)
        out.sort(key=lambda r: (r["timestamp"] or "", r["thread"] != "main"))
        for n, req in enumerate(out):
            req["index"] = n
        return out

    def to_json(self) -> dict[str, Any]:
        """``result_json()`` as the plain dict it is, for code that stores or serialises it."""
        return cast(dict[str, Any], self.result_json())

    def result_json(self) -> ResultJson:
        """The result in its declared shape (``results.ResultJson``)."""
        main = self.main_requests()
        subagents: list[SubagentResult] = [
            {
                "thread": tr.thread.id,
                "kind": tr.thread.kind,
                "file": tr.thread.file,
                "compaction_fork": tr.thread.compaction_fork,
                "requests": tr.requests,
            }
            for tr in self.threads
            if tr.thread.kind in ("subagent", "sidechain")
        ]
        main_thread = self.threads[0] if self.threads else None
        return {
            "result_version": RESULT_VERSION,
            "session": {
                "name": self.session.name,
                "session_id": self.session.session_id,
                "version": self.session.version,
                "versions": self.session.versions,
                "mode": self.mode,
                "preset": self.preset,
                "summarizer": self.summarizer,
                "config": self.config.to_dict(),
                "threads": [
                    {
                        "id": tr.thread.id,
                        "kind": tr.thread.kind,
                        "file": tr.thread.file,
                        "messages": len(tr.thread.messages),
                        "requests": len(tr.requests),
                        "calibration": _calibration_json(tr.calibration),
                        "model_calibrations": {
                            m: _calibration_json(c) for m, c in tr.model_calibrations.items()
                        },
                        "segments": (max(tr.anchors.segment, default=0) + 1) if tr.anchors else 1,
                        "anchors": [a.to_json() for a in tr.anchors.anchors] if tr.anchors else [],
                    }
                    for tr in self.threads
                ],
                "calibration": _calibration_json(main_thread.calibration) if main_thread else None,
                "problems": [p.to_json() for p in self.session.problems],
                "modeled_steps": [s.name for s in DEFAULT_STEPS if s.modeled],
            },
            "requests": main,
            "subagents": subagents,
            "summary": summarize(main, self.threads, self.session.side.claude_code_cost_usd),
            "views": {"transforms": self.log.transforms, "synthetic": self.log.synthetic},
            "summaries": self.log.summaries(),
        }


def _calibration_json(calibration: Calibration) -> CalibrationJson:
    return cast(CalibrationJson, calibration.to_json())


def summarize(
    requests: list[RequestRow],
    threads: list[ThreadResult],
    claude_code_cost: float | None = None,
) -> SessionSummary:
    """Session totals for the main thread (and its branches), subagents and compaction calls
    apart; ``claude_code_cost`` is Claude Code's own figure when the transcript has one."""
    side = _side_costs(requests, threads)
    read = sum(r["cache"]["read"] for r in requests)
    write = sum(r["cache"]["write"] for r in requests)
    uncached = sum(r["cache"]["uncached"] for r in requests)
    compactions = [
        r["index"]
        for r in requests
        if any(e["step"] == "autocompact" and e["action"] == "compacted" for e in r["events"])
    ]
    shares = [r["model_tokens"] / r["repl_tokens"] for r in requests if r["repl_tokens"]]
    recorded = [r for r in requests if r["recorded"]]
    return {
        "requests": len(requests),
        "compactions": len(compactions),
        "compaction_requests": compactions,
        "microcompactions": sum(
            1 for r in requests for e in r["events"] if e["step"] == "microcompact"
        ),
        "summary_calls": sum(
            t.summary_calls for t in threads if t.thread.kind in ("main", "branch")
        ),
        "peak_model_tokens": max((r["model_tokens"] for r in requests), default=0),
        "cache_read_tokens": read,
        "cache_write_tokens": write,
        "uncached_tokens": uncached,
        "cost_usd": round(sum(r["cost_usd"] for r in requests), 6),
        "recorded_cost_usd": round(sum(r["recorded_cost_usd"] or 0.0 for r in requests), 6),
        "iteration_cost_usd": round(sum(r["iteration_cost_usd"] for r in requests), 6),
        "cache_hit_rate": round(read / (read + write + uncached), 4)
        if read + write + uncached
        else 0.0,
        "mean_history_share": round(statistics.fmean(shares), 4) if shares else 1.0,
        "requests_above_warning": sum(
            1 for r in requests if r["decision_tokens"] >= r["thresholds"]["warning"]
        ),
        "blocking_hits": sum(1 for r in requests for e in r["events"] if e["step"] == "blocking"),
        "recorded_requests": len(recorded),
        "subagent_cost_usd": side["subagent_cost_usd"],
        "recorded_subagent_cost_usd": side["recorded_subagent_cost_usd"],
        "compaction_cost_usd": side["compaction_cost_usd"],
        "recorded_compaction_cost_usd": side["recorded_compaction_cost_usd"],
        "session_cost_usd": side["session_cost_usd"],
        "recorded_session_cost_usd": side["recorded_session_cost_usd"],
        "claude_code_cost": claude_code_cost,
    }


def _side_costs(requests: list[RequestRow], threads: list[ThreadResult]) -> dict[str, float]:
    """Subagent and compaction-call costs apart, and the session totals that include them."""

    def total(rows: list[RequestRow], recorded: bool) -> float:
        if recorded:
            return sum(r["recorded_cost_usd"] or 0.0 for r in rows)
        return sum(r["cost_usd"] for r in rows)

    subagents = [
        r
        for t in threads
        if t.thread.kind in ("subagent", "sidechain") and not t.thread.compaction_fork
        for r in t.requests
    ]
    compactions = [r for t in threads if t.thread.compaction_fork for r in t.requests]
    out = {
        "subagent_cost_usd": total(subagents, False),
        "recorded_subagent_cost_usd": total(subagents, True),
        "compaction_cost_usd": total(compactions, False),
        "recorded_compaction_cost_usd": total(compactions, True),
        "session_cost_usd": total(requests, False),
        "recorded_session_cost_usd": total(requests, True),
    }
    out["session_cost_usd"] += out["subagent_cost_usd"] + out["compaction_cost_usd"]
    out["recorded_session_cost_usd"] += (
        out["recorded_subagent_cost_usd"] + out["recorded_compaction_cost_usd"]
    )
    return {key: round(value, 6) for key, value in out.items()}


class _CacheBlocks:
    """The flat prompt (system prefix, head, messages) as cache blocks, kept in step with a view.

    Per block: a content key, display tokens (raw and calibrated) and the rolling prefix hash.
    Only the part after the first change is rebuilt, so a request that just appends messages
    costs only its new blocks.
    """

    def __init__(self, system_keys: list[int]) -> None:
        self.system_keys = system_keys
        self.keys: list[int] = []
        self.raw: list[int] = []
        self.cal: list[int] = []
        self.hashes: list[int] = []
        self.first_block: dict[int, int] = {}
        self.built_end = 0
        self.changed_from = 0
        self.ratio = -1.0
        self.seed = 0

    def sync(self, view: View, ratio: float, seed: int) -> None:
        if view.dirty_from == -1 or not self.keys:
            self._reset(view)
        elif view.dirty_from is not None and view.dirty_from < self.built_end:
            cut_msg = max(view.dirty_from, view.start)
            pos = next(
                (
                    self.first_block[i]
                    for i in range(cut_msg, self.built_end)
                    if i in self.first_block
                ),
                None,
            )
            if pos is not None:
                del self.keys[pos:]
                del self.raw[pos:]
                for i in range(cut_msg, self.built_end):
                    self.first_block.pop(i, None)
                self.changed_from = min(self.changed_from, pos)
            self.built_end = cut_msg
        view.dirty_from = None
        self._extend(view, view.end)
        if ratio != self.ratio or seed != self.seed:
            self.ratio, self.seed, self.changed_from = ratio, seed, 0
        start = min(self.changed_from, len(self.keys))
        del self.cal[start:]
        del self.hashes[start:]
        self.cal.extend(round(ratio * t) for t in self.raw[start:])
        prev = self.hashes[-1] if self.hashes else seed
        for key in self.keys[start:]:
            prev = hash((prev, key))
            self.hashes.append(prev)
        self.changed_from = len(self.keys)

    def _reset(self, view: View) -> None:
        self.keys = list(self.system_keys)
        self.raw = [0] * len(self.system_keys)
        self.first_block = {}
        self.changed_from = 0
        for item in view.head:
            for block in item.message.blocks:
                self.keys.append(text_key(block.type + "\x00" + block.text))
                self.raw.append(view.counter.count(block.text) if block.tok < 0 else block.tok)
        self.built_end = view.start

    def _extend(self, view: View, end: int) -> None:
        keys, raw = self.keys, self.raw
        for i in range(self.built_end, end):
            if view.is_removed(i):
                continue
            msg = view.messages[i]
            if msg.role == "system":
                continue
            self.first_block[i] = len(keys)
            whole = view.overrides.get((i, WHOLE_MESSAGE))
            if whole is not None:
                keys.append(whole.key)
                raw.append(whole.tok)
                continue
            for j, block in enumerate(msg.blocks):
                ov = view.overrides.get((i, j))
                base_tok, _, base_key = view.base_block(i, j, block)
                if ov is None:
                    keys.append(base_key)
                    raw.append(base_tok)
                else:
                    # a cache edit deletes server-side and keeps the cached prefix intact
                    keys.append(base_key if ov.cache_preserving else ov.key)
                    raw.append(ov.tok)
        self.built_end = max(self.built_end, end)


@dataclass
class _Loop:
    """Where a thread's replay is: what a resumed replay picks up."""

    sim: CacheSimulator
    blocks: _CacheBlocks
    first_emitted: int
    next: int = 0
    prev_end: int = 0
    last_time: float | None = None
    ttl: str = "5m"
    results: list[RequestRow] = field(default_factory=list)
    #: the request being replayed and the step it stopped at (None between requests)
    pending: tuple[StepContext, int] | None = None


class _ThreadReplay:
    def __init__(
        self,
        session: Session,
        thread: Thread,
        config: PipelineConfig,
        mode: str,
        counter: TokenCounter,
        summarizer: Summarizer,
        log: TransformLog,
        calibration: Calibration | None,
        recorded_raw: list[int] | None,
        pricing: PricingTable,
        steps: tuple[Step, ...],
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.session = session
        self.thread = thread
        self.config = config
        if config.window_from_records:
            window = thread_window(*_window_evidence(thread), config.context_window)
            if window != config.context_window:
                self.config = config.replace(context_window=window)
        self.mode = mode
        self.counter = counter
        self.summarizer = summarizer
        self.log = log
        self.calibration = calibration
        self.model_calibrations: dict[str, Calibration] = {}
        #: pass 1's anchors (None in pass 1 itself, which measures the plain view)
        self.anchors: ThreadAnchors | None = None
        #: the replay compacted (recorded or simulated): the earlier-history span is gone
        self.compacted_once = False
        #: requests at which this replay compacted (recorded or simulated)
        self.compactions_at: list[int] = []
        self.segment = 0
        self.cache_sim: CacheSimulator | None = None
        #: what-if: message index → the cache read the recording fell to there with nothing
        #: changed before it (a server-side miss, measured in recorded mode and carried over)
        self.server_misses: dict[int, int] = {}
        #: the recorded cache read of the thread's previous request with usage
        self.previous_read: int | None = None
        #: the thread's first recorded cache read: an upper bound of the static system part
        self.system_level: int | None = None
        recorded = [
            m.usage for m in thread.messages if m.usage is not None and m.usage.prompt_total > 0
        ]
        #: the recording never read or wrote the prompt cache over several requests: caching
        #: was off (``DISABLE_PROMPT_CACHING``, a provider without it), every token uncached
        self.caching_off = len(recorded) >= CACHING_OFF_EVIDENCE and not any(
            u.cache_read or u.cache_write for u in recorded
        )
        # a compaction fork sends the main conversation's system prompt, tools and model
        self.prompt_family = (
            "main" if thread.kind in ("main", "branch") or thread.compaction_fork else "agent"
        )
        self.recorded_raw = recorded_raw
        self.pricing = pricing
        self.steps = steps
        self.progress = progress
        self.requests = thread_requests(thread)
        self.hidden: set[int] = set()
        self.restored: dict[tuple[int, int], str] = {}
        #: request index → message index of a recorded summary (what-if may reuse it there)
        self.recorded_summaries: dict[int, int] = {}
        #: request index → Claude Code's own count where it compacted (``preTokens``)
        self.recorded_pre_tokens: dict[int, int] = {}
        #: message index of a recorded summary → the first message its compaction kept
        self.recorded_preserved: dict[int, int] = {}
        # A summary whose kept messages precede its boundary leads them from the view's head;
        # its own position is hidden (both modes: a /compact stays in what-if too).
        self.hidden.update(preserved_before_boundary(thread.messages))
        if mode == "whatif":
            self._prepare_whatif()
        self.view = View(thread, counter, log, self._base_text, self.hidden)
        self.state: dict[str, Any] = {"session_dir": self._session_dir()}
        self.thresholds: dict[str | None, Thresholds] = {}
        self.model_tokens: list[int] = []
        self.raw: list[int] = []
        self.summary_calls = 0
        self._loop: _Loop | None = None

    @property
    def thread_cal(self) -> Calibration:
        return self.calibration or DEFAULT_CALIBRATION

    def _session_dir(self) -> str:
        """Where Claude Code saved tool results: read off a recorded wrapper when there is one."""
        for msg in self.thread.messages:
            for block in msg.blocks:
                if block.type == "tool_result" and block.text.startswith("<persisted-output>"):
                    marker = "Full output saved to: "
                    start = block.text.find(marker)
                    end = block.text.find("/tool-results/", start)
                    if start >= 0 and end > start:
                        return block.text[start + len(marker) : end]
        sid = self.session.session_id or "session"
        return f"~/.claude/projects/<project>/{sid}"

    def _prepare_whatif(self) -> None:
        """Raw conversation: recorded compaction artifacts out, original tool output back."""
        upload = self.session.upload
        summaries: dict[int, int] = {}
        pre_tokens: int | None = None
        manual = False
        for i, msg in enumerate(self.thread.messages):
            if msg.kind == "compact_boundary" and msg.metadata.get("trigger") == "manual":
                # a /compact the user typed is part of the conversation, not a pipeline decision
                manual = True
            elif msg.kind in ("compact_boundary", "microcompact_boundary", "snip_boundary"):
                manual = False
                self.hidden.add(i)
                if msg.kind == "compact_boundary":
                    pre = msg.metadata.get("preTokens")
                    pre_tokens = int(pre) if isinstance(pre, int | float) and pre > 0 else None
            elif msg.kind == "summary" and manual:
                manual = False
            elif msg.kind == "summary":
                self.hidden.add(i)
                if i > 0 and self.thread.messages[i - 1].kind == "compact_boundary":
                    kept = preserved_head(self.thread.messages, i - 1)
                    if kept is not None:
                        self.recorded_preserved[i] = kept
                # the request right after a recorded compaction is where it happened
                k = next((r.index for r in self.requests if r.position > i), None)
                if k is not None:
                    summaries[k] = i
                    if pre_tokens is not None:
                        self.recorded_pre_tokens[k] = pre_tokens
                pre_tokens = None
            elif msg.kind == "tool_result":
                for j, block in enumerate(msg.blocks):
                    if block.type != "tool_result" or not block.text.startswith(
                        "<persisted-output>"
                    ):
                        continue
                    original = None
                    if upload is not None and block.tool_use_id:
                        original = upload.read_tool_result(block.tool_use_id)
                    if original is None:
                        original = msg.original_output
                    if original:
                        self.restored[(i, j)] = original
        self.recorded_summaries = summaries

    def _base_text(self, i: int, j: int, block: Block) -> str | None:
        if not self.restored:
            return None
        return self.restored.get((i, j))

    def thresholds_for(self, model: str | None) -> Thresholds:
        th = self.thresholds.get(model)
        if th is None:
            th = compute_thresholds(self.config, model)
            self.thresholds[model] = th
        return th

    def run(self, *, with_results: bool) -> list[RequestRow]:
        """Replay the thread's requests; resumable where a ``SummaryPending`` stopped it.

        The loop's state lives on the object, and a request interrupted inside a step is
        resumed at that step (steps before it already changed the view for this request).
        """
        if self._loop is None:
            self._loop = self._start_loop()
        loop = self._loop
        while loop.next < len(self.requests):
            req = self.requests[loop.next]
            if loop.pending is None:
                loop.pending = (self._begin_request(req, loop), 0)
            ctx, first_step = loop.pending
            for i in range(first_step, len(self.steps)):
                loop.pending = (ctx, i)
                self.steps[i].apply(ctx)
            loop.pending = None
            self._finish_request(req, ctx, loop, with_results=with_results)
            loop.next += 1
        self.summary_calls = int(self.state.get("summary_calls", 0))
        return loop.results

    def _start_loop(self) -> _Loop:
        self.state["recorded_summaries"] = self.recorded_summaries
        self.state["recorded_preserved"] = self.recorded_preserved
        # Threads of one family share a system prompt: a subagent can read the prefix an
        # earlier subagent of the same session wrote moments before (it cannot see the main's).
        system_keys = [
            text_key(f"system-static:{self.prompt_family}"),
            text_key(f"system-dynamic:{self.thread.id}"),
        ]
        return _Loop(
            sim=self.cache_sim
            or CacheSimulator(
                lookback_blocks=self.config.cache_lookback_blocks,
                lookback_enabled=self.config.cache_lookback_enabled,
            ),
            blocks=_CacheBlocks(system_keys),
            first_emitted=self.thread.fork_index if _continues_main(self.thread) else 0,
        )

    def _begin_request(self, req: RequestInfo, loop: _Loop) -> StepContext:
        view = self.view
        k = req.index
        p = req.position
        new_range = (loop.prev_end, p)
        turn_start = (
            any(
                m.role == "user" and m.kind in ("prompt", "command")
                for m in self.thread.messages[loop.prev_end : p]
            )
            or k == 0
        )
        now = parse_time(req.timestamp) or (loop.last_time or 0.0)
        if turn_start and k > 0:
            view.drop_turn_overrides(k - 1)
        view.end = p
        self.state["last_assistant_time"] = loop.last_time
        cal = self.model_calibrations.get(req.message.model or "", self.thread_cal)
        return StepContext(
            k=k,
            request=req,
            view=view,
            config=self.config,
            thresholds=self.thresholds_for(req.message.model),
            mode=self.mode,
            new_range=new_range,
            turn_start=turn_start,
            now=now,
            state=self.state,
            events=[],
            decision_count=functools.partial(self.decision_count, k),
            prompt_estimate=functools.partial(self._prompt_estimate, cal, k),
            session=self.session,
            summarizer=self.summarizer,
        )

    def _finish_request(
        self, req: RequestInfo, ctx: StepContext, loop: _Loop, *, with_results: bool
    ) -> None:
        view = self.view
        k = req.index
        p = req.position
        now = ctx.now
        thresholds = ctx.thresholds
        events = ctx.events
        turn_start = ctx.turn_start
        cal = self.model_calibrations.get(req.message.model or "", self.thread_cal)
        raw = view.raw_tokens()
        if any(e["step"] == "autocompact" and e["action"] == "compacted" for e in events):
            self.compacted_once = True
            self.compactions_at.append(k)
        history_raw, segment_raw, unrecorded = self._anchored(k)
        extra_raw = history_raw + segment_raw
        model_tokens = cal.apply(raw + extra_raw) + unrecorded
        if self.anchors is not None and with_results:
            # one event per anchor, on the request it was measured at (both modes: the agent
            # sent that input whatever the pipeline does)
            events.extend(
                {"step": "anchor", "action": a.kind, **cast(dict[str, Any], a.to_json())}
                for a in self.anchors.anchors
                if a.request == k
            )
        self.raw.append(raw)
        self.model_tokens.append(model_tokens)
        self.state["last_model_tokens"] = model_tokens
        loop.prev_end = p
        loop.last_time = parse_time(req.timestamp) or loop.last_time
        if not with_results:
            return
        decision = self.decision_count(k) - ctx.snip_freed
        usage = req.message.usage
        loop.ttl = ttl = self._ttl(usage, loop.ttl)
        cache = self._cache(
            loop.sim, loop.blocks, cal, model_tokens, req, now, ttl, model_tokens - cal.apply(raw)
        )
        output = usage.output if usage else 0
        write_5m = cache["write"] if ttl == "5m" else 0
        write_1h = cache["write"] - write_5m
        cost = request_cost(
            req.message.model,
            uncached=cache["uncached"],
            cache_read=cache["read"],
            cache_write_5m=write_5m,
            cache_write_1h=write_1h,
            output=output,
            pricing=self.pricing,
        )
        # the server's further calls inside the request (an advisor, a tool loop) are taken
        # as recorded in both modes: the agent made them whatever the pipeline did
        iteration_cost = (
            iterations_cost(req.message.model, usage, self.pricing) if usage is not None else 0.0
        )
        cost += iteration_cost
        recorded: RecordedUsage | None = None
        recorded_cost = None
        if usage is not None and usage.prompt_total > 0:
            recorded = cast(RecordedUsage, usage.to_json())
            rec_1h = usage.cache_write_1h if usage.cache_write_1h is not None else 0
            rec_5m = usage.cache_write - rec_1h
            recorded_cost = iteration_cost + request_cost(
                req.message.model,
                uncached=usage.input,
                cache_read=usage.cache_read,
                cache_write_5m=rec_5m,
                cache_write_1h=rec_1h,
                output=usage.output,
                pricing=self.pricing,
            )
        repl_raw = view.cum_tok[p]
        if p < loop.first_emitted:
            return
        loop.results.append(
            {
                "index": k,
                "thread": self.thread.id,
                "thread_request": k,
                "message_id": req.message.message_id,
                "message": p,
                "line": req.message.line,
                "timestamp": req.timestamp,
                "model": req.message.model,
                "raw_tokens": raw + extra_raw,
                "model_tokens": model_tokens,
                "segment": self.anchors.segment[k] if self.anchors else 0,
                "unrecorded_tokens": unrecorded,
                "earlier_history_tokens": round(cal.ratio * history_raw),
                "repl_tokens": cal.apply(repl_raw),
                "decision_tokens": decision,
                "recorded": recorded,
                "recorded_total": usage.prompt_total if recorded and usage else None,
                "cache": cache,
                "ttl": ttl,
                "cost_usd": round(cost, 6),
                "recorded_cost_usd": round(recorded_cost, 6) if recorded_cost is not None else None,
                "iteration_cost_usd": round(iteration_cost, 6),
                "thresholds": {
                    "effective": thresholds.effective_window,
                    "autocompact": thresholds.autocompact_threshold,
                    "warning": thresholds.warning_threshold,
                    "blocking": thresholds.blocking_limit,
                },
                "events": events,
                "turn_start": turn_start,
                "branch": self.thread.kind == "branch",
                "blocked": ctx.blocked,
                "view": {
                    "head": [h.ref for h in view.head],
                    "start": view.start,
                    "end": view.end,
                },
            }
        )
        if self.progress is not None:
            self.progress(1)

    def _prompt_estimate(self, cal: Calibration, k: int) -> int:
        """The display count of the view as it is now, anchors included."""
        history_raw, segment_raw, unrecorded = self._anchored(k)
        return cal.apply(self.view.raw_tokens() + history_raw + segment_raw) + unrecorded

    def _anchored(self, k: int) -> tuple[int, int, int]:
        """Request ``k``'s view tokens beyond the transcript: earlier history until the replay's
        first compaction and the segment's prefix change (raw units), and its unrecorded input
        (recorded units)."""
        anchors = self.anchors
        if anchors is None or k >= len(anchors.segment):
            return 0, 0, 0
        history = 0 if self.compacted_once else max(anchors.history_raw[: k + 1], default=0)
        return history, anchors.segment_raw[k], anchors.unrecorded[k]

    def decision_count(self, k: int) -> int:
        """``tokenCountWithEstimation``: last usage in the view plus rough estimates after it.

        In a what-if replay whose view still matches the recording where Claude Code compacted,
        Claude Code's own count there (``preTokens``, its last response's usage) is the count:
        it also holds what the transcript lost to the compaction (a tool result never written).
        Where ``preTokens`` alone is below the threshold, Claude Code's count was above it all
        the same: it also estimated the messages after that response (the tool result a
        preserved segment kept), so they are estimated on top as Claude Code does."""
        pre = self.recorded_pre_tokens.get(k)
        if (
            pre is not None
            and self.config.whatif_recorded_counts
            and self.recorded_raw is not None
            and (
                # a compaction before the file's first response: its history is not in the file
                k == 0
                or (
                    k <= len(self.raw)
                    and k - 1 < len(self.recorded_raw)
                    and self.raw[k - 1] == self.recorded_raw[k - 1]
                    and self._same_compactions(k - 1)
                )
            )
        ):
            threshold = self.thresholds_for(self.requests[k].message.model).autocompact_threshold
            return pre if pre >= threshold else pre + self._estimated_before_boundary(k)
        view = self.view
        for j in range(k - 1, -1, -1):
            req = self.requests[j]
            pos = req.position
            if pos < view.start:
                break
            if not view.in_view(pos):
                continue
            usage = req.message.usage
            if usage is None or usage.total <= 0:
                continue
            base = self._usage_total(j, usage)
            first_blocks = int(
                req.message.metadata.get("first_record_blocks", len(req.message.blocks))
            )
            tail = sum(block_rough(b) for b in req.message.blocks[first_blocks:])
            return base + tail + view.rough_range(pos + 1, view.end)
        return view.rough_total()

    def _estimated_before_boundary(self, k: int) -> int:
        """Rough tokens after the view's last recorded usage and before the recorded compaction
        boundary of request ``k`` (what ``preTokens`` does not count)."""
        summary = self.recorded_summaries.get(k)
        view = self.view
        if summary is None:
            return 0
        boundary = summary - 1
        for j in range(k - 1, -1, -1):
            pos = self.requests[j].position
            if pos < view.start:
                break
            if view.in_view(pos):
                # the response's later split records (a tool use after its text) are estimated
                msg = self.requests[j].message
                first_blocks = int(msg.metadata.get("first_record_blocks", len(msg.blocks)))
                tail = sum(block_rough(b) for b in msg.blocks[first_blocks:])
                return tail + view.rough_range(pos + 1, min(boundary, view.end))
        return 0

    def _usage_total(self, j: int, usage: Usage) -> int:
        """Recorded usage while the view matches the recording; the replay's own count after."""
        if self.mode == "recorded" or self.recorded_raw is None:
            return usage.total
        if j < len(self.raw) and j < len(self.recorded_raw) and self.raw[j] == self.recorded_raw[j]:
            return usage.total
        if (
            self.config.whatif_recorded_counts
            and j < len(self.raw)
            and j < len(self.recorded_raw)
            and self._same_compactions(j)
        ):
            # both views went through the same compactions: the recorded count plus the
            # calibrated difference between the two views leans on what Claude Code counted
            cal = self.model_calibrations.get(self.requests[j].message.model or "", self.thread_cal)
            return usage.total + round(cal.ratio * (self.raw[j] - self.recorded_raw[j]))
        if j < len(self.model_tokens):
            return self.model_tokens[j] + usage.output
        return usage.total

    def _same_compactions(self, j: int) -> bool:
        """This replay and the recording compacted as often up to request ``j``, each time
        within one request of the other (a summary reused there, so the views stay close)."""
        recorded = sorted(k for k in self.recorded_summaries if k <= j)
        ours = [k for k in self.compactions_at if k <= j]
        return len(recorded) == len(ours) and all(
            abs(a - b) <= 1 for a, b in zip(recorded, ours, strict=True)
        )

    def _ttl(self, usage: Usage | None, previous: str) -> str:
        setting = self.config.cache_ttl
        if setting in ("5m", "1h"):
            return setting
        if usage is not None:
            if usage.cache_write_1h:
                return "1h"
            if usage.cache_write_5m:
                return "5m"
        return previous

    def _cache(
        self,
        sim: CacheSimulator,
        blocks: _CacheBlocks,
        cal: Calibration,
        model_tokens: int,
        req: RequestInfo,
        now: float,
        ttl: str,
        anchored: int,
    ) -> CacheRow:
        view = self.view
        if self.caching_off:
            return {
                "read": 0,
                "write": 0,
                "uncached": model_tokens,
                "hit_blocks": 0,
                "blocks": 0,
                "reason": "caching_off",
                "detail": "the recording never read or wrote the prompt cache: caching was off",
                "server_miss_tokens": 0,
            }
        model = req.message.model or ""
        segment = self.anchors.segment[req.index] if self.anchors else 0
        if segment != self.segment:
            # a restart rebuilds the dynamic system prompt (environment, git status, session
            # start): the static prefix stays cached, everything after it is written again
            self.segment = segment
            blocks.system_keys[1] = text_key(f"system-dynamic:{self.thread.id}:{segment}")
            blocks.keys = []
        blocks.sync(view, cal.ratio, text_key(model))
        # the request was sent when the message before it was written; its response began later
        sent = (
            parse_time(self.thread.messages[req.position - 1].timestamp) if req.position else None
        )
        ready = now
        now = min(now, sent) if sent is not None else now
        prefix = max(0, round(cal.prefix_tokens))
        usage = req.message.usage
        system = round(prefix * self.config.cache_system_prefix_share)
        if req.index == 0 and usage is not None and usage.cache_read > 0:
            # what the first request found warm (other sessions, an earlier process) holds at
            # least the part before the system breakpoint, so it bounds the modeled share
            self.system_level = usage.cache_read
        if self.system_level is not None:
            # a read that ends inside the unseen prefix came from another session's entry, and
            # such an entry ends at the system breakpoint: there it is the static part itself
            system = (
                self.system_level if self.system_level <= prefix else min(system, self.system_level)
            )
        tokens = blocks.cal
        # earlier history, a segment's prefix change and unrecorded input sit with the prefix
        tokens[0], tokens[1] = system, max(0, prefix - system + anchored)
        prefix_hashes = blocks.hashes
        cache_key = f"{model}|{self.prompt_family}"
        last = len(tokens) - 1
        # the system breakpoint(s): org mode marks the CLI prefix and the rest separately, but both
        # sit inside the one unseen-prefix block we can model, so one breakpoint stands for them
        breakpoints = [0]
        if last > breakpoints[-1]:
            breakpoints.append(last)
        warm_blocks = 1 if self.config.cache_global_prefix_warm else 0
        warm_read: int | None = None
        if req.index == 0 and usage is not None and usage.cache_read > 0:
            warm_read = usage.cache_read
            # file start: what was cached before this file (an earlier process, another
            # session) is unknowable from it, so the first recorded read anchors it
            warm_blocks = max(warm_blocks, _blocks_within(tokens, usage.cache_read))
            if 0 < warm_blocks - 1 < last:
                breakpoints.insert(1, warm_blocks - 1)
        info = model_info(req.message.model)
        res = sim.request(
            time=now,
            model=cache_key,
            prefix_hashes=prefix_hashes,
            block_tokens=tokens,
            breakpoints=breakpoints,
            ttl=ttl,
            min_cacheable_tokens=info.min_cacheable_tokens,
            warm_blocks=warm_blocks,
            label=str(req.index),
            ready_time=ready,
        )
        read, write, uncached = res.read, res.write, res.uncached
        if warm_read is not None and read > warm_read:
            # the file-start anchor reads what was warm, no more
            write += read - warm_read
            read = warm_read
        reason: str = res.reason
        detail, hit_blocks = res.detail, res.hit_block
        server_miss = 0
        level = self._server_miss_level(req.position, usage, res) if warm_read is None else None
        if usage is not None and usage.prompt_total > 0:
            self.previous_read = usage.cache_read
        if level is not None and read > level:
            server_miss = read - level
            write += server_miss
            read = level
            hit_blocks = min(hit_blocks, _blocks_within(tokens, level))
            reason = "server_miss"
            detail = (
                f"the recorded usage read only {level:,} tokens from the cache where this model "
                f"expected {level + server_miss:,}, with nothing changed before it: the server no "
                "longer had the entry (Claude Code's own detector calls such drops likely "
                "server-side)"
            )
        # per-block rounding: settle the difference with the calibrated total in the tail
        diff = model_tokens - (read + write + uncached)
        if uncached + diff >= 0:
            uncached += diff
        else:
            write = max(0, write + uncached + diff)
            uncached = 0
            read = model_tokens - write
        return {
            "read": read,
            "write": write,
            "uncached": uncached,
            "hit_blocks": hit_blocks,
            "blocks": len(tokens),
            "reason": reason,
            "detail": detail,
            "server_miss_tokens": server_miss,
        }

    def _server_miss_level(
        self, position: int, usage: Usage | None, res: CacheResult
    ) -> int | None:
        """The cache read a server-side miss capped this request at, None without one.

        Recorded mode measures it as Claude Code's own break detector does: the recorded
        cache read fell below the previous request's by a break (at least
        ``cache_break_min_miss_tokens`` and more than ``cache_break_min_drop_pct`` of it), and
        the cache model found nothing changed before it (a hit). Nothing in the transcript
        explains such a drop, so, like unrecorded input, it is taken from the recording, and a
        what-if replay meets it at the same request (the server dropped the entry at that
        moment, whatever the prompt held).
        """
        config = self.config
        if not config.cache_recorded_server_misses:
            return None
        if self.mode == "whatif":
            return self.server_misses.get(position)
        previous = self.previous_read
        if res.reason != "hit" or usage is None or usage.prompt_total <= 0 or previous is None:
            return None
        drop = previous - usage.cache_read
        if drop < max(
            config.cache_break_min_miss_tokens, config.cache_break_min_drop_pct * previous
        ):
            return None
        return usage.cache_read


class _Replay:
    """One replay of a session: pass 1 (calibration) then every thread, resumable.

    When a ``SummaryPending`` stops it, the whole state can be pickled (``checkpoint``), with
    the session, summarizer and progress callback left out by reference, and resumed later
    from exactly that step instead of replaying the session again.
    """

    def __init__(
        self,
        session: Session,
        config: PipelineConfig,
        mode: str,
        summarizer: Summarizer,
        progress: ProgressCallback | None,
        preset_name: str,
        counter: TokenCounter,
        pricing: PricingTable,
        steps: tuple[Step, ...],
    ) -> None:
        self.session = session
        self.config = config
        self.mode = mode
        self.summarizer = summarizer
        self.progress = progress
        self.preset_name = preset_name
        self.counter = counter
        self.pricing = pricing
        self.steps = steps
        self.log = TransformLog()
        # a compaction fork is the recorded compaction's own call: a what-if replay decides
        # its compactions itself (and accounts their summaries), so it leaves the fork out
        self.threads = [
            t
            for t in session.threads
            if t.messages and not (mode == "whatif" and t.compaction_fork)
        ]
        # requests a thread emits: a branch or fork replays the main chain before its fork
        # point without emitting (or ticking progress for) those requests
        self.total = sum(
            sum(
                1
                for m in t.messages[t.fork_index if _continues_main(t) else 0 :]
                if m.role == "assistant"
            )
            for t in self.threads
        )
        self.done = 0
        self.measured: dict[
            str, tuple[list[int], Calibration | None, dict[str, Calibration], ThreadAnchors]
        ] = {}
        self.order: list[Thread] = []
        self.position = -1  # index in ``order`` of the thread being replayed; -1: not started
        self.runner: _ThreadReplay | None = None
        self.cache_sim: CacheSimulator | None = None
        self.server_misses: dict[str, dict[int, int]] = {}
        self.by_thread: dict[str, ThreadResult] = {}

    def tick(self, n: int) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(self.done, self.total)

    def _probe(self, thread: Thread) -> _ThreadReplay:
        """A recorded-mode pass over ``thread`` without results: its raw view counts."""
        probe = _ThreadReplay(
            self.session,
            thread,
            self.config,
            "recorded",
            self.counter,
            self.summarizer,
            TransformLog(),
            None,
            None,
            self.pricing,
            self.steps,
        )
        probe.run(with_results=False)
        return probe

    def calibrate(self) -> None:
        """Pass 1: measure recorded views and fit the calibration of every thread (and model).

        It depends on the session and the config only, so replays of the same pair reuse it.
        """
        memo_key = ("calibration", self.config)
        measured = self.session.memo.get(memo_key) or {}
        for thread in self.threads:
            if thread.id in measured:
                continue
            probe = self._probe(thread)
            totals = [
                (r.message.usage.prompt_total if r.message.usage else 0) for r in probe.requests
            ]
            # responses with only a streaming snapshot of their output: their thinking is sized
            # from what the thread's recording says thinking costs sent back, then measured
            # again. Measured once per thread and session, on the text sizes, so a replay under
            # another config (a sweep, an A/B pair) sizes it the same whatever ran first.
            factor_key = ("thinking_factor", thread.id)
            if factor_key not in self.session.memo:
                factor = thinking_growth_factor(
                    thread, probe.requests, probe.raw, totals, self.counter
                )
                self.session.memo[factor_key] = factor
                if factor > 1.0 and scale_unsized_thinking(
                    thread.messages, factor, self.counter, thread.id
                ):
                    probe = self._probe(thread)
            anchors = thread_anchors(thread, probe.requests, probe.raw, totals, self.config)
            per_model = fit_per_model(probe.requests, probe.raw, totals)
            calibration = fit_calibration(probe.raw, totals)
            if per_model or anchors.calibration is None:
                # a thread fitted per model keeps its per-model lines (segments still count)
                segments = anchors.segment
                anchors = ThreadAnchors.empty(len(segments))
                anchors.segment = segments
            else:
                calibration = anchors.calibration
            measured[thread.id] = (probe.raw, calibration, per_model, anchors)
        self.session.memo[memo_key] = measured
        self.measured = measured

    def recorded_server_misses(self) -> dict[str, dict[int, int]]:
        """Thread → message index → cache read of each server-side miss the recording shows.

        Measured by a recorded-mode replay under the same config (shared by every what-if
        replay of the session with that config).
        """
        memo_key = ("server_misses", self.config)
        found: dict[str, dict[int, int]] | None = self.session.memo.get(memo_key)
        if found is None:
            recorded = _Replay(
                self.session,
                self.config,
                "recorded",
                self.summarizer,
                None,
                self.preset_name,
                self.counter,
                self.pricing,
                self.steps,
            ).run()
            found = {
                tr.thread.id: {
                    r["message"]: r["cache"]["read"]
                    for r in tr.requests
                    if r["cache"]["reason"] == "server_miss"
                }
                for tr in recorded.threads
            }
            self.session.memo[memo_key] = found
        return found

    def run(self) -> ReplayResult:
        if self.position < 0:
            self.calibrate()
            if self.mode == "whatif" and self.config.cache_recorded_server_misses:
                self.server_misses = self.recorded_server_misses()
            # one cache for the session, fed in time order: threads sharing a prompt share entries
            self.cache_sim = CacheSimulator(
                lookback_blocks=self.config.cache_lookback_blocks,
                lookback_enabled=self.config.cache_lookback_enabled,
            )
            self.order = sorted(self.threads, key=_first_time)
            self.position = 0
        main_cal = self.measured[self.threads[0].id][1] if self.threads else None
        while self.position < len(self.order):
            thread = self.order[self.position]
            raw, cal, per_model, anchors = self.measured[thread.id]
            if cal is None:
                inherited = main_cal if _continues_main(thread) else None
                cal = (
                    Calibration(
                        inherited.prefix_tokens, inherited.ratio, 0, None, None, "inherited"
                    )
                    if inherited
                    else DEFAULT_CALIBRATION
                )
            if self.runner is None:
                self.runner = _ThreadReplay(
                    self.session,
                    thread,
                    self.config,
                    self.mode,
                    self.counter,
                    self.summarizer,
                    self.log,
                    cal,
                    raw,
                    self.pricing,
                    self.steps,
                    progress=self.tick,
                )
                self.runner.model_calibrations = per_model
                self.runner.anchors = anchors
                self.runner.cache_sim = self.cache_sim
                self.runner.server_misses = self.server_misses.get(thread.id, {})
            runner = self.runner
            requests = runner.run(with_results=True)
            totals = [
                (r.message.usage.prompt_total if r.message.usage else 0) for r in runner.requests
            ]
            self.by_thread[thread.id] = ThreadResult(
                thread, requests, runner.raw, totals, cal, runner.summary_calls, per_model, anchors
            )
            self.runner = None
            self.position += 1
        return ReplayResult(
            session=self.session,
            mode=self.mode,
            preset=self.preset_name,
            config=self.config,
            threads=[self.by_thread[t.id] for t in self.threads],
            log=self.log,
            summarizer=self.summarizer.name,
        )

    # -- checkpoints --------------------------------------------------------------------------

    def _external(self) -> dict[int, tuple[Any, ...]]:
        """Objects a checkpoint refers to instead of copying (``persistent_id``)."""
        refs: dict[int, tuple[Any, ...]] = {id(self.session): ("session",)}
        refs[id(self.summarizer)] = ("summarizer",)
        if self.progress is not None:
            refs[id(self.progress)] = ("progress",)
        for t, thread in enumerate(self.session.threads):
            refs[id(thread)] = ("thread", t)
            refs[id(thread.messages)] = ("messages", t)
            for m, message in enumerate(thread.messages):
                refs[id(message)] = ("message", t, m)
        return refs

    def checkpoint(self) -> bytes:
        refs = self._external()
        buffer = io.BytesIO()
        pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.persistent_id = lambda obj: refs.get(id(obj))  # type: ignore[method-assign]
        pickler.dump((CHECKPOINT_VERSION, self))
        return buffer.getvalue()

    @staticmethod
    def restore(
        data: bytes,
        session: Session,
        summarizer: Summarizer,
        progress: ProgressCallback | None,
    ) -> _Replay:
        def load(pid: tuple[Any, ...]) -> Any:
            kind = pid[0]
            if kind == "session":
                return session
            if kind == "summarizer":
                return summarizer
            if kind == "progress":
                return progress
            thread = session.threads[pid[1]]
            if kind == "thread":
                return thread
            if kind == "messages":
                return thread.messages
            return thread.messages[pid[2]]

        unpickler = pickle.Unpickler(io.BytesIO(data))
        unpickler.persistent_load = load  # type: ignore[assignment]
        version, state = unpickler.load()
        if version != CHECKPOINT_VERSION or not isinstance(state, _Replay):
            raise ValueError("checkpoint written by another engine version")
        state.progress = progress  # the caller's, also when the first run had none
        return state


#: Bump when the replay's state changes shape (a checkpoint of another version is refused).
CHECKPOINT_VERSION = 2


def replay(
    session: Session,
    config: PipelineConfig,
    *,
    mode: str = "recorded",
    summarizer: Summarizer | None = None,
    progress: ProgressCallback | None = None,
    preset_name: str = "",
    counter: TokenCounter | None = None,
    pricing: PricingTable | None = None,
    steps: tuple[Step, ...] = DEFAULT_STEPS,
    checkpoint: bool = False,
) -> ReplayResult:
    """Replay every thread of ``session`` under ``config``.

    ``mode="recorded"`` rebuilds what Claude Code sent, from the transcript's own records;
    ``mode="whatif"`` removes the recorded compaction artifacts and lets ``config`` decide.
    ``progress(done, total)`` is called as requests complete (total = all requests).
    With ``checkpoint=True``, a ``SummaryPending`` carries ``checkpoint`` bytes that
    ``resume`` continues from, once the summary can be had.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    state = _Replay(
        session,
        config,
        mode,
        summarizer or ExtractiveSummarizer(),
        progress,
        preset_name,
        counter or TiktokenCounter(),
        pricing or load_pricing(),
        steps,
    )
    return _run(state, checkpoint)


def resume(
    data: bytes,
    session: Session,
    *,
    summarizer: Summarizer,
    progress: ProgressCallback | None = None,
) -> ReplayResult:
    """Continue a replay from a ``SummaryPending.checkpoint`` of the same session.

    Raises ``ValueError`` for a checkpoint of another engine version (replay from the start).
    """
    return _run(_Replay.restore(data, session, summarizer, progress), True)


def _run(state: _Replay, checkpoint: bool) -> ReplayResult:
    from .summarizing import SummaryPending

    try:
        return state.run()
    except SummaryPending as pending:
        if checkpoint:
            pending.checkpoint = state.checkpoint()
        raise
