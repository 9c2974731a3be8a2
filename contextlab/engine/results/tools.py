"""A session's tools one by one: how often each was called, how often it failed, what its calls
and results weigh in the full history and in what the model saw, and a share of the cost.

``tool_breakdown`` reads a stored result (``ReplayResult.to_json()``) and its session's
messages (``explorer.messages_json``, expanded), so it runs once per finished run and its
answer is kept with the result. It covers the main conversation and its branches (the rows of
``result["requests"]``); a subagent's own tool calls are its own session's.

* ``calls`` and ``errors`` are recorded facts: the tool calls in the transcript and the tool
  results it marks ``is_error``. Codex function calls count as tool calls (no error flag is
  recorded there, so their errors stay 0).
* ``history_tokens``: display tokens (tiktoken × the thread's calibration ratio, the scale of
  ``model_tokens``) of the tool's calls and results as the transcript holds them.
* ``seen_tokens``: what of them the model saw at the last request (after persisted previews,
  microcompact clearing, snips, collapses and compactions); ``sent_tokens``: the same summed
  over every request, i.e. what was sent (and billed) again and again.
* ``cost_usd`` is an estimate: each request's cost split by the share of its prompt
  (``model_tokens``) the tool's blocks took, summed. It is not a recorded figure.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, islice
from typing import Any, TypedDict

from contextlab.engine.measures.tokens import TiktokenCounter
from contextlab.engine.results import RequestRow, ResultJson, as_result
from contextlab.engine.results.explorer import TransformIndex

#: bump when a key of the breakdown changes meaning (a stored breakdown of another version is
#: computed again)
BREAKDOWN_VERSION = 1
#: the key a stored result keeps its breakdown under (beside the engine's own keys)
TOOL_BREAKDOWN_KEY = "tool_breakdown"
#: how a tool's cost share is worked out, for the pages and the API
ATTRIBUTION = (
    "estimate: each request's cost split by the share of its prompt the tool's calls and "
    "results took, summed over the requests"
)
TOOL_BLOCKS = ("tool_use", "tool_result")


class ToolRow(TypedDict):
    """One tool of a session."""

    tool: str
    #: tool calls in the transcript (recorded)
    calls: int
    #: its results the transcript marks as errors (recorded)
    errors: int
    #: display tokens of its calls and results in the full history
    history_tokens: int
    #: display tokens of them in the model's view at the last request
    seen_tokens: int
    #: display tokens of them summed over every request's model view
    sent_tokens: int
    #: estimated cost attributable to it (``ATTRIBUTION``), in dollars
    cost_usd: float
    #: positions (0-based ``index``) of the requests whose response calls the tool
    requests: list[int]


class ToolBreakdown(TypedDict):
    """Every tool of a session, most costly first."""

    version: int
    tools: list[ToolRow]
    #: the cost the shares are taken from (main conversation and branches), in dollars
    cost_usd: float
    #: how ``ToolRow.cost_usd`` is attributed
    attribution: str


def tool_names(messages: Sequence[Mapping[str, Any]]) -> list[str | None]:
    """For each block of ``messages`` in order, the tool it belongs to (None: not a tool's);
    a result is named by its call (``tool_use_id``) when it carries no name itself."""
    by_id: dict[str, str] = {}
    out: list[str | None] = []
    for msg in messages:
        for block in msg.get("blocks") or []:
            name = block.get("tool_name")
            if block.get("type") == "tool_use":
                if name and block.get("tool_use_id"):
                    by_id[str(block["tool_use_id"])] = str(name)
            elif block.get("type") == "tool_result" and not name:
                name = by_id.get(str(block.get("tool_use_id") or ""))
            out.append(str(name) if name and block.get("type") in TOOL_BLOCKS else None)
    return out


class _ThreadTools:
    """One thread's tool blocks, indexed: raw tokens per tool as running totals over the
    messages, and each block's tool, so a request's view is summed without walking it.
    Built message by message (``extend``), so a live session's next version goes on from a
    copy of the last one's index over its first messages (``prefix``)."""

    def __init__(self, count: Any, original_outputs: bool) -> None:
        self.count = count
        self.original_outputs = original_outputs
        #: the tool of each call id seen so far (a result without a name is its call's)
        self.by_id: dict[str, str] = {}
        #: per message, its tool blocks: block position -> (tool, raw tokens)
        self.message_block_tools: list[dict[int, tuple[str, int]]] = []
        self.message_tools: list[dict[str, int]] = []
        self.called: list[list[str]] = []
        #: per tool, raw tokens of messages ``[0, i)`` at ``i``: the tool's first message
        self.totals: dict[str, list[int]] = {}
        self.first_message: dict[str, int] = {}

    def extend(self, messages: Sequence[Mapping[str, Any]], end: int | None = None) -> None:
        """Index ``messages`` from the first not indexed yet up to ``end`` (all by default)."""
        start = len(self.message_tools)
        end = len(messages) if end is None else end
        by_id = self.by_id
        for mi in range(start, end):
            msg = messages[mi]
            per_tool: dict[str, int] = {}
            called: list[str] = []
            tool_blocks: dict[int, tuple[str, int]] = {}
            for bj, block in enumerate(msg.get("blocks") or []):
                kind = block.get("type")
                name = block.get("tool_name")
                if kind == "tool_use":
                    if name and block.get("tool_use_id"):
                        by_id[str(block["tool_use_id"])] = str(name)
                elif kind == "tool_result" and not name:
                    name = by_id.get(str(block.get("tool_use_id") or ""))
                if not name or kind not in TOOL_BLOCKS:
                    continue
                name = str(name)
                tokens = block.get("tokens")
                if self.original_outputs and block.get("persisted") and msg.get("original_output"):
                    # a what-if sees the whole output in the history (it persists it again)
                    tokens = self.count(str(msg["original_output"]))
                elif not isinstance(tokens, int):
                    tokens = self.count(str(block.get("text") or ""))
                tool_blocks[bj] = (name, int(tokens))
                per_tool[name] = per_tool.get(name, 0) + int(tokens)
                if kind == "tool_use":
                    called.append(name)
                if name not in self.first_message:
                    self.first_message[name] = mi
                    self.totals[name] = [0] * (start + 1)
            self.message_tools.append(per_tool)
            self.message_block_tools.append(tool_blocks)
            self.called.append(called)
        added = self.message_tools[start:end]
        for name, running in self.totals.items():
            # running totals, summed in C (a Python loop per tool and message was most of a
            # long session's breakdown)
            sums = accumulate((tools.get(name, 0) for tools in added), initial=running[-1])
            running.extend(islice(sums, 1, None))  # (the initial value is there already)

    def snapshot(self) -> _ThreadTools:
        """A copy of the index as it is, to go on from later (its per-message entries are
        shared: never changed once made)."""
        copy = _ThreadTools(self.count, self.original_outputs)
        copy.message_block_tools = list(self.message_block_tools)
        copy.message_tools = list(self.message_tools)
        copy.called = list(self.called)
        copy.first_message = dict(self.first_message)
        copy.totals = {name: list(running) for name, running in self.totals.items()}
        copy.by_id = dict(self.by_id)
        return copy

    def in_range(self, start: int, end: int) -> dict[str, int]:
        """Raw tokens per tool of messages ``start`` to ``end``."""
        end = max(0, min(end, len(self.message_tools)))
        start = max(0, min(start, end))
        return {
            name: running[end] - running[start]
            for name, running in self.totals.items()
            if running[end] > running[start]
        }

    def block(self, mi: int, bj: int) -> tuple[str, int] | None:
        """The tool of block ``bj`` of message ``mi`` and its raw tokens (None: no tool's)."""
        if mi >= len(self.message_block_tools):
            return None
        return self.message_block_tools[mi].get(bj)


def _response_tools(
    request: RequestRow, messages: Sequence[Mapping[str, Any]], tools: _ThreadTools
) -> set[str]:
    """Tools the request's response calls: its assistant message and the ones after it with
    the same message id (Claude Code writes a response's blocks as records of their own)."""
    first = request["message"]
    end = _response_end(request, messages)
    out: set[str] = set()
    for mi in range(max(0, first), min(end, len(messages))):
        out.update(tools.called[mi])
    return out


def _response_end(request: RequestRow, messages: Sequence[Mapping[str, Any]]) -> int:
    """The message after the request's response (the walk of ``_response_tools`` reads the
    messages before it, and its role and id; ``len(messages)``: it reached the end)."""
    first = request["message"]
    for mi in range(max(0, first), len(messages)):
        msg = messages[mi]
        if msg.get("role") != "assistant":
            return mi
        if mi > first and msg.get("message_id") != request["message_id"]:
            return mi
        if request["message_id"] is None:
            return mi + 1
    return len(messages)


def _ratio(result: ResultJson, request: RequestRow) -> float:
    """Display tokens per tiktoken token of the request's thread (and model)."""
    session = result["session"]
    info = next((t for t in session["threads"] if t["id"] == request["thread"]), None)
    fit: Mapping[str, Any] | None = None
    if info is not None:
        fit = info.get("model_calibrations", {}).get(request["model"] or "") or info.get(
            "calibration"
        )
    fit = fit or session.get("calibration")
    ratio = float((fit or {}).get("ratio") or 1.0)
    return ratio if ratio > 0 else 1.0


class _BlockTally:
    """Calls, errors and history tokens per tool of the blocks tallied so far: each block
    once, however many threads share it."""

    def __init__(self) -> None:
        self.counted: set[str] = set()
        self.calls: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        #: rounded once per tool (``_rows``), as the seen and sent figures are: rounding each
        #: block could put the history under what the model saw of it
        self.history: dict[str, float] = {}

    def add(
        self,
        thread: str,
        messages: Sequence[Mapping[str, Any]],
        index: _ThreadTools,
        ratio: float,
        start: int,
        end: int,
    ) -> None:
        """Tally the tool blocks of messages ``start`` to ``end`` (indexed in ``index``)."""
        for mi in range(start, end):
            for bj, (name, tokens) in index.message_block_tools[mi].items():
                block = messages[mi]["blocks"][bj]
                key = str(block.get("tool_use_id") or f"{thread}:{mi}:{bj}") + ":" + block["type"]
                if key in self.counted:
                    continue
                self.counted.add(key)
                self.history[name] = self.history.get(name, 0.0) + tokens * ratio
                self.calls.setdefault(name, 0)
                self.errors.setdefault(name, 0)
                if block["type"] == "tool_use":
                    self.calls[name] += 1
                elif block.get("is_error"):
                    self.errors[name] += 1

    def copy(self) -> _BlockTally:
        copy = _BlockTally()
        copy.counted = set(self.counted)
        copy.calls = dict(self.calls)
        copy.errors = dict(self.errors)
        copy.history = dict(self.history)
        return copy


class _RequestTally:
    """Sent tokens, cost shares and calling requests per tool of the requests tallied so
    far (in order: the float sums are the same only summed in the same order)."""

    def __init__(self) -> None:
        self.sent: dict[str, int] = {}
        self.cost: dict[str, float] = {}
        self.seen: dict[str, int] = {}
        self.requests: dict[str, list[int]] = {}
        self.total_cost = 0.0

    def add(
        self,
        request: RequestRow,
        messages: Sequence[Mapping[str, Any]],
        index: _ThreadTools,
        transforms: TransformIndex,
        ratio: float,
        last_main: int | None,
        text_tokens: dict[int, int],
    ) -> None:
        seen = _seen_raw(request, index, transforms, text_tokens, index.count)
        prompt = request["model_tokens"] or 1
        self.total_cost += request["cost_usd"]
        for name, raw in seen.items():
            tokens = round(raw * ratio)
            self.sent[name] = self.sent.get(name, 0) + tokens
            self.cost[name] = self.cost.get(name, 0.0) + request["cost_usd"] * min(
                1.0, tokens / prompt
            )
            if request["index"] == last_main:
                self.seen[name] = tokens
        for name in sorted(_response_tools(request, messages, index)):
            self.requests.setdefault(name, []).append(request["index"])

    def copy(self) -> _RequestTally:
        copy = _RequestTally()
        copy.sent = dict(self.sent)
        copy.cost = dict(self.cost)
        copy.seen = dict(self.seen)
        copy.requests = {name: list(found) for name, found in self.requests.items()}
        copy.total_cost = self.total_cost
        return copy


def _breakdown(blocks: _BlockTally, tally: _RequestTally) -> ToolBreakdown:
    names = dict.fromkeys([*blocks.calls, *tally.sent, *tally.requests])
    rows: list[ToolRow] = [
        {
            "tool": name,
            "calls": blocks.calls.get(name, 0),
            "errors": blocks.errors.get(name, 0),
            "history_tokens": round(blocks.history.get(name, 0.0)),
            "seen_tokens": tally.seen.get(name, 0),
            "sent_tokens": tally.sent.get(name, 0),
            "cost_usd": round(tally.cost.get(name, 0.0), 6),
            "requests": tally.requests.get(name, []),
        }
        for name in names
    ]
    return {
        "version": BREAKDOWN_VERSION,
        "tools": sorted(rows, key=lambda t: (-t["cost_usd"], -t["calls"], t["tool"])),
        "cost_usd": round(tally.total_cost, 6),
        "attribution": ATTRIBUTION,
    }


def tool_breakdown(
    data: Mapping[str, Any],
    messages: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    counter: TiktokenCounter | None = None,
) -> ToolBreakdown:
    """See the module docstring. ``messages``: every thread's whole message list."""
    result = as_result(data)
    count = (counter or TiktokenCounter()).count
    whatif = result["session"].get("mode") == "whatif"
    requests = result["requests"]
    threads: dict[str, _ThreadTools] = {}
    transforms: dict[str, TransformIndex] = {}
    text_tokens: dict[int, int] = {}  # id of a transform -> raw tokens of its text
    blocks = _BlockTally()
    ratios: dict[str, float] = {}
    for request in requests:
        ratios.setdefault(request["thread"], _ratio(result, request))
    for thread, ratio in ratios.items():
        thread_messages = messages.get(thread) or []
        index = threads[thread] = _ThreadTools(count, whatif)
        index.extend(thread_messages)
        blocks.add(thread, thread_messages, index, ratio, 0, len(thread_messages))
        transforms[thread] = TransformIndex(result["views"]["transforms"], thread)
    tally = _RequestTally()
    last_main = max((r["index"] for r in requests if r["thread"] == "main"), default=None)
    for request in requests:
        thread = request["thread"]
        tally.add(
            request,
            messages.get(thread) or [],
            threads[thread],
            transforms[thread],
            ratios[thread],
            last_main,
            text_tokens,
        )
    return _breakdown(blocks, tally)


@dataclass
class KeptTools:
    """What a live session's tools breakdown keeps of a version to go on from at the next
    (``tool_breakdown_on``): the index and block tallies of the thread's first ``len(rows)``
    messages (those rows, which the next version must share), and the request tallies of its
    first ``len(requests)`` requests (equal rows, and the transforms that held at them the
    same, ``transform_marks``)."""

    thread: str
    ratio: float
    rows: list[Mapping[str, Any]]
    index: _ThreadTools
    blocks: _BlockTally
    requests: list[RequestRow]
    transforms: list[tuple[Any, ...]]
    tally: _RequestTally


def transform_marks(transforms: TransformIndex, thread_requests: int) -> list[tuple[Any, ...]]:
    """What the requests before thread request ``thread_requests`` see of the transforms:
    those opened before it, each with its end if it ended before the last of them."""
    marks: list[tuple[Any, ...]] = []
    for t in transforms.items[: bisect_right(transforms.firsts, thread_requests - 1)]:
        last = t["last"]
        ended = last if last is not None and last < thread_requests - 1 else None
        marks.append((t["message"], t["block"], t["first"], ended, t.get("text")))
    return marks


def tool_breakdown_on(
    data: Mapping[str, Any],
    messages: Mapping[str, Sequence[Mapping[str, Any]]],
    stable: int,
    kept: KeptTools | None,
    *,
    counter: TiktokenCounter | None = None,
) -> tuple[ToolBreakdown, KeptTools | None, bool]:
    """``tool_breakdown`` of a live session's version, gone on from ``kept`` (the last
    version's; used up: it is changed) over the messages and requests after it, what the
    next version goes on from, and whether it went on from ``kept``. ``stable``: how many of the thread's first messages a longer
    version still has as they are (``waste_scan._stable``). A recorded replay of one thread
    only; any other is worked out whole (and keeps nothing). The breakdown is the whole one:
    what is kept is exactly the whole computation's state at that message and request."""
    result = as_result(data)
    requests = result["requests"]
    threads = {request["thread"] for request in requests}
    if result["session"].get("mode") == "whatif" or len(threads) != 1:
        return tool_breakdown(data, messages, counter=counter), None, False
    (thread,) = threads
    ratio = _ratio(result, requests[0])
    thread_messages = messages.get(thread) or []
    stable = min(stable, len(thread_messages))
    transforms = TransformIndex(result["views"]["transforms"], thread)
    went_on = (
        kept is not None
        and kept.thread == thread
        and kept.ratio == ratio
        and len(kept.rows) <= stable
        and len(kept.requests) < len(requests)
        and all(a is b for a, b in zip(kept.rows, thread_messages, strict=False))
        and requests[: len(kept.requests)] == kept.requests
        and transform_marks(transforms, _thread_requests(kept.requests)) == kept.transforms
    )
    if went_on:
        assert kept is not None
        index, blocks, tally = kept.index, kept.blocks, kept.tally
        start, settled = len(kept.rows), len(kept.requests)
    else:
        index = _ThreadTools((counter or TiktokenCounter()).count, False)
        blocks, tally = _BlockTally(), _RequestTally()
        start, settled = 0, 0
    index.extend(thread_messages, stable)
    blocks.add(thread, thread_messages, index, ratio, start, stable)
    kept_index, kept_blocks = index.snapshot(), blocks.copy()
    index.extend(thread_messages)
    blocks.add(thread, thread_messages, index, ratio, stable, len(thread_messages))
    last_main = max((r["index"] for r in requests if r["thread"] == "main"), default=None)
    text_tokens: dict[int, int] = {}
    kept_tally: _RequestTally | None = None
    for position in range(settled, len(requests)):
        request = requests[position]
        if kept_tally is None and not _settled(
            request, position, requests, thread_messages, stable
        ):
            kept_tally, settled = tally.copy(), position
        tally.add(request, thread_messages, index, transforms, ratio, last_main, text_tokens)
    if kept_tally is None:  # (no request: nothing to keep)
        return _breakdown(blocks, tally), None, went_on
    kept_requests = list(requests[:settled])
    return (
        _breakdown(blocks, tally),
        KeptTools(
            thread=thread,
            ratio=ratio,
            rows=list(thread_messages[:stable]),
            index=kept_index,
            blocks=kept_blocks,
            requests=kept_requests,
            transforms=transform_marks(transforms, _thread_requests(kept_requests)),
            tally=kept_tally,
        ),
        went_on,
    )


def _thread_requests(requests: Sequence[RequestRow]) -> int:
    return requests[-1]["thread_request"] + 1 if requests else 0


def _settled(
    request: RequestRow,
    position: int,
    requests: Sequence[RequestRow],
    messages: Sequence[Mapping[str, Any]],
    stable: int,
) -> bool:
    """Whether a longer version of the session tallies the request as this one does: not
    its last request (an append may complete its response), and all it reads of the
    messages (its view, its response and the message after it) among the stable ones."""
    if position >= len(requests) - 1:
        return False
    view = request["view"]
    if view["end"] > stable:
        return False
    return _response_end(request, messages) < stable


def _seen_raw(
    request: RequestRow,
    index: _ThreadTools,
    transforms: TransformIndex,
    text_tokens: dict[int, int],
    count: Any,
) -> dict[str, int]:
    """Raw tokens per tool in the request's model view: its head messages and its range, each
    block as the pipeline left it (a persisted preview, a cleared placeholder, nothing)."""
    view = request["view"]
    start, end = view["start"], view["end"]
    seen = index.in_range(start, end)
    head = sorted({int(ref[2:]) for ref in view["head"] if ref.startswith("m:")})
    for mi in head:
        if mi < start and mi < len(index.message_tools):
            for name, tokens in index.message_tools[mi].items():
                seen[name] = seen.get(name, 0) + tokens
    in_view = set(head)
    for (mi, bj), transform in transforms.active(request["thread_request"]).items():
        if not (start <= mi < end or mi in in_view):
            continue
        if bj == -1:
            blocks = (
                list(index.message_block_tools[mi]) if mi < len(index.message_block_tools) else []
            )
        else:
            blocks = [bj]
        for block in blocks:
            found = index.block(mi, block)
            if found is None:
                continue
            tool, raw = found
            # what the model saw instead: the transform's text on the block it names (a
            # whole-message transform shows its text, if any, on the message's first block)
            shown = transform.get("text")
            if bj == -1 and block != 0:
                shown = None
            after = 0
            if shown is not None:
                if id(transform) not in text_tokens:
                    text_tokens[id(transform)] = int(count(str(shown)))
                after = text_tokens[id(transform)]
            seen[tool] = seen.get(tool, 0) - raw + after
    return {name: tokens for name, tokens in seen.items() if tokens > 0}
