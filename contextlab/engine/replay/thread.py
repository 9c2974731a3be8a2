"""One thread's replay, request by request: the steps change the view, then the request is measured.

Per request: the new messages enter the view, each pipeline step applies (a step waiting for a
summary stops the replay there; ``run`` resumes it at that step), then the view is counted
(display count, with the anchors), Claude Code's decision count is taken, the prompt cache is
estimated and the request priced into its row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, cast

from contextlab.engine.config.presets import thread_window
from contextlab.engine.input.model import Usage
from contextlab.engine.input.session import RequestInfo, RequestList, Thread, thread_requests
from contextlab.engine.input.timestamps import epoch_seconds as parse_time
from contextlab.engine.measures.anchors import ThreadAnchors
from contextlab.engine.measures.cost import PricingTable, iterations_cost, model_price
from contextlab.engine.measures.prompt_cache import CacheSimulator
from contextlab.engine.measures.tokens import Calibration, TiktokenCounter
from contextlab.engine.pipeline.base import StepContext, TransformLog, View
from contextlab.engine.results import CacheRow, RecordedUsage, RequestRow

from .cache_estimate import CacheEstimator
from .compaction_bill import bill_compaction
from .decision import DecisionCounter
from .forecast import ESTIMATED_OUTPUT
from .recorded_cache import cache_disagreement, recorded_row
from .recording import read_recording, session_dir
from .state import (
    Calibrations,
    ReplayInputs,
    ThreadTrace,
    ThresholdsByModel,
    anchored_tokens,
    continues_main,
    window_evidence,
)

#: ``StepContext``'s fields without a default, in the order ``_begin_request`` hands them over
#: positionally (checked here, so a reordering of the fields cannot shift them silently)
_CONTEXT_FIELDS = (
    "k",
    "request",
    "view",
    "config",
    "thresholds",
    "mode",
    "new_range",
    "turn_start",
    "now",
    "state",
    "events",
    "decision_count",
    "prompt_estimate",
    "session",
    "summarizer",
)
if tuple(f.name for f in fields(StepContext))[: len(_CONTEXT_FIELDS)] != _CONTEXT_FIELDS:
    raise ImportError(f"StepContext's fields are no longer {_CONTEXT_FIELDS}: update thread.py")


@dataclass
class ReplayPosition:
    """Where a thread's replay is: what a resumed replay picks up."""

    #: the first message whose request is emitted (a branch replays the main chain before it)
    first_emitted: int
    next: int = 0
    prev_end: int = 0
    last_time: float | None = None
    ttl: str = "5m"
    results: list[RequestRow] = field(default_factory=list)
    #: the request being replayed and the step it stopped at (None between requests)
    pending: tuple[StepContext, int] | None = None


class ThreadReplay:
    """The replay of one thread under one config and mode."""

    def __init__(
        self,
        inputs: ReplayInputs,
        thread: Thread,
        log: TransformLog,
        calibrations: Calibrations,
        *,
        recorded_raw: list[int] | None = None,
        anchors: ThreadAnchors | None = None,
        cache_sim: CacheSimulator | None = None,
        server_misses: dict[int, int] | None = None,
        progress: Callable[[int], None] | None = None,
        probe: ThreadReplay | None = None,
    ) -> None:
        """``probe``: the calibration's pass over this thread in this replay, when no other
        thread's calibration ran after it (its view's base sizes are this view's when both
        read the same texts)."""
        self.inputs = inputs
        self.thread = thread
        config = inputs.config
        if config.window_from_records:
            window = thread_window(*window_evidence(thread), config.context_window)
            if window != config.context_window:
                config = config.replace(context_window=window)
        #: the session's config, with this thread's own window when it shows one
        self.config = config
        self.log = log
        self.calibrations = calibrations
        #: pass 1's anchors (None in pass 1 itself, which measures the plain view)
        self.anchors = anchors
        self.progress = progress
        # the probe's requests: the same thread, unchanged since (a new list of the same items)
        self.requests: RequestList = (
            RequestList(thread, probe.requests)
            if probe is not None and probe.thread is thread
            else thread_requests(thread)
        )
        self.recording = read_recording(inputs.session, thread, self.requests, inputs.mode)
        measured: View | None = (
            probe.view
            if probe is not None
            and probe.thread is thread
            and probe.inputs.counter is inputs.counter
            and not probe.recording.restored
            and not self.recording.restored
            and probe.recording.hidden == self.recording.hidden
            and len(probe.view.msg_tok) == len(thread.messages)
            else None
        )
        self.view: View = View(
            thread,
            inputs.counter,
            log,
            self.recording.base_text,
            self.recording.hidden,
            text_tokens=shared_text_tokens(inputs),
            measured=measured,
            # (a recorded replay restores nothing: no ``base_text`` call per block)
            restores=bool(self.recording.restored),
        )
        #: what the pipeline steps keep between requests
        self.state: dict[str, Any] = (
            # where Claude Code saved tool results: only what-if writes such paths
            # (persistence, budget), and finding it walks every block of the thread
            {"session_dir": session_dir(inputs.session, thread)} if inputs.mode == "whatif" else {}
        )
        self.thresholds = ThresholdsByModel(config)
        self.trace = ThreadTrace()
        self.decisions = DecisionCounter(
            view=self.view,
            requests=self.requests,
            recording=self.recording,
            trace=self.trace,
            calibrations=calibrations,
            thresholds=self.thresholds,
            config=config,
            mode=inputs.mode,
            recorded_raw=recorded_raw,
        )
        self.cache = CacheEstimator(
            thread=thread,
            view=self.view,
            config=config,
            mode=inputs.mode,
            sim=cache_sim,
            anchors=anchors,
            server_misses=server_misses or {},
        )
        self.summary_calls = 0
        self._position: ReplayPosition | None = None
        #: stop before this request (a live replay keeps its state there: ``replay.live``)
        self.stop_before: int | None = None

    def run(self, *, with_results: bool) -> list[RequestRow]:
        """Replay the thread's requests; resumable where a ``SummaryPending`` stopped it.

        The loop's state lives on the object, and a request interrupted inside a step is
        resumed at that step (steps before it already changed the view for this request).
        """
        if self._position is None:
            self._position = self._start()
        at = self._position
        steps = self.inputs.steps
        every_step = range(len(steps))
        always, triggers = self._recorded_plan()
        messages = self.thread.messages

        def only_always(start: int, end: int) -> bool:
            """Recorded mode: whether new messages ``start:end`` hold none of the kinds that
            make a step outside ``always`` act (then only those run)."""
            if triggers:
                for i in range(start, end):  # (no generator: this runs for every request)
                    if messages[i].kind in triggers:
                        return False
            return True

        # a pass without results where the steps that run on every request only label it: a
        # request that no other step acts on is measured without a step context
        measure_quiet = (
            not with_results
            and always is not None
            and all(getattr(steps[i], "labels_only", False) for i in always)
        )
        while at.next < len(self.requests):
            if self.stop_before is not None and at.next >= self.stop_before:
                break
            req = self.requests[at.next]
            if at.pending is None:
                if measure_quiet and only_always(at.prev_end, req.position):
                    now, _ = self._enter_request(req, at)
                    self._measure_request(req, now, (), at)
                    at.next += 1
                    continue
                at.pending = (self._begin_request(req, at), 0)
            ctx, first_step = at.pending
            ctx.with_results = with_results
            order: Sequence[int] = every_step if first_step == 0 else range(first_step, len(steps))
            if always is not None and first_step == 0 and only_always(*ctx.new_range):
                # recorded mode: a request whose new messages hold none of the kinds that make
                # a step act runs only the steps that act on every request
                order = always
            i = first_step
            try:
                for i in order:
                    ctx.blocking_count = None  # a step may change the view: count again after it
                    steps[i].apply(ctx)
            except BaseException:
                # where a resumed replay picks up (kept only when a step stops the request:
                # a tuple per step would cost every request nine)
                at.pending = (ctx, i)
                raise
            at.pending = None
            self._finish_request(req, ctx, at, with_results=with_results)
            at.next += 1
        self.summary_calls = int(self.state.get("summary_calls", 0))
        return at.results

    def _recorded_plan(self) -> tuple[tuple[int, ...] | None, frozenset[str]]:
        """Recorded mode: the steps that may act on any request (their indices), and the
        message kinds whose arrival among a request's new messages makes one of the others act
        (each step's ``recorded_triggers``; a step without it may act on any request).
        ``(None, …)`` in what-if mode, where every step runs on every request. Asked once per
        ``run``: a live session's grown recording may bring what a step acts on."""
        if self.inputs.mode != "recorded":
            return None, frozenset()
        always: list[int] = []
        triggers: set[str] = set()
        for i, step in enumerate(self.inputs.steps):
            read = getattr(step, "recorded_triggers", None)
            kinds = read(self.inputs.session) if read is not None else None
            if kinds is None:
                always.append(i)
            else:
                triggers.update(kinds)
        return tuple(always), frozenset(triggers)

    def replayed(self) -> int:
        """Requests replayed so far (a live session's continuation starts at the next)."""
        return self._position.next if self._position is not None else 0

    @property
    def position(self) -> ReplayPosition | None:
        """Where the replay stands (None before it started): a live state's dump reads its
        rows (``replay.live``)."""
        return self._position

    def _start(self) -> ReplayPosition:
        self.state["recorded_summaries"] = self.recording.summaries
        self.state["recorded_preserved"] = self.recording.preserved
        self.state["recorded_kept_after"] = self.recording.kept_after
        return ReplayPosition(
            first_emitted=self.thread.fork_index if continues_main(self.thread) else 0
        )

    def _enter_request(self, req: RequestInfo, at: ReplayPosition) -> tuple[float, bool]:
        """The request's messages enter the view: its time and whether it starts a turn."""
        view = self.view
        k = req.index
        p = req.position
        turn_start = k == 0
        if not turn_start:
            for m in self.thread.messages[at.prev_end : p]:
                if m.role == "user" and m.kind in ("prompt", "command"):
                    turn_start = True
                    break
        now = parse_time(req.message.timestamp) or (at.last_time or 0.0)
        if turn_start and k > 0 and view.overrides:
            view.drop_turn_overrides(k - 1)
        view.end = p
        self.state["last_assistant_time"] = at.last_time
        return now, turn_start

    def _begin_request(self, req: RequestInfo, at: ReplayPosition) -> StepContext:
        k = req.index
        new_range = (at.prev_end, req.position)
        now, turn_start = self._enter_request(req, at)
        cal = self.calibrations.for_model(req.message.model)
        # positional, in the fields' order (``_CONTEXT_FIELDS``): a context per request, where
        # fifteen keywords cost a third of its construction
        return StepContext(
            k,
            req,
            self.view,
            self.config,
            self.thresholds.for_model(req.message.model),
            self.inputs.mode,
            new_range,
            turn_start,
            now,
            self.state,
            [],
            functools.partial(self.decisions.count, k),
            functools.partial(self._prompt_estimate, cal, k),
            self.inputs.session,
            self.inputs.summarizer,
        )

    def _measure_request(
        self,
        req: RequestInfo,
        now: float,
        events: Sequence[dict[str, Any]],
        at: ReplayPosition,
    ) -> tuple[Calibration, int, int, int, int, int, int]:
        """The view as the steps left it, measured into the trace: ``(calibration, raw,
        raw the anchors add, earlier history's raw, plain tokens, model tokens, unrecorded)``."""
        trace = self.trace
        k = req.index
        cal = self.calibrations.for_model(req.message.model)
        raw = self.view.raw_tokens()
        if events and any(
            e["step"] == "autocompact" and e["action"] == "compacted" for e in events
        ):
            trace.compacted_once = True
            trace.compactions_at.append(k)
        history_raw, segment_raw, unrecorded = anchored_tokens(
            self.anchors, k, trace.compacted_once
        )
        extra_raw = history_raw + segment_raw
        # the view's calibrated size, also the base of the part the anchors add (one
        # ``apply`` where they add nothing raw)
        plain_tokens = cal.apply(raw)
        model_tokens = (plain_tokens if not extra_raw else cal.apply(raw + extra_raw)) + unrecorded
        trace.raw.append(raw)
        trace.model_tokens.append(model_tokens)
        self.state["last_model_tokens"] = model_tokens
        at.prev_end = req.position
        # the request's time as ``_enter_request`` read it (``now``): its own when it has one,
        # else the previous request's, which is then ``last_time`` already (0.0 when there was
        # none: ``last_time`` stays None)
        if at.last_time is not None or now:
            at.last_time = now
        return cal, raw, extra_raw, history_raw, plain_tokens, model_tokens, unrecorded

    def _finish_request(
        self, req: RequestInfo, ctx: StepContext, at: ReplayPosition, *, with_results: bool
    ) -> None:
        view = self.view
        k = req.index
        p = req.position
        now = ctx.now
        thresholds = ctx.thresholds
        events = ctx.events
        cal, raw, extra_raw, history_raw, plain_tokens, model_tokens, unrecorded = (
            self._measure_request(req, now, events, at)
        )
        if self.anchors is not None and with_results and self.anchors.anchors:
            # one event per anchor, on the request it was measured at (both modes: the agent
            # sent that input whatever the pipeline does)
            events.extend(
                {"step": "anchor", "action": a.kind, **cast(dict[str, Any], a.to_json())}
                for a in self.anchors.anchors
                if a.request == k
            )
        if not with_results:
            return
        # the blocking check's count when it applied last (the view has not changed since)
        counted = ctx.blocking_count
        decision = (self.decisions.count(k) if counted is None else counted) - ctx.snip_freed
        usage = req.message.usage
        at.ttl = ttl = self.cache.ttl(usage, at.ttl)
        estimate = self.cache.estimate(
            cal, model_tokens, req, now, ttl, model_tokens - plain_tokens
        )
        cost_estimate, iteration_cost, recorded, recorded_cost = price_request(
            req, usage, estimate, self.inputs.pricing
        )
        # recorded facts first: a recorded replay shows the recorded usage and its price
        cache, cost, gap, disagrees = estimate, cost_estimate, None, False
        if self.inputs.mode == "recorded" and usage is not None and recorded_cost is not None:
            cache = recorded_row(usage, estimate, self.cache.blocks)
            cost = recorded_cost
            gap, disagrees = cache_disagreement(cache, estimate)
        repl_raw = view.cum_tok[p]
        if p < at.first_emitted:
            return
        if events:  # only a compaction's event gets a bill
            self._bill_compactions(req, ctx, cal, events, ttl)
        at.results.append(
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
                "cache_estimate": estimate,
                "cache_read_gap": gap,
                "cache_disagrees": disagrees,
                "ttl": ttl,
                "cost_usd": round(cost, 6),
                "cost_estimate_usd": round(cost_estimate, 6),
                "recorded_cost_usd": round(recorded_cost, 6) if recorded_cost is not None else None,
                "iteration_cost_usd": round(iteration_cost, 6),
                "thresholds": {
                    "effective": thresholds.effective_window,
                    "autocompact": thresholds.autocompact_threshold,
                    "warning": thresholds.warning_threshold,
                    "blocking": thresholds.blocking_limit,
                },
                "events": events,
                "turn_start": ctx.turn_start,
                "branch": self.thread.kind == "branch",
                "blocked": ctx.blocked,
                "view": {
                    "head": [h.ref for h in view.head] if view.head else [],
                    "start": view.start,
                    "end": view.end,
                },
            }
        )
        if self.progress is not None:
            self.progress(1)

    def _bill_compactions(
        self,
        req: RequestInfo,
        ctx: StepContext,
        cal: Calibration,
        events: list[dict[str, Any]],
        ttl: str,
    ) -> None:
        """Attach to each compaction of this request its own call's bill (``compaction_bill``)."""
        k = req.index
        for event in events:
            if event["step"] != "autocompact" or event["action"] != "compacted":
                continue
            summary = event.get("summary_message")
            raw = (
                self.view.msg_tok[summary]
                if isinstance(summary, int)
                else int(event.get("summary_tokens") or 0)
            )
            sent = (
                parse_time(self.thread.messages[req.position - 1].timestamp)
                if req.position
                else None
            )
            previous = self.state.get("last_assistant_time")
            gap = (sent or ctx.now) - previous if previous is not None else None
            # past the TTL the static system prompt reads only where the cache model keeps it
            # alive (``CacheEstimator.system_survives``)
            system = self.cache.system_tokens(cal) if self.cache.system_survives(gap) else 0
            event["call"] = bill_compaction(
                event,
                model=req.message.model,
                previous_prompt=self.trace.model_tokens[k - 1] if k > 0 else None,
                gap_seconds=gap,
                ttl=ttl,
                summary_tokens=round(cal.ratio * raw),
                system_tokens=system,
                pricing=self.inputs.pricing,
            )

    def _prompt_estimate(self, cal: Calibration, k: int) -> int:
        """The display count of the view as it is now, anchors included."""
        history_raw, segment_raw, unrecorded = anchored_tokens(
            self.anchors, k, self.trace.compacted_once
        )
        return cal.apply(self.view.raw_tokens() + history_raw + segment_raw) + unrecorded


def shared_text_tokens(inputs: ReplayInputs) -> dict[int, int] | None:
    """The session's counts of synthetic texts (restored files: the same ones in pass 1 and 2
    and under every config), when the replay counts with the engine's own tokenizer; another
    counter keeps its counts to its own view."""
    if type(inputs.counter) is not TiktokenCounter:
        return None
    found: dict[int, int] = inputs.session.memo.setdefault("tiktoken_text_tokens", {})
    return found


def price_request(
    req: RequestInfo, usage: Usage | None, cache: CacheRow, pricing: PricingTable
) -> tuple[float, float, RecordedUsage | None, float | None]:
    """``(cost, iteration cost, recorded usage, recorded cost)`` of a request: its estimated
    prompt as the cache model split it, and (when it recorded a prompt) its recorded usage."""
    # a response whose usage a forecast left out: its output as estimated from its content
    output = usage.output if usage else int(req.message.metadata.get(ESTIMATED_OUTPUT, 0))
    # (``request_cost`` twice, with the model's rates found once)
    price = model_price(req.message.model, pricing)
    cost = (
        price.cost(
            uncached=cache["uncached"],
            cache_read=cache["read"],
            cache_write_5m=cache["write_5m"],
            cache_write_1h=cache["write_1h"],
            output=output,
        )
        if price is not None
        else 0.0
    )
    # the server's further calls inside the request (an advisor, a tool loop) are taken
    # as recorded in both modes: the agent made them whatever the pipeline did
    iteration_cost = (
        (iterations_cost(req.message.model, usage, pricing) if usage.iterations else 0)
        if usage is not None
        else 0.0
    )
    cost += iteration_cost
    recorded: RecordedUsage | None = None
    recorded_cost = None
    if usage is not None and usage.prompt_total > 0:
        recorded = cast(RecordedUsage, usage.to_json())
        rec_1h = usage.cache_write_1h if usage.cache_write_1h is not None else 0
        rec_5m = usage.cache_write - rec_1h
        recorded_cost = iteration_cost + (
            price.cost(
                uncached=usage.input,
                cache_read=usage.cache_read,
                cache_write_5m=rec_5m,
                cache_write_1h=rec_1h,
                output=usage.output,
            )
            if price is not None
            else 0.0
        )
    return cost, iteration_cost, recorded, recorded_cost
