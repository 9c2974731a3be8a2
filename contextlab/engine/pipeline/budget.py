"""Per-message aggregate tool-result budget (``applyToolResultBudget``, spec §4.2).

Tool results of one wire-level user message may total at most ``per_message_budget_chars``;
the largest *fresh* results are replaced by persisted previews until the group fits. Decisions
are sticky: a result once sent in full is frozen, a replaced one is re-applied byte-identically.
Recorded mode applies the transcript's ``content-replacement`` records instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .base import StepContext, View
from .persistence import (
    PERSISTED_OPEN,
    build_wrapper,
    persisted_path,
    persistence_threshold,
    result_size,
)

if TYPE_CHECKING:
    from contextlab.engine.input.session import Session


@dataclass(slots=True)
class Candidate:
    message: int
    block: int
    tool_use_id: str
    tool_name: str | None
    size: int
    text: str


def candidate_groups(view: View, start: int, end: int) -> list[list[Candidate]]:
    """Group tool results as ``normalizeMessagesForAPI`` merges them into user messages.

    A new group starts at an assistant message whose id was not seen before; split records of
    one response (same id) never close a group.
    """
    groups: list[list[Candidate]] = []
    current: list[Candidate] = []
    seen_ids: set[str] = set()
    for i in range(start, end):
        if not view.in_view(i):
            continue
        msg = view.messages[i]
        if msg.role == "assistant":
            mid = msg.message_id or ""
            if mid not in seen_ids:
                seen_ids.add(mid)
                if current:
                    groups.append(current)
                current = []
            continue
        if msg.role != "user":
            continue
        for j, block in enumerate(msg.blocks):
            if block.type != "tool_result" or block.media or not block.tool_use_id:
                continue
            text, ov = view.block_state(i, j)
            if ov is not None and ov.step == "budget":
                text = view.base_text(i, j, block) or block.text
            if not text or text.startswith(PERSISTED_OPEN):
                continue
            current.append(
                Candidate(i, j, block.tool_use_id, block.tool_name, result_size(text), text)
            )
    if current:
        groups.append(current)
    return groups


def select_replacements(fresh: list[Candidate], frozen_size: int, limit: int) -> list[Candidate]:
    """Largest fresh candidates first while the group is still over the limit."""
    remaining = frozen_size + sum(c.size for c in fresh)
    chosen: list[Candidate] = []
    if remaining <= limit:
        return chosen
    for cand in sorted(fresh, key=lambda c: c.size, reverse=True):  # stable: ties keep order
        if remaining <= limit:
            break
        chosen.append(cand)
        remaining -= cand.size
    return chosen


class ToolResultBudget:
    """Aggregate budget per user message (flag ``tengu_hawthorn_steeple``, default off)."""

    name = "budget"
    modeled = False

    def recorded_triggers(self, session: Session) -> frozenset[str] | None:
        """Recorded mode: a session with recorded replacements may apply one at any request
        (None); one without never acts (``_apply_recorded``)."""
        return None if session.side.content_replacements else frozenset()

    def apply(self, ctx: StepContext) -> None:
        if ctx.mode == "recorded":
            self._apply_recorded(ctx)
        elif ctx.config.per_message_budget_enabled:
            self._apply_budget(ctx)

    def _apply_recorded(self, ctx: StepContext) -> None:
        replacements = ctx.session.side.content_replacements
        if not replacements:
            return
        view = ctx.view
        start, end = ctx.new_range
        for i in range(start, end):
            msg = view.messages[i]
            for j, block in enumerate(msg.blocks):
                if block.type == "tool_result" and block.tool_use_id in replacements:
                    text = replacements[block.tool_use_id]
                    view.set_override(
                        i,
                        j,
                        view.make_override(
                            "budget", self.name, text, ctx.k, detail={"recorded": True}
                        ),
                    )
                    ctx.event(self.name, "replaced", tool_use_id=block.tool_use_id, recorded=True)

    def _apply_budget(self, ctx: StepContext) -> None:
        state = ctx.step_state(self.name)
        seen: set[str] = state.setdefault("seen", set())
        replaced: dict[str, str] = state.setdefault("replacements", {})
        view = ctx.view
        limit = ctx.config.per_message_budget_chars
        session_dir = ctx.state.get("session_dir", "~/.claude/projects/<project>/<session>")
        # Only groups that can hold fresh results need a decision: the new messages and the
        # group they continue (the range from the previous assistant message on).
        start = ctx.new_range[0]
        while start > view.start and view.messages[start - 1].role != "assistant":
            start -= 1
        start = max(view.start, start - 1)
        for group in candidate_groups(view, start, view.end):
            fresh = [c for c in group if c.tool_use_id not in seen]
            for cand in group:
                text = replaced.get(cand.tool_use_id)
                if text is not None:
                    _, ov = view.block_state(cand.message, cand.block)
                    if ov is None:
                        view.set_override(
                            cand.message,
                            cand.block,
                            view.make_override("budget", self.name, text, ctx.k),
                        )
            if not fresh:
                continue
            eligible = []
            for cand in fresh:
                if persistence_threshold(cand.tool_name, ctx.config) == float("inf"):
                    seen.add(cand.tool_use_id)  # Read is never replaced and counts toward nothing
                else:
                    eligible.append(cand)
            frozen_size = sum(
                c.size for c in group if c.tool_use_id in seen and c.tool_use_id not in replaced
            )
            chosen = select_replacements(eligible, frozen_size, limit)
            chosen_ids = {c.tool_use_id for c in chosen}
            for cand in eligible:
                if cand.tool_use_id not in chosen_ids:
                    seen.add(cand.tool_use_id)
            for cand in chosen:
                block = view.messages[cand.message].blocks[cand.block]
                path = persisted_path(
                    cand.tool_use_id, is_list=block.is_list, session_dir=session_dir
                )
                wrapper = build_wrapper(cand.text, path, ctx.config.preview_size_bytes)
                replaced[cand.tool_use_id] = wrapper
                seen.add(cand.tool_use_id)
                view.set_override(
                    cand.message,
                    cand.block,
                    view.make_override(
                        "budget", self.name, wrapper, ctx.k, detail={"original_chars": cand.size}
                    ),
                )
                ctx.event(
                    self.name,
                    "replaced",
                    tool=cand.tool_name,
                    tool_use_id=cand.tool_use_id,
                    original_chars=cand.size,
                    limit=limit,
                )
