"""Compact-boundary slice (``getMessagesAfterCompactBoundary``, spec §4.0).

The model sees only what follows the last ``compact_boundary``. In recorded mode a boundary
entering the history replaces the view by the recorded summary (plus the post-compact file
restorations, modeled); the autocompact step reports it as that request's compaction. Snip
removals recorded in ``snip_boundary`` records are projected here too.

A boundary with ``compactMetadata.preservedSegment`` (session-memory or partial compaction,
facts §1.6 and §6.3) kept the recent messages from ``headUuid`` to ``tailUuid`` after the
summary. Newer versions write them again after the summary (nothing to do); others leave them
where they were, just before the boundary, and Claude Code relinks them behind the summary on
load: the view then starts at the segment's head, with the summary in the head and its own
position hidden (``preserved_before_boundary`` tells the replay which summaries to hide).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from contextlab.engine.input.model import Message

from .base import WHOLE_MESSAGE, StepContext
from .restore import restoration_head, restoration_recorded

if TYPE_CHECKING:
    from contextlab.engine.input.session import Session


def preserved_head(messages: list[Message], boundary: int) -> int | None:
    """Index of the first message a compaction at ``boundary`` kept (its preserved segment's
    head), or None when it kept nothing or the head is not in the thread."""
    segment = messages[boundary].metadata.get("preservedSegment")
    if not isinstance(segment, dict):
        return None
    head = segment.get("headUuid")
    if not isinstance(head, str) or not head:
        return None
    # the segment follows the summary (newer versions write it again there) ...
    i = boundary + 2
    while i < len(messages) and messages[i].kind != "compact_boundary":
        if head in messages[i].uuids or messages[i].uuid == head:
            return i
        i += 1
    # ... or precedes the boundary, back to the previous compaction at most
    i = boundary - 1
    while i >= 0 and messages[i].kind != "compact_boundary":
        if head in messages[i].uuids or messages[i].uuid == head:
            return i
        i -= 1
    return None


def preserved_before_boundary(messages: list[Message]) -> dict[int, int]:
    """Summary index → preserved head index, for compactions whose kept messages precede
    their boundary (the summary then moves ahead of them in the view)."""
    found: dict[int, int] = {}
    for i, msg in enumerate(messages):
        if msg.kind != "compact_boundary":
            continue
        summary = i + 1
        if summary >= len(messages) or messages[summary].kind != "summary":
            continue
        head = preserved_head(messages, i)
        if head is not None and head < i:
            found[summary] = head
    return found


class BoundarySlice:
    name = "boundary"
    modeled = False

    def recorded_triggers(self, session: Session) -> frozenset[str]:
        """Recorded mode: acts only on a request whose new messages hold a boundary."""
        return frozenset(("compact_boundary", "snip_boundary"))

    def apply(self, ctx: StepContext) -> None:
        view = ctx.view
        start, end = ctx.new_range
        for i in range(start, end):
            msg = view.messages[i]
            if ctx.mode != "recorded":
                # what-if keeps only the compactions the user asked for (/compact)
                if msg.kind == "compact_boundary" and msg.metadata.get("trigger") == "manual":
                    self._compact(ctx, i)
            elif msg.kind == "compact_boundary":
                self._compact(ctx, i)
            elif msg.kind == "snip_boundary":
                self._snip(ctx, i)

    def _compact(self, ctx: StepContext, boundary: int) -> None:
        view = ctx.view
        pre_decision = ctx.decision_count()
        summary_index = boundary + 1
        messages = view.messages
        head = []
        if summary_index < len(messages) and messages[summary_index].kind == "summary":
            head.append(view.head_item(messages[summary_index], f"m:{summary_index}"))
            new_start = summary_index + 1
            kept = preserved_head(messages, boundary)
            if (
                kept is not None
                and view.start <= kept < boundary
                and view.is_removed(summary_index)
            ):
                # the kept messages stay where they were; the summary (hidden there) leads
                new_start = kept
        else:
            new_start = boundary + 1
        files: list[str] = []
        if not (head and restoration_recorded(messages, summary_index)):
            restored, files = restoration_head(ctx, boundary)
            head.extend(restored)
        view.compact(head, new_start, ctx.k - 1)
        meta: dict[str, Any] = messages[boundary].metadata
        ctx.recorded_compaction = {
            "trigger": meta.get("trigger"),
            "pre_tokens": meta.get("preTokens"),
            "decision_tokens": pre_decision,
            "boundary_message": boundary,
            "summary_message": summary_index
            if head and head[0].ref == f"m:{summary_index}"
            else None,
            "restored_files": files,
        }

    def _snip(self, ctx: StepContext, boundary: int) -> None:
        view = ctx.view
        removed = set(view.messages[boundary].metadata.get("removedUuids") or [])
        if not removed:
            return
        count = 0
        for i in view.view_indices():
            if i >= boundary:
                break
            if any(u in removed for u in view.messages[i].uuids):
                view.set_override(
                    i,
                    WHOLE_MESSAGE,
                    view.make_override("snipped", "snip", None, ctx.k, detail={"recorded": True}),
                )
                count += 1
        ctx.event("snip", "snipped", recorded=True, messages=count)
