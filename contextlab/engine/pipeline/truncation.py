"""Codex's tool-output truncation, for what-if replays of Codex sessions.

Codex cuts a long tool output to its head and tail before the model sees it; a rollout records
the output as it was sent. A what-if with ``tool_output_limit_chars`` cuts each new tool output
longer than that the same way (half the limit from the start, half from the end, a marker
between saying how much was left out), so a lower limit shows what it would have saved. Off
(null) for Claude Code, which persists large outputs instead (``persistence``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextlab.engine.input.jsutil import js_len

from .base import StepContext

if TYPE_CHECKING:
    from contextlab.engine.input.session import Session

#: Between the head and the tail of a cut output.
MARKER = "\n…{dropped} characters truncated…\n"


def truncate(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters: its head and tail around the marker."""
    if js_len(text) <= limit:
        return text
    half = limit // 2
    head, tail = text[:half], text[len(text) - (limit - half) :]
    return head + MARKER.format(dropped=len(text) - len(head) - len(tail)) + tail


class ToolOutputTruncation:
    """What-if: cut new tool outputs longer than ``tool_output_limit_chars``."""

    name = "truncation"
    modeled = False

    def recorded_triggers(self, session: Session) -> frozenset[str]:
        """Recorded mode: never acts (the transcript holds what the model was sent)."""
        return frozenset()

    def apply(self, ctx: StepContext) -> None:
        limit = ctx.config.tool_output_limit_chars
        if ctx.mode != "whatif" or limit is None:
            return
        view = ctx.view
        start, end = ctx.new_range
        for i in range(start, end):
            if not view.in_view(i) or view.messages[i].kind != "tool_result":
                continue
            for j, block in enumerate(view.messages[i].blocks):
                if block.type != "tool_result" or block.media:
                    continue
                text, current = view.block_state(i, j)
                if current is not None or js_len(text) <= limit:
                    continue
                cut = truncate(text, limit)
                view.set_override(
                    i,
                    j,
                    view.make_override(
                        "truncated",
                        self.name,
                        cut,
                        ctx.k,
                        detail={"original_chars": js_len(text), "limit": limit},
                    ),
                )
                ctx.event(
                    self.name,
                    "truncated",
                    tool=block.tool_name,
                    tool_use_id=block.tool_use_id,
                    original_chars=js_len(text),
                    limit=limit,
                )
