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

from collections import defaultdict
from collections.abc import Mapping, Sequence
from itertools import accumulate
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
    messages, and each block's tool, so a request's view is summed without walking it."""

    def __init__(
        self, messages: Sequence[Mapping[str, Any]], count: Any, original_outputs: bool
    ) -> None:
        names = tool_names(messages)
        self.block_tool: dict[tuple[int, int], str] = {}
        self.block_tokens: dict[tuple[int, int], int] = {}
        self.message_tools: list[dict[str, int]] = []
        #: per message, the positions of its tool blocks
        self.message_blocks: list[list[int]] = []
        self.called: list[list[str]] = []
        self.totals: dict[str, list[int]] = {}
        position = 0
        for mi, msg in enumerate(messages):
            per_tool: dict[str, int] = {}
            called: list[str] = []
            tool_blocks: list[int] = []
            for bj, block in enumerate(msg.get("blocks") or []):
                name = names[position]
                position += 1
                if name is None:
                    continue
                tokens = block.get("tokens")
                if original_outputs and block.get("persisted") and msg.get("original_output"):
                    # a what-if sees the whole output in the history (it persists it again)
                    tokens = count(str(msg["original_output"]))
                elif not isinstance(tokens, int):
                    tokens = count(str(block.get("text") or ""))
                self.block_tool[(mi, bj)] = name
                self.block_tokens[(mi, bj)] = int(tokens)
                tool_blocks.append(bj)
                per_tool[name] = per_tool.get(name, 0) + int(tokens)
                if block.get("type") == "tool_use":
                    called.append(name)
            self.message_tools.append(per_tool)
            self.message_blocks.append(tool_blocks)
            self.called.append(called)
        for per_tool in self.message_tools:
            for name in per_tool:
                if name not in self.totals:
                    # running totals, summed in C (a Python loop per tool and message was
                    # most of a long session's breakdown)
                    self.totals[name] = [
                        0,
                        *accumulate(tools.get(name, 0) for tools in self.message_tools),
                    ]

    def in_range(self, start: int, end: int) -> dict[str, int]:
        """Raw tokens per tool of messages ``start`` to ``end``."""
        end = max(0, min(end, len(self.message_tools)))
        start = max(0, min(start, end))
        return {
            name: running[end] - running[start]
            for name, running in self.totals.items()
            if running[end] > running[start]
        }


def _response_tools(
    request: RequestRow, messages: Sequence[Mapping[str, Any]], tools: _ThreadTools
) -> set[str]:
    """Tools the request's response calls: its assistant message and the ones after it with
    the same message id (Claude Code writes a response's blocks as records of their own)."""
    out: set[str] = set()
    first = request["message"]
    for mi in range(max(0, first), len(messages)):
        msg = messages[mi]
        if msg.get("role") != "assistant":
            break
        if mi > first and msg.get("message_id") != request["message_id"]:
            break
        out.update(tools.called[mi])
        if request["message_id"] is None:
            break
    return out


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
    rows: dict[str, ToolRow] = {}

    def row(name: str) -> ToolRow:
        if name not in rows:
            rows[name] = {
                "tool": name,
                "calls": 0,
                "errors": 0,
                "history_tokens": 0,
                "seen_tokens": 0,
                "sent_tokens": 0,
                "cost_usd": 0.0,
                "requests": [],
            }
        return rows[name]

    # calls, errors and history tokens: each block once, however many threads share it
    counted: set[str] = set()
    history: defaultdict[str, float] = defaultdict(float)
    ratios: dict[str, float] = {}
    for request in requests:
        ratios.setdefault(request["thread"], _ratio(result, request))
    for thread, ratio in ratios.items():
        thread_messages = messages.get(thread) or []
        index = threads[thread] = _ThreadTools(thread_messages, count, whatif)
        for (mi, bj), name in index.block_tool.items():
            block = thread_messages[mi]["blocks"][bj]
            key = str(block.get("tool_use_id") or f"{thread}:{mi}:{bj}") + ":" + block["type"]
            if key in counted:
                continue
            counted.add(key)
            tool = row(name)
            # rounded once per tool (below), as the seen and sent figures are: rounding each
            # block could put the history under what the model saw of it
            history[name] += index.block_tokens[(mi, bj)] * ratio
            if block["type"] == "tool_use":
                tool["calls"] += 1
            elif block.get("is_error"):
                tool["errors"] += 1
        transforms[thread] = TransformIndex(result["views"]["transforms"], thread)

    total_cost = 0.0
    last_main = max((r["index"] for r in requests if r["thread"] == "main"), default=None)
    for request in requests:
        thread = request["thread"]
        index = threads[thread]
        thread_messages = messages.get(thread) or []
        seen = _seen_raw(request, index, transforms[thread], text_tokens, count)
        ratio = ratios[thread]
        prompt = request["model_tokens"] or 1
        total_cost += request["cost_usd"]
        for name, raw in seen.items():
            tokens = round(raw * ratio)
            tool = row(name)
            tool["sent_tokens"] += tokens
            tool["cost_usd"] += request["cost_usd"] * min(1.0, tokens / prompt)
            if request["index"] == last_main:
                tool["seen_tokens"] = tokens
        for name in sorted(_response_tools(request, thread_messages, index)):
            row(name)["requests"].append(request["index"])
    for tool in rows.values():
        tool["cost_usd"] = round(tool["cost_usd"], 6)
        tool["history_tokens"] = round(history[tool["tool"]])
    return {
        "version": BREAKDOWN_VERSION,
        "tools": sorted(rows.values(), key=lambda t: (-t["cost_usd"], -t["calls"], t["tool"])),
        "cost_usd": round(total_cost, 6),
        "attribution": ATTRIBUTION,
    }


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
            blocks = index.message_blocks[mi] if mi < len(index.message_blocks) else []
        else:
            blocks = [bj]
        for block in blocks:
            key = (mi, block)
            tool = index.block_tool.get(key)
            if tool is None:
                continue
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
            seen[tool] = seen.get(tool, 0) - index.block_tokens[key] + after
    return {name: tokens for name, tokens in seen.items() if tokens > 0}
