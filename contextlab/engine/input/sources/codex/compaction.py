"""What a ``compacted`` record says of itself: the history it kept, and whether it was automatic.

A rollout does not record whether a compaction was asked for (``/compact``) or automatic: it is
inferred from where it happened (mid-turn, after a tool call: automatic) and how full the
context was (between turns, past ``AUTO_SHARE`` of the window: automatic; else asked for).
"""

from __future__ import annotations

from typing import Any

from contextlab.engine.input.model import Message

from .items import Item, item_of

#: Share of the window past which a compaction between turns is taken as automatic.
AUTO_SHARE = 0.7


def kept_history(history: Any) -> tuple[list[Item], int, list[str]]:
    """A ``replacement_history``'s kept items, the bytes of its encrypted ``compaction`` items
    (a remote compaction's summary) and the kinds of the entries it does not understand."""
    kept: list[Item] = []
    opaque_bytes = 0
    unknown: list[str] = []
    for entry in history if isinstance(history, list) else ():
        item = item_of(entry) if isinstance(entry, dict) else "(not an object)"
        if isinstance(item, Item):
            if item.side == "opaque":
                opaque_bytes += item.opaque_bytes
            else:
                kept.append(item)
        elif isinstance(item, str):
            unknown.append(item)
    return kept, opaque_bytes, unknown


#: What Codex's ``new_context`` tool answers the model that asked for a new context window.
NEW_CONTEXT_REPLY = "A new context window will start without summarizing conversation history."


def compaction_kind(payload: dict[str, Any], summary: str, opaque_bytes: int) -> str:
    """``local`` (Codex wrote the readable summary), ``remote`` (the server's encrypted one)
    or ``new_window``: a token-budget session's new context window (Codex's ``token_budget``
    feature, off by default), which keeps the initial context and writes no summary at all —
    no message, no encrypted ``compaction`` item, and the window's number and ids."""
    if summary.strip():
        return "local"
    if not opaque_bytes and ("window_number" in payload or "window_id" in payload):
        return "new_window"
    return "remote"


def inferred_trigger(
    before: Message | None, pre: int, window: int, kind: str
) -> tuple[str, str, str]:
    """``(trigger, reason, label)`` of a compaction after ``before`` at ``pre`` tokens: the
    trigger inferred, why, and the sentence the explorer shows on the boundary row."""
    mid_turn = before is not None and (
        before.kind == "tool_result"
        or (before.role == "assistant" and any(b.type == "tool_use" for b in before.blocks))
    )
    asked = before is not None and any(NEW_CONTEXT_REPLY in b.text for b in before.blocks)
    if kind == "new_window" and asked:
        trigger, reason = "manual", "the model called new_context"
    elif mid_turn:
        trigger, reason = "auto", "mid-turn, after a tool call"
    elif window and pre >= AUTO_SHARE * window:
        trigger, reason = (
            "auto",
            f"between turns at {pre:,} tokens, past {AUTO_SHARE:.0%} of the window",
        )
    else:
        trigger, reason = "manual", "between turns, well under the window"
    how = "automatic" if trigger == "auto" else "asked for (/compact)"
    if kind == "new_window":
        how = "automatic" if trigger == "auto" else "asked for by the model"
        return (
            trigger,
            reason,
            f"Codex started a new context window here at {pre:,} tokens (token budget: no "
            f"summary; the model fetches earlier items by id). {how.capitalize()}: inferred "
            f"({reason}).",
        )
    label = (
        f"Codex compacted its context here ({kind} compaction "
        f"at {pre:,} tokens). {how.capitalize()}: inferred ({reason}); a rollout does not "
        "record whether a compaction was asked for."
    )
    return trigger, reason, label
