"""Waste findings of a replayed session: what it paid for that it did not need, what each cost,
and the action or setting that avoids it.

Read from a result (``ResultJson``) and its session's messages (``explorer.messages_json``,
expanded), so the worker, the pages and the CLI get the same answer from stored data. Five kinds:

* ``reread`` — a file read again unchanged: a Read of the same path, offset and limit whose
  result is the same text as the previous Read of it, with no Edit, MultiEdit, Write or
  NotebookEdit of the path between, while the earlier result was still in the model's view.
* ``cleared_output`` — a tool output of at least ``OVERSIZED_TOKENS`` that microcompact or
  persistence later replaced: the tokens it cost while it stayed whole.
* ``unused_result`` — a tool result no later request used. A heuristic, kept conservative: a
  result of at least ``UNUSED_MIN_TOKENS``, not an error, holding at least
  ``UNUSED_MIN_WORDS`` distinctive words (identifiers of 6+ characters not seen before it in
  the conversation, nor in its own call), none of which appears in any later response of the
  thread (text, thinking or tool call), with at least ``UNUSED_MIN_LATER_RESPONSES`` responses
  after it to judge by. A result the model used without quoting any of them
  would be listed too: the rule says so on the page.
* ``unused_tools`` — tool definitions never called: only where the transcript records the
  definitions Claude Code sent (a ``prompt_snapshot`` attachment with ``tools``); otherwise
  the report says they are not recorded and names the tools that were called.
* ``cache_break`` — a recorded cache miss after an idle gap of more than 5 minutes and at most
  an hour, on a request written with the 5-minute TTL: the 1-hour TTL would have kept the
  entry. Its cost is what the miss paid over a read; the kind's header sets that against the
  1-hour write premium on every cache write of the session, which the setting would add.

The first three are searched in the main conversation (a branch repeats its messages; a
subagent's requests are not in ``requests``); the cache breaks in every request row.

Costs are estimates (labelled so on every page): a block's display tokens (its tiktoken count
scaled by its thread's calibration) priced at its request's model, written once at the first
request whose prompt holds it and read from the cache at every later one while it stays.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from contextlab.engine.measures.cost import PricingTable, load_pricing
from contextlab.engine.results import RequestRow, ResultJson
from contextlab.engine.results.navigator import format_duration, gaps, miss_cost
from contextlab.engine.results.waste_scan import UNUSED_MIN_WORDS, WasteScan, scan_messages

#: a tool output this large (display tokens) is "oversized" when it is later cleared
OVERSIZED_TOKENS = 4_000
#: results below this size (display tokens) are never called unused
UNUSED_MIN_TOKENS = 1_000
#: and this many responses after it to judge by (a session that ends soon after says nothing)
UNUSED_MIN_LATER_RESPONSES = 3
#: gaps (seconds) the 5-minute cache does not outlive and the 1-hour one does
FIVE_MINUTES, ONE_HOUR = 300.0, 3600.0
#: transforms that clear a tool output or replace it by a preview (microcompact, persistence)
CLEARING_KINDS = frozenset({"cleared", "persisted", "budget"})

KINDS: dict[str, str] = {
    "reread": "Files read again unchanged",
    "cleared_output": "Oversized tool outputs later cleared",
    "unused_result": "Results no later request used",
    "unused_tools": "Tool definitions never called",
    "cache_break": "Cache breaks the 1-hour cache would have avoided",
}
RULES: dict[str, str] = {
    "reread": "The same file, offset and limit read again with the same result, no edit or "
    "write of it between, while the earlier read was still in the model's view.",
    "cleared_output": f"A tool output of {OVERSIZED_TOKENS:,} tokens or more that microcompact or "
    "persistence replaced later: what it cost while it stayed whole.",
    "unused_result": f"A heuristic: a result of {UNUSED_MIN_TOKENS:,} tokens or more, not an "
    f"error, with at least {UNUSED_MIN_WORDS} distinctive words (names of 6+ characters new "
    f"to the conversation), none of which any of the {UNUSED_MIN_LATER_RESPONSES} or more "
    "responses after it repeats. A result the model used without repeating any of them is "
    "listed too.",
    "unused_tools": "Tools defined in the prompt (as the transcript records them) that the "
    "session never called: their definitions were sent with every request.",
    "cache_break": "A recorded cache miss after a pause of 5 to 60 minutes on a request "
    "cached for 5 minutes: a 1-hour cache entry would still have been there.",
}


class WasteFinding(TypedDict):
    kind: str
    #: what was wasted, in a sentence (it starts with ``subject`` when there is one)
    text: str
    #: the file or tool it is about, as the transcript names it ("" for a cache break)
    subject: str
    #: display tokens it carried (estimate)
    tokens: int
    #: estimated USD (see the module docstring)
    cost_usd: float
    #: positions in ``result["requests"]`` (0-based; pages add 1), the first the cause
    requests: list[int]
    #: what each of ``requests`` is to the finding, in words ("read again by", "cleared at")
    request_roles: list[str]
    fix: str


class WasteKind(TypedDict):
    kind: str
    label: str
    rule: str
    count: int
    cost_usd: float
    #: the kind's answer in a sentence (the premium set against the breaks, tools unrecorded)
    note: str


class WasteReport(TypedDict):
    findings: list[WasteFinding]
    kinds: list[WasteKind]
    total_cost_usd: float
    #: None: the transcript does not record the tool definitions sent
    tool_definitions: list[str] | None
    tools_called: list[str]


@dataclass(frozen=True)
class _Place:
    thread: str
    message: int
    block: int


class _Stays:
    """When each block of a thread was in the model's view, and what it cost there."""

    def __init__(self, result: ResultJson, pricing: PricingTable) -> None:
        self.pricing = pricing
        self.rows: dict[str, list[tuple[int, RequestRow]]] = defaultdict(list)
        self.by_position = result["requests"]
        for position, row in enumerate(result["requests"]):
            self.rows[str(row["thread"])].append((position, row))
        self.removed: dict[tuple[str, int, int], list[tuple[int, int | None]]] = defaultdict(list)
        #: blocks microcompact cleared or persistence replaced by a preview
        self.cleared: set[tuple[str, int, int]] = set()
        for t in result["views"]["transforms"]:
            key = (t["thread"], t["message"], t["block"])
            self.removed[key].append((t["first"], t["last"]))
            if t["kind"] in CLEARING_KINDS:
                self.cleared.add(key)
        self.ratio: dict[str, float] = {
            th["id"]: float(th["calibration"]["ratio"] or 1.0)
            for th in result["session"]["threads"]
        }

    def tokens(self, thread: str, raw: int) -> int:
        return round(raw * self.ratio.get(thread, 1.0))

    def replaced_at(self, place: _Place, thread_request: int) -> bool:
        for key in (
            (place.thread, place.message, place.block),
            (place.thread, place.message, -1),
        ):
            for first, last in self.removed.get(key, ()):
                if first <= thread_request and (last is None or thread_request <= last):
                    return True
        return False

    def in_view(self, place: _Place, row: RequestRow) -> bool:
        view = row["view"]
        held = view["start"] <= place.message < view["end"] or f"m:{place.message}" in view["head"]
        return held and not self.replaced_at(place, row["thread_request"])

    def stay(self, place: _Place, raw_tokens: int) -> tuple[list[int], float]:
        """The requests (positions) whose prompt held the block whole, and its cost there."""
        tokens = self.tokens(place.thread, raw_tokens)
        held: list[int] = []
        cost = 0.0
        for position, row in self.rows.get(place.thread, ()):
            if not self.in_view(place, row):
                if held:
                    break  # replaced or compacted away: it does not come back whole
                continue
            price, _, _ = self.pricing.price_for(row["model"])
            if not held:
                rate = price.cache_write_1h if row["ttl"] == "1h" else price.cache_write_5m
            else:
                rate = price.cache_read
            cost += tokens * rate / 1_000_000
            held.append(position)
        return held, cost

    def row(self, position: int) -> RequestRow:
        return self.by_position[position]

    def next_in_thread(self, thread: str, position: int) -> int | None:
        """The thread's request after ``position`` (None: it was the last)."""
        positions = [p for p, _ in self.rows.get(thread, ())]
        at = positions.index(position)
        return positions[at + 1] if at + 1 < len(positions) else None

    def request_of(self, thread: str, message: int) -> int | None:
        """The position of the request whose response is ``message``."""
        for position, row in self.rows.get(thread, ()):
            if row["message"] == message:
                return position
        return None

    def request_before(self, thread: str, message: int) -> int | None:
        """The first request whose prompt holds ``message`` (its answer's request)."""
        for position, row in self.rows.get(thread, ()):
            if row["view"]["end"] > message:
                return position
        return None


def _blocks(messages: Sequence[Mapping[str, Any]]) -> Iterable[tuple[int, int, Mapping[str, Any]]]:
    for mi, msg in enumerate(messages):
        for bj, block in enumerate(msg.get("blocks") or []):
            yield mi, bj, block


def _rereads(thread: str, scan: WasteScan, stays: _Stays) -> list[WasteFinding]:
    """The scan's reads of a file part again unchanged (``WasteScan.rereads``) whose earlier
    read was still in the view of the request that asked again."""
    out: list[WasteFinding] = []
    for path, call_message, before_mi, before_bj, mi, bj, raw in scan.rereads:
        asking = stays.request_of(thread, call_message)
        if asking is None or not stays.in_view(
            _Place(thread, before_mi, before_bj), stays.row(asking)
        ):
            continue  # the earlier read had left the view: reading again was the way back
        _, cost = stays.stay(_Place(thread, mi, bj), raw)
        first = stays.request_before(thread, before_mi)
        out.append(
            {
                "kind": "reread",
                "subject": path,
                "text": f"{path} read again unchanged",
                "tokens": stays.tokens(thread, raw),
                "cost_usd": round(cost, 6),
                "requests": (
                    linked := _linked((first, "read first by"), (asking, "read again by"))
                )[0],
                "request_roles": linked[1],
                "fix": "The earlier read was still in the context. Claude Code 2.1.100 answers "
                "such a read with a one-line note instead of the file: update; with an older "
                "version, ask the agent to use the earlier read (a CLAUDE.md line), or read a "
                "part with offset and limit. No setting turns this on.",
            }
        )
    return out


def _output_fix(tool: str) -> str:
    if tool == "Bash":
        return (
            "Cap command output: pipe long output through head or tail, or set "
            "BASH_MAX_OUTPUT_LENGTH lower (Claude Code's Bash cap, 30,000 characters by default)."
        )
    if tool.startswith("mcp__"):
        return "Lower MAX_MCP_OUTPUT_TOKENS (25,000 tokens by default) or ask the tool for less."
    if tool == "Read":
        return "Read the part you need with offset and limit instead of the whole file."
    if tool in ("Grep", "Glob"):
        return "Narrow the pattern or the path, or cap the matches (Grep's head_limit)."
    return f"Ask {tool or 'the tool'} for less output."


def _cleared(
    thread: str, messages: Sequence[Mapping[str, Any]], stays: _Stays
) -> list[WasteFinding]:
    out: list[WasteFinding] = []
    for mi, bj, block in _blocks(messages):
        if block.get("type") != "tool_result" or block.get("persisted"):
            continue
        if (thread, mi, bj) not in stays.cleared:
            continue
        tokens = stays.tokens(thread, int(block.get("tokens") or 0))
        if tokens < OVERSIZED_TOKENS:
            continue
        held, cost = stays.stay(_Place(thread, mi, bj), int(block.get("tokens") or 0))
        if not held:
            continue  # replaced before any request held it whole: nothing paid
        after = stays.next_in_thread(thread, held[-1])
        cleared_at = after if after is not None else held[-1]
        tool = str(block.get("tool_name") or "")
        out.append(
            {
                "kind": "cleared_output",
                "subject": tool,
                "text": f"{tool or 'Tool'} output of {tokens:,} tokens stayed whole for "
                f"{len(held)} request{'s' if len(held) != 1 else ''}, then was cleared",
                "tokens": tokens,
                "cost_usd": round(cost, 6),
                "requests": (
                    linked := _linked((held[0], "whole from"), (cleared_at, "cleared at"))
                )[0],
                "request_roles": linked[1],
                "fix": _output_fix(tool),
            }
        )
    return out


def _unused(thread: str, scan: WasteScan, stays: _Stays) -> list[WasteFinding]:
    """The scan's results no later response referred to (``WasteScan.unused``) that are large
    enough, with enough responses after them, and were sent whole."""
    out: list[WasteFinding] = []
    responses = scan.responses
    for (mi, bj), (raw, tool) in scan.unused.items():
        tokens = stays.tokens(thread, raw)
        if (
            tokens < UNUSED_MIN_TOKENS
            or len(responses) - bisect_right(responses, mi) < UNUSED_MIN_LATER_RESPONSES
        ):
            continue
        held, cost = stays.stay(_Place(thread, mi, bj), raw)
        if held:
            out.append(
                {
                    "kind": "unused_result",
                    "subject": tool,
                    "text": f"{tool} result of {tokens:,} tokens that no later response refers to",
                    "tokens": tokens,
                    "cost_usd": round(cost, 6),
                    "requests": (linked := _linked((held[0], "sent from"), (held[-1], "until")))[0],
                    "request_roles": linked[1],
                    "fix": _output_fix(tool),
                }
            )
    return out


def _tools(
    messages: Mapping[str, Sequence[Mapping[str, Any]]], result: ResultJson, stays: _Stays
) -> tuple[list[WasteFinding], list[str] | None, list[str]]:
    defined: dict[str, int] = {}
    recorded = False
    called: set[str] = set()
    for thread_messages in messages.values():
        for msg in thread_messages:
            meta = msg.get("metadata") or {}
            tools = meta.get("tools")
            if meta.get("attachment_type") == "prompt_snapshot" and isinstance(tools, list):
                recorded = recorded or bool(tools)
                for tool in tools:
                    if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                        size = int(tool.get("tokens") or 0)
                        defined[tool["name"]] = max(defined.get(tool["name"], 0), size)
            for block in msg.get("blocks") or []:
                if block.get("type") == "tool_use" and block.get("tool_name"):
                    called.add(str(block["tool_name"]))
    if not recorded:
        return [], None, sorted(called)
    rows = result["requests"]
    out: list[WasteFinding] = []
    for name in sorted(set(defined) - called):
        tokens = defined[name]
        cost = 0.0
        for n, row in enumerate(rows):
            price, _, _ = stays.pricing.price_for(row["model"])
            write = price.cache_write_1h if row["ttl"] == "1h" else price.cache_write_5m
            cost += tokens * (write if n == 0 else price.cache_read) / 1_000_000
        mcp = name.startswith("mcp__")
        out.append(
            {
                "kind": "unused_tools",
                "subject": name,
                "text": f"{name} was defined in every request ({tokens:,} tokens) and never called",
                "tokens": tokens,
                "cost_usd": round(cost, 6),
                "requests": (linked := _linked((0 if rows else None, "sent from")))[0],
                "request_roles": linked[1],
                "fix": (
                    "Leave this MCP server out of sessions like this one (it is configured in "
                    ".mcp.json or with claude mcp)."
                    if mcp
                    else "A built-in tool: no setting checked in the published packages removes "
                    "its definition; nothing to change."
                ),
            }
        )
    return out, sorted(defined), sorted(called)


def _cache_breaks(result: ResultJson, pricing: PricingTable) -> tuple[list[WasteFinding], str]:
    rows = result["requests"]
    gap_of = gaps(rows)
    previous: dict[str, int] = {}
    out: list[WasteFinding] = []
    premium = 0.0
    for n, row in enumerate(rows):
        thread = str(row["thread"])
        cache = row["cache"]
        price, _, _ = pricing.price_for(row["model"])
        if cache.get("source") == "recorded" and row["ttl"] != "1h":
            premium += int(cache.get("write") or 0) * (price.cache_write_1h - price.cache_write_5m)
        gap = gap_of[n]
        earlier = previous.get(thread)
        before = rows[earlier] if earlier is not None else None
        previous[thread] = n
        if (
            before is None
            or gap is None
            or not FIVE_MINUTES < gap <= ONE_HOUR
            or cache.get("source") != "recorded"
            or row["ttl"] == "1h"
            or cache.get("hit")
        ):
            continue
        paid = miss_cost(row, before)
        if paid <= 0:
            continue
        out.append(
            {
                "kind": "cache_break",
                "subject": "",
                "text": f"Cache miss after a {format_duration(gap)} pause: the 5-minute entry "
                f"had expired ({int(cache.get('write') or 0):,} tokens written again)",
                "tokens": int(cache.get("write") or 0),
                "cost_usd": round(paid, 6),
                "requests": (linked := _linked((earlier, "cached by"), (n, "missed at")))[0],
                "request_roles": linked[1],
                "fix": 'Use the 1-hour cache: "promptCacheTtl": "1h" in settings.json '
                "(Claude Code 2.1.242+), or ENABLE_PROMPT_CACHING_1H=1 (2.1.108+).",
            }
        )
    premium /= 1_000_000
    avoided = sum(f["cost_usd"] for f in out)
    if not out:
        note = "No recorded cache miss after a 5–60 minute pause."
    elif avoided > premium:
        note = (
            f"The 1-hour cache would have avoided ${avoided:.4f} of misses for a ${premium:.4f} "
            f"premium on this session's cache writes: it pays (${avoided - premium:.4f} net)."
        )
    else:
        note = (
            f"The 1-hour cache would have avoided ${avoided:.4f} of misses but added a "
            f"${premium:.4f} premium on this session's cache writes: it does not pay here."
        )
        for finding in out:
            finding["fix"] = (
                "The 1-hour cache would avoid this miss, but its premium on every cache write "
                "costs this session more than the misses it avoids: keep the 5-minute cache, or "
                "resume within 5 minutes."
            )
    return out, note


def _linked(*pairs: tuple[int | None, str]) -> tuple[list[int], list[str]]:
    """``requests`` and ``request_roles`` of a finding: each request once, None left out."""
    requests: list[int] = []
    roles: list[str] = []
    for position, role in pairs:
        if position is not None and position not in requests:
            requests.append(position)
            roles.append(role)
    return requests, roles


def waste_findings(
    result: ResultJson,
    messages: Mapping[str, Sequence[Mapping[str, Any]]],
    pricing: PricingTable | None = None,
    scan: WasteScan | None = None,
) -> WasteReport:
    """The session's waste findings (see the module docstring), costliest first per kind.

    ``messages`` is ``expand_messages(messages_json(session))``: every thread's messages.
    ``scan``: the main thread's ``WasteScan`` when the caller holds it (a live session's,
    gone on from its last version's: ``waste_scan.scan_main_thread``); else it is made here.
    """
    pricing = pricing or load_pricing()
    stays = _Stays(result, pricing)
    findings: list[WasteFinding] = []
    # the main conversation's blocks: a branch starts with the same messages (searching it too
    # would list them twice), and a subagent's requests are not in ``requests``
    threads = result["session"]["threads"]
    for thread in [threads[0]["id"]] if threads else []:
        thread_messages = messages.get(thread) or []
        if scan is None or scan.thread != thread:
            scan = scan_messages(thread, thread_messages)
        findings += _rereads(thread, scan, stays)
        findings += _cleared(thread, thread_messages, stays)
        findings += _unused(thread, scan, stays)
    tool_findings, defined, called = _tools(messages, result, stays)
    findings += tool_findings
    breaks, break_note = _cache_breaks(result, pricing)
    findings += breaks
    order = list(KINDS)
    findings.sort(key=lambda f: (order.index(f["kind"]), -f["cost_usd"]))
    kinds: list[WasteKind] = []
    for kind, label in KINDS.items():
        mine = [f for f in findings if f["kind"] == kind]
        note = ""
        if kind == "cache_break":
            note = break_note
        elif kind == "unused_tools" and defined is None:
            note = (
                "This transcript does not record the tool definitions the agent sent (newer "
                "Claude Code versions write them in a prompt snapshot), so unused ones cannot "
                "be named; "
                f"{len(called)} tool{'s' if len(called) != 1 else ''} called."
            )
        kinds.append(
            {
                "kind": kind,
                "label": label,
                "rule": RULES[kind],
                "count": len(mine),
                "cost_usd": round(sum(f["cost_usd"] for f in mine), 6),
                "note": note,
            }
        )
    return {
        "findings": findings,
        "kinds": kinds,
        "total_cost_usd": round(sum(f["cost_usd"] for f in findings), 6),
        "tool_definitions": defined,
        "tools_called": called,
    }
