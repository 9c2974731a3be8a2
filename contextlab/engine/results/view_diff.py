"""What changed in the model's view between two requests.

``view_diff`` takes the rows of ``explorer.side_by_side`` for request A and request B (each row
with its display ``tokens`` from ``composition.compose``) and sorts every block the model saw at
either request into:

* ``added``: the model saw it at B, not at A (new turns, a summary, a restored file);
* ``removed``: the model saw it at A, not at B, with why (``reason``: the badge B gives the
  block, e.g. "summarized" when a compaction replaced it, "snipped", "collapsed");
* ``changed``: seen at both, as different text (a tool result replaced by a persisted preview,
  cleared by microcompact), with the badges before and after;
* ``unchanged``: only counted.

Token figures are display tokens (the scale of ``model_tokens``); each list is cut at
``limit`` items, its count and token total always whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

#: the longest preview of a block's text
PREVIEW_CHARS = 160


class DiffItem(TypedDict):
    #: the block's anchor on the explorer page of the request it shows at
    anchor: str
    role: str
    #: what the block is: "tool result · Bash", "assistant text", "summary"…
    label: str
    #: the badge at A and at B ("intact", "persisted", "cleared", "summarized"…; "" absent)
    before: str
    after: str
    tokens_before: int
    tokens_after: int
    delta: int
    preview_before: str
    preview_after: str


class DiffPart(TypedDict):
    count: int
    tokens: int
    items: list[DiffItem]


class ViewDiff(TypedDict):
    added: DiffPart
    removed: DiffPart
    changed: DiffPart
    unchanged: DiffPart
    #: B's model view minus A's (display tokens of the listed blocks)
    delta: int


def _key(row: Mapping[str, Any], position: int) -> tuple[Any, ...]:
    """What makes a row the same block at both requests."""
    synthetic = row.get("synthetic")
    if isinstance(synthetic, Mapping) and synthetic.get("id"):
        return ("s", synthetic["id"])
    if row.get("message") is None:
        return ("x", row.get("kind"), position if row.get("badge") != "anchored" else 0)
    return ("m", row["message"], row.get("block", 0))


def _label(row: Mapping[str, Any]) -> str:
    cell = row.get("model") or row.get("repl") or {}
    block_type = cell.get("type")
    tool = (row.get("repl") or {}).get("tool_name") or cell.get("tool_name")
    if row.get("badge") == "anchored":
        return "unrecorded input"
    if row.get("synthetic"):
        return "summary" if row.get("kind") == "summary" else "restored file"
    if block_type == "tool_result":
        return f"tool result · {tool}" if tool else "tool result"
    if block_type == "tool_use":
        return f"tool call · {tool}" if tool else "tool call"
    if block_type in ("thinking", "redacted_thinking"):
        return "thinking"
    if row.get("kind") == "summary":
        return "summary"
    if row.get("role") == "assistant":
        return "assistant text"
    return "user text" if block_type == "text" else str(block_type or "other")


def _preview(cell: Mapping[str, Any] | None) -> str:
    text = " ".join(str((cell or {}).get("text") or "").split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _tokens(row: Mapping[str, Any] | None) -> int:
    if row is None:
        return 0
    return int((row.get("tokens") or {}).get("model") or 0)


def _item(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None, anchor: str) -> DiffItem:
    shown = b if b is not None and b.get("model") is not None else a
    assert shown is not None
    before, after = _tokens(a) if a and a.get("model") else 0, _tokens(b)
    return {
        "anchor": anchor,
        "role": str(shown.get("role") or ""),
        "label": _label(shown),
        "before": str(a.get("badge") or "") if a and a.get("model") is not None else "",
        "after": str(b.get("badge") or "") if b is not None else "",
        "tokens_before": before,
        "tokens_after": after if b is not None and b.get("model") is not None else 0,
        "delta": (after if b is not None and b.get("model") is not None else 0) - before,
        "preview_before": _preview(a.get("model")) if a else "",
        "preview_after": _preview(b.get("model")) if b else "",
    }


def view_diff(
    rows_a: Sequence[Mapping[str, Any]],
    rows_b: Sequence[Mapping[str, Any]],
    *,
    start_b: int = 0,
    limit: int = 200,
) -> ViewDiff:
    """See the module docstring. ``start_b``: B's view start, so a block of A that B does not
    list (history a summary replaced, not listed) is said to be summarized."""
    by_a = {_key(row, i): row for i, row in enumerate(rows_a)}
    by_b = {_key(row, i): row for i, row in enumerate(rows_b)}
    parts: dict[str, DiffPart] = {
        name: {"count": 0, "tokens": 0, "items": []}
        for name in ("added", "removed", "changed", "unchanged")
    }

    def put(name: str, item: DiffItem, tokens: int) -> None:
        part = parts[name]
        part["count"] += 1
        part["tokens"] += tokens
        if name != "unchanged" and len(part["items"]) < limit:
            part["items"].append(item)

    for key, b in by_b.items():
        if b.get("model") is None:
            continue
        a = by_a.get(key)
        anchor = str(b.get("anchor") or "")
        if a is None or a.get("model") is None:
            put("added", _item(a, b, anchor), _tokens(b))
        elif (a["model"].get("text") or "") != (b["model"].get("text") or ""):
            item = _item(a, b, anchor)
            put("changed", item, item["delta"])
        else:
            put("unchanged", _item(a, b, anchor), _tokens(b))
    for key, a in by_a.items():
        if a.get("model") is None:
            continue
        later = by_b.get(key)
        if later is not None and later.get("model") is not None:
            continue
        item = _item(a, None, str(a.get("anchor") or ""))
        if later is not None:
            item["after"] = str(later.get("badge") or "")
        elif key[0] == "m" and int(key[1]) < start_b:
            item["after"] = "summarized"
        elif key[0] == "s":
            item["after"] = "summarized"  # a summary a later compaction replaced
        put("removed", item, _tokens(a))
    delta = parts["added"]["tokens"] - parts["removed"]["tokens"] + parts["changed"]["tokens"]
    return {
        "added": parts["added"],
        "removed": parts["removed"],
        "changed": parts["changed"],
        "unchanged": parts["unchanged"],
        "delta": delta,
    }
