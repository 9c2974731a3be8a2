"""Microcompact: clearing old tool results (microCompact.ts, spec §4.4; facts §5).

* Recorded mode replays ``microcompact_boundary`` records: their ``compactedToolIds`` are
  cleared from the view from that point on (the transcript keeps the full text).
* Time-based (exact, 2.1.88): at the first request of a query, when the last assistant message
  is at least ``time_based_mc_gap_threshold_minutes`` old, every compactable tool result but the
  last ``max(1, keep_recent)`` becomes ``[Old tool result content cleared]``. The clearing lives
  only in that query's loop state: it is gone at the next user prompt.
* Cached microcompact (MODELED; its module is not in the public build): once more than
  ``cached_mc_trigger_threshold`` compactable results are registered, the oldest are deleted
  server-side with cache edits, keeping the last ``cached_mc_keep_recent``. The prefix stays
  cached (cache edits do not invalidate it), so these overrides are cache-preserving.
* API ``clear_tool_uses_20250919`` (MODELED from the documented behaviour, ant-only in Claude
  Code): when the prompt reaches ``api_max_input_tokens``, the server clears the oldest tool
  results, keeping the last ``api_clear_tool_uses_keep``, until at least
  ``api_max_input_tokens − api_target_input_tokens`` tokens are cleared; the cache is
  invalidated from the first cleared result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextlab.engine.input.rough import IMAGE_ROUGH_TOKENS, block_rough, rough_text

from .base import StepContext, View

if TYPE_CHECKING:
    from contextlab.engine.input.session import Session

CLEARED_PLACEHOLDER = "[Old tool result content cleared]"


def compactable_results(
    view: View, tools: tuple[str, ...] | frozenset[str]
) -> list[tuple[int, int, str]]:
    """(message, block, tool_use_id) of results whose tool_use is compactable, in view order."""
    compactable_ids: set[str] = set()
    found: list[tuple[int, int, str]] = []
    for i in view.view_indices():
        msg = view.messages[i]
        for j, block in enumerate(msg.blocks):
            if block.type == "tool_use" and block.tool_name in tools and block.tool_use_id:
                compactable_ids.add(block.tool_use_id)
            elif block.type == "tool_result" and block.tool_use_id in compactable_ids:
                found.append((i, j, block.tool_use_id or ""))
    return found


def _clear(
    ctx: StepContext,
    targets: list[tuple[int, int, str]],
    *,
    kind: str,
    scope: str,
    modeled: bool,
    cache_preserving: bool = False,
    detail: dict[str, object] | None = None,
) -> tuple[int, int]:
    """Clear the given results; returns (count, rough tokens saved)."""
    view = ctx.view
    count = saved = 0
    for i, j, _tid in targets:
        text, _ov = view.block_state(i, j)
        if text == CLEARED_PLACEHOLDER:
            continue
        block = view.messages[i].blocks[j]
        saved += rough_text(text) + block.media * IMAGE_ROUGH_TOKENS
        view.set_override(
            i,
            j,
            view.make_override(
                "cleared",
                "microcompact",
                CLEARED_PLACEHOLDER,
                ctx.k,
                scope=scope,
                modeled=modeled,
                cache_preserving=cache_preserving,
                detail={"variant": kind, **(detail or {})},
            ),
        )
        count += 1
    return count, saved


class Microcompact:
    """Time-based first, then cached microcompact, then the API strategy (all off by default)."""

    name = "microcompact"
    modeled = False

    def recorded_triggers(self, session: Session) -> frozenset[str]:
        """Recorded mode: acts only on a request whose new messages hold a recorded
        microcompaction's boundary (``_apply_recorded``)."""
        return frozenset(("microcompact_boundary",))

    def apply(self, ctx: StepContext) -> None:
        if ctx.mode == "recorded":
            self._apply_recorded(ctx)
            return
        if self._time_based(ctx):
            return
        if ctx.config.cached_mc_enabled:
            self._cached(ctx)
        if ctx.config.api_clear_tool_uses_enabled:
            self._api_clear(ctx)

    def _apply_recorded(self, ctx: StepContext) -> None:
        view = ctx.view
        start, end = ctx.new_range
        for i in range(start, end):
            msg = view.messages[i]
            if msg.kind != "microcompact_boundary":
                continue
            ids = set(msg.metadata.get("compactedToolIds") or [])
            targets = [
                (mi, bj, view.messages[mi].blocks[bj].tool_use_id or "")
                for mi in view.view_indices()
                if mi < i
                for bj, b in enumerate(view.messages[mi].blocks)
                if b.type == "tool_result" and b.tool_use_id in ids
            ]
            count, saved = _clear(ctx, targets, kind="recorded", scope="session", modeled=False)
            ctx.event(
                self.name,
                "cleared",
                recorded=True,
                trigger=msg.metadata.get("trigger"),
                pre_tokens=msg.metadata.get("preTokens"),
                tokens_saved=msg.metadata.get("tokensSaved", saved),
                cleared=count,
            )

    def _time_based(self, ctx: StepContext) -> bool:
        cfg = ctx.config
        if not cfg.time_based_mc_enabled or not ctx.turn_start:
            return False
        last_ts = ctx.state.get("last_assistant_time")
        if last_ts is None:
            return False
        gap_minutes = (ctx.now - last_ts) / 60.0
        if gap_minutes < cfg.time_based_mc_gap_threshold_minutes:
            return False
        results = compactable_results(ctx.view, tuple(cfg.compactable_tools))
        keep = max(1, cfg.time_based_mc_keep_recent)
        targets = results[:-keep] if len(results) > keep else []
        if not targets:
            return False
        count, saved = _clear(ctx, targets, kind="time", scope="turn", modeled=False)
        if count == 0 or saved == 0:
            return False
        ctx.event(
            self.name,
            "cleared",
            variant="time",
            gap_minutes=round(gap_minutes, 1),
            cleared=count,
            kept=keep,
            tokens_saved=saved,
        )
        # cached-microcompact registrations refer to a cache that is now gone
        ctx.step_state("cached_mc").clear()
        return True

    def _cached(self, ctx: StepContext) -> None:
        cfg = ctx.config
        results = compactable_results(ctx.view, tuple(cfg.compactable_tools))
        live = [r for r in results if ctx.view.block_state(r[0], r[1])[0] != CLEARED_PLACEHOLDER]
        if len(live) <= cfg.cached_mc_trigger_threshold:
            return
        keep = max(1, cfg.cached_mc_keep_recent)
        targets = live[:-keep]
        count, saved = _clear(
            ctx, targets, kind="cached", scope="session", modeled=True, cache_preserving=True
        )
        if count:
            ctx.event(
                self.name,
                "cleared",
                variant="cached",
                modeled=True,
                cleared=count,
                kept=keep,
                tokens_saved=saved,
            )

    def _api_clear(self, ctx: StepContext) -> None:
        cfg = ctx.config
        prompt = ctx.state.get("last_model_tokens", 0)
        if prompt < cfg.api_max_input_tokens:
            return
        need = cfg.api_max_input_tokens - cfg.api_target_input_tokens
        results = compactable_results(ctx.view, tuple(cfg.compactable_tools))
        live = [r for r in results if ctx.view.block_state(r[0], r[1])[0] != CLEARED_PLACEHOLDER]
        keep = max(0, cfg.api_clear_tool_uses_keep)
        candidates = live[:-keep] if keep else live
        chosen: list[tuple[int, int, str]] = []
        freed = 0
        for target in candidates:
            if freed >= need:
                break
            chosen.append(target)
            freed += block_rough(ctx.view.messages[target[0]].blocks[target[1]])
        count, saved = _clear(
            ctx, chosen, kind="api_clear_tool_uses", scope="session", modeled=True
        )
        if count:
            ctx.event(
                self.name,
                "cleared",
                variant="api_clear_tool_uses",
                modeled=True,
                cleared=count,
                tokens_saved=saved,
            )
