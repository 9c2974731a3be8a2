"""Compact-boundary slice (``getMessagesAfterCompactBoundary``, spec §4.0).

The model sees only what follows the last ``compact_boundary``. In recorded mode a boundary
entering the history replaces the view by the recorded summary (plus the post-compact file
restorations, modeled); the autocompact step reports it as that request's compaction. Snip
removals recorded in ``snip_boundary`` records are projected here too.
"""

from __future__ import annotations

from typing import Any

from .base import WHOLE_MESSAGE, StepContext
from .restore import restoration_head


class BoundarySlice:
    name = "boundary"
    modeled = False

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
        else:
            new_start = boundary + 1
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
