"""Blocking-limit preempt (query.ts, spec §4.7).

When no compaction happened in this iteration and the decision count reaches the blocking limit
(effective window − 3,000, or the override), Claude Code answers with a synthetic "Prompt is too
long" error instead of calling the API. The check is skipped when context collapse owns the
headroom with autocompact on.
"""

from __future__ import annotations

from .base import StepContext


class BlockingLimit:
    name = "blocking"
    modeled = False
    #: it only labels a request (``blocked``, the decision count): a pass without results
    #: (the calibration's probe) has nothing for it to do
    labels_only = True

    def apply(self, ctx: StepContext) -> None:
        if ctx.compacted or not ctx.with_results:
            return
        cfg = ctx.config
        if cfg.collapse_enabled and cfg.autocompact_enabled:
            return
        ctx.blocking_count = ctx.decision_count()
        count = ctx.blocking_count - ctx.snip_freed
        limit = ctx.thresholds.blocking_limit
        if count >= limit:
            ctx.blocked = True
            ctx.event(
                self.name,
                "blocked",
                decision_tokens=count,
                limit=limit,
                note="Claude Code would answer 'Prompt is too long' without calling the API",
            )
