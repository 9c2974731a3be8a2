"""What one request's prompt is made of, and what the pipeline's layers took out of it.

``compose`` takes the rows of ``explorer.side_by_side`` for a request and returns:

* ``parts``: the prompt by kind (system + tools, CLAUDE.md/AGENTS.md and reminders, user text,
  assistant text, thinking, tool calls, tool results by tool name, summaries, persisted
  previews, ...),
  in display tokens that add up to the request's ``model_tokens``. The system prompt and tool
  definitions are not in the transcript: their share is the calibration's fitted prefix, an
  estimate, and says so;
* ``row_tokens``: per row, the history block's and the model-side block's display tokens;
* ``layers``: tokens each transform (summary, clearing, snip, collapse, persisted preview)
  took out of the history, and ``removed``: what the request's own compaction replaced, by kind;
* ``heaviest``: the largest blocks the model saw.

Display tokens are tiktoken counts times the thread's calibration ratio, the same scale as the
request's ``model_tokens``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from contextlab.engine.measures.content_kinds import IMAGE_KIND, KIND_LABELS, classify
from contextlab.engine.measures.tokens import TiktokenCounter

SYSTEM_PART = "system + tools (estimated)"
#: fixed kinds in display order; tool results ("tool results · Bash") follow "tool calls"
ORDER = [
    SYSTEM_PART,
    "CLAUDE.md/AGENTS.md and reminders",
    "user text",
    "assistant text",
    "thinking",
    "tool calls",
    "tool results",
    "summaries",
    "restored files",
    "persisted previews",
    "cleared placeholders",
    "other",
]
#: what each badge means as a layer of the pipeline
LAYERS = {
    "summarized": "replaced by a compaction summary",
    "cleared": "cleared (microcompaction)",
    "snipped": "snipped",
    "collapsed": "collapsed into a summary",
    "persisted": "persisted (the model saw a preview)",
}
HEAVIEST = 5
REMINDER_MARK = "<system-reminder>"


class Part(TypedDict):
    kind: str
    tokens: int
    share: float
    estimated: bool


class ContentPart(TypedDict):
    """Tokens of one content kind (``content_kinds``) among the messages the model saw."""

    kind: str
    label: str
    tokens: int
    share: float


class Composition(TypedDict):
    parts: list[Part]
    #: the messages' tokens (the system prompt and tools left out) by content kind
    content: list[ContentPart]
    total: int
    row_tokens: list[dict[str, int | None]]
    layers: list[dict[str, Any]]
    removed: list[dict[str, Any]]
    removed_total: int
    heaviest: list[dict[str, Any]]
    ratio: float
    prefix: int


def kind_of(row: dict[str, Any], cell: dict[str, Any] | None) -> str:
    """The kind a block counts as (``cell``: the row's model or history side)."""
    badge = row.get("badge")
    if row.get("synthetic"):
        return "summaries" if row.get("kind") == "summary" else "restored files"
    if cell is not None and cell is row.get("model"):
        if badge == "persisted":
            return "persisted previews"
        if badge == "cleared":
            return "cleared placeholders"
        if badge == "collapsed":
            return "summaries"
    kind = row.get("kind")
    block_type = (cell or {}).get("type")
    text = (cell or {}).get("text") or ""
    if kind == "summary":
        return "summaries"
    if kind in ("meta", "attachment") or text.lstrip().startswith(REMINDER_MARK):
        return "CLAUDE.md/AGENTS.md and reminders"
    if block_type == "tool_result":
        tool = (row.get("repl") or {}).get("tool_name") or (cell or {}).get("tool_name")
        return f"tool results · {tool}" if tool else "tool results"
    if block_type == "tool_use":
        return "tool calls"
    if block_type in ("thinking", "redacted_thinking"):
        return "thinking"
    if row.get("role") == "assistant":
        return "assistant text" if block_type == "text" else "other"
    if row.get("role") == "user" and block_type == "text":
        return "user text"
    return "other"


def content_of(cell: dict[str, Any]) -> str:
    """The content kind of a block the model saw (``content_kinds.classify`` of its text)."""
    if cell.get("type") in ("image", "document"):
        return IMAGE_KIND
    return classify(cell.get("text") or "")


def _order_key(kind: str) -> tuple[int, str]:
    base = "tool results" if kind.startswith("tool results") else kind
    return (ORDER.index(base) if base in ORDER else len(ORDER), kind)


def compose(
    rows: Sequence[dict[str, Any]],
    messages: Sequence[dict[str, Any]],
    *,
    model_tokens: int,
    prefix_tokens: int,
    ratio: float,
    replaced_from: int | None = None,
    counter: TiktokenCounter | None = None,
    omitted_tokens: int = 0,
) -> Composition:
    """See the module docstring. ``replaced_from``: the previous request's view start, when
    this request compacted (rows from there to this view's start are what it removed).
    ``omitted_tokens``: stored tokens of replaced history blocks ``side_by_side`` counted
    instead of listing (``view["omitted"]``), part of the summary layer's share."""
    count = (counter or TiktokenCounter()).count
    ratio = ratio if ratio > 0 else 1.0
    raw_by_kind: dict[str, int] = {}
    raw_by_content: dict[str, int] = {}
    row_tokens: list[dict[str, int | None]] = []
    layers: dict[str, int] = {"summarized": omitted_tokens} if omitted_tokens > 0 else {}
    removed: dict[str, int] = {}
    seen: list[tuple[int, int, str]] = []  # (raw tokens, row position, kind)
    for position, row in enumerate(rows):
        repl_raw = _history_tokens(row, messages, count)
        model = row.get("model")
        model_raw: int | None = None
        if model is not None:
            repl = row.get("repl")
            same = repl is not None and model.get("text") == repl.get("text")
            model_raw = (
                repl_raw if same and repl_raw is not None else count(model.get("text") or "")
            )
            kind = kind_of(row, model)
            raw_by_kind[kind] = raw_by_kind.get(kind, 0) + model_raw
            text_kind = content_of(model)
            raw_by_content[text_kind] = raw_by_content.get(text_kind, 0) + model_raw
            seen.append((model_raw, position, kind))
        row_tokens.append(
            {
                "repl": None if repl_raw is None else round(repl_raw * ratio),
                "model": None if model_raw is None else round(model_raw * ratio),
            }
        )
        saved = (repl_raw or 0) - (model_raw or 0)
        badge = str(row.get("badge") or "")
        if saved > 0 and badge in LAYERS and row.get("repl") is not None:
            layers[badge] = layers.get(badge, 0) + saved
            message = row.get("message")
            if (
                replaced_from is not None
                and badge == "summarized"
                and model is None
                and isinstance(message, int)
                and message >= replaced_from
            ):
                kind = kind_of(row, row.get("repl"))
                removed[kind] = removed.get(kind, 0) + saved
    prefix = max(0, min(prefix_tokens, model_tokens)) if model_tokens else prefix_tokens
    rest = max(0, model_tokens - prefix)
    raw_total = sum(raw_by_kind.values())
    # the blocks' share of the model view, scaled so the parts add up to model_tokens
    scale = rest / raw_total if raw_total else 0.0
    parts_tokens = {SYSTEM_PART: prefix} if prefix else {}
    for kind, raw in raw_by_kind.items():
        parts_tokens[kind] = round(raw * scale)
    total = sum(parts_tokens.values()) or 1
    parts: list[Part] = [
        {"kind": kind, "tokens": tokens, "share": tokens / total, "estimated": kind == SYSTEM_PART}
        for kind, tokens in sorted(parts_tokens.items(), key=lambda kv: _order_key(kv[0]))
        if tokens > 0
    ]
    content_total = sum(raw_by_content.values())
    content: list[ContentPart] = [
        {
            "kind": kind,
            "label": KIND_LABELS[kind],
            "tokens": round(raw * scale),
            "share": raw / content_total,
        }
        for kind, raw in sorted(raw_by_content.items(), key=lambda kv: (-kv[1], kv[0]))
        if raw > 0 and round(raw * scale) > 0
    ]
    heaviest = [
        {"position": position, "kind": kind, "tokens": round(raw * ratio)}
        for raw, position, kind in sorted(seen, key=lambda t: (-t[0], t[1]))[:HEAVIEST]
        if raw > 0
    ]
    return {
        "parts": parts,
        "content": content,
        "total": sum(p["tokens"] for p in parts),
        "row_tokens": row_tokens,
        "layers": [
            {"badge": badge, "label": LAYERS[badge], "tokens": round(raw * ratio)}
            for badge, raw in sorted(layers.items(), key=lambda kv: -kv[1])
        ],
        "removed": [
            {"kind": kind, "tokens": round(raw * ratio)}
            for kind, raw in sorted(removed.items(), key=lambda kv: -kv[1])
        ],
        "removed_total": round(sum(removed.values()) * ratio),
        "heaviest": heaviest,
        "ratio": ratio,
        "prefix": prefix,
    }


def _history_tokens(
    row: dict[str, Any], messages: Sequence[dict[str, Any]], count: Any
) -> int | None:
    """Raw tokens of the row's history block: stored with the message, else counted."""
    repl = row.get("repl")
    if repl is None:
        return None
    message, block = row.get("message"), row.get("block")
    if isinstance(message, int) and 0 <= message < len(messages):
        blocks = messages[message].get("blocks") or []
        if isinstance(block, int) and 0 <= block < len(blocks):
            stored = blocks[block].get("tokens")
            if isinstance(stored, int) and blocks[block].get("text") == repl.get("text"):
                return stored
    if repl.get("type") == "marker":
        return 0  # a boundary marker is not text the history holds
    return int(count(repl.get("text") or ""))
