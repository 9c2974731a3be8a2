"""Snip (HISTORY_SNIP) — MODELED; the module is not in Claude Code's public build.

What is known (spec §4.3): snip removes *middle* ranges of messages, records their uuids in a
``snip_boundary`` so a resume replays the removal, and returns ``tokensFreed``, which is
subtracted from the autocompact and blocking counts because the last usage is stale.

The policy we model: when the decision count reaches ``snip_trigger_pct`` of the effective
window, remove whole API rounds (an assistant response and the tool results answering it),
oldest first, never the first ``snip_keep_head_messages`` user prompts of the view and never the
last ``snip_keep_recent_messages`` messages, until the estimate is back under ``snip_target_pct``
of the effective window. ``tokensFreed`` is the rough estimate of what was removed. Recorded
``snip_boundary`` records are replayed by the boundary step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextlab.engine.measures.tokens import message_rough

from .base import WHOLE_MESSAGE, StepContext

if TYPE_CHECKING:
    from contextlab.engine.input.session import Session


class Snip:
    name = "snip"
    modeled = True

    def recorded_triggers(self, session: Session) -> frozenset[str]:
        """Recorded mode: never acts (a recorded snip is the boundary step's)."""
        return frozenset()

    def apply(self, ctx: StepContext) -> None:
        cfg = ctx.config
        if ctx.mode == "recorded" or not cfg.snip_enabled:
            return
        effective = ctx.thresholds.effective_window
        count = ctx.decision_count()
        trigger = int(effective * cfg.snip_trigger_pct)
        if count < trigger:
            return
        target = int(effective * cfg.snip_target_pct)
        need = count - target
        view = ctx.view
        indices = list(view.view_indices())
        keep_recent = max(1, cfg.snip_keep_recent_messages)
        protected = set(indices[-keep_recent:])
        # the head of the view (the first prompt: what the user asked for) is never snipped
        prompts = [i for i in indices if view.messages[i].kind == "prompt"]
        protected.update(prompts[: max(0, cfg.snip_keep_head_messages)])
        freed = 0
        removed: list[int] = []
        # walk rounds: an assistant message plus the user messages that follow it
        pos = 0
        while pos < len(indices) and freed < need:
            i = indices[pos]
            if i in protected or view.messages[i].role != "assistant":
                pos += 1
                continue
            round_members = [i]
            nxt = pos + 1
            while (
                nxt < len(indices)
                and view.messages[indices[nxt]].role == "user"
                and view.messages[indices[nxt]].kind == "tool_result"
            ):
                round_members.append(indices[nxt])
                nxt += 1
            if any(m in protected for m in round_members):
                pos = nxt
                continue
            for m in round_members:
                freed += message_rough(view.messages[m])
                view.set_override(
                    m,
                    WHOLE_MESSAGE,
                    view.make_override("snipped", self.name, None, ctx.k, modeled=True),
                )
                removed.append(m)
            pos = nxt
        if removed:
            ctx.snip_freed += freed
            ctx.event(
                self.name,
                "snipped",
                modeled=True,
                messages=len(removed),
                first=removed[0],
                last=removed[-1],
                tokens_freed=freed,
                decision_tokens=count,
                trigger=trigger,
            )
