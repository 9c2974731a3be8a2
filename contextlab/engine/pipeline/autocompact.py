"""Autocompact (autoCompact.ts, compact.ts, sessionMemoryCompact.ts; spec §4.6, facts §6).

Fires when ``tokenCountWithEstimation − snipTokensFreed ≥ threshold`` (effective window −
13,000, or the lower percentage override). Session-memory compaction is tried first when
enabled (keeps a tail of at least 10,000 padded tokens and 5 text messages, at most 40,000,
without splitting tool pairs or streamed responses); otherwise a full compaction replaces the
history by one summary written by the ``Summarizer``. A failed summary counts toward the
circuit breaker (3 consecutive failures in one query stop further attempts). Where the
compaction lands on a recorded one, its summary is reused, and the messages it kept
(``preservedSegment``) and the files it restored (recorded attachments) are kept as recorded
(variant ``preserved_segment`` when messages are kept). A Codex session's compaction keeps what
Codex keeps: its newest user prompts (as recorded where it reuses a recorded compaction, else
modelled within Codex's budget) and restores no file. Recorded mode reports the compaction the
transcript holds (the boundary step applied it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from contextlab.engine.input.model import Block, Message
from contextlab.engine.measures.tokens import padded_message_estimate
from contextlab.engine.summarizing import (
    ReplayInterrupted,
    SummaryRequest,
    SummaryResult,
    continuation_message,
)

from .base import HeadItem, StepContext, View
from .restore import restoration_head, restoration_recorded

if TYPE_CHECKING:
    from contextlab.engine.input.session import Session


def sm_keep_start(view: View, min_tokens: int, min_text: int, max_tokens: int) -> int:
    """Index where the session-memory tail starts (``calculateMessagesToKeepIndex``).

    Claude Code starts from the last summarized message; with no notes state we start at the
    end (nothing kept) and expand backwards, exactly as after a resume.
    """
    start = view.end
    tokens = text_msgs = 0
    floor = view.start
    while start > floor:
        if tokens >= max_tokens or (tokens >= min_tokens and text_msgs >= min_text):
            break
        start -= 1
        if view.is_removed(start):
            continue
        msg = view.messages[start]
        tokens += padded_message_estimate(msg)
        if _is_text_message(msg):
            text_msgs += 1
    return _preserve_invariants(view, start)


#: Codex keeps the newest user messages up to this many tokens after a compaction whose
#: summary it wrote itself (``COMPACT_USER_MESSAGE_MAX_TOKENS``, codex-rs/core/src/compact.rs) ...
CODEX_KEPT_PROMPT_TOKENS = 20_000
#: ... and up to this many after a remote one (``RETAINED_MESSAGE_TOKEN_BUDGET``,
#: codex-rs/core/src/compact_remote_v2.rs).
CODEX_RETAINED_PROMPT_TOKENS = 64_000


def codex_kept_prompts(ctx: StepContext) -> list[HeadItem]:
    """What a Codex compaction keeps besides its summary, modelled: the newest user prompts in
    view, oldest first, whole, up to Codex's budget (the remote one when the session's recorded
    compactions are remote). Codex cuts the one that overflows; this stops before it. No
    file is restored: that is Claude Code's."""
    view = ctx.view
    remote = any(
        m.kind == "compact_boundary" and m.metadata.get("codex_compaction") == "remote"
        for m in view.messages
    )
    budget = CODEX_RETAINED_PROMPT_TOKENS if remote else CODEX_KEPT_PROMPT_TOKENS
    # the prompts an earlier compaction kept come first: Codex collects from all its history
    candidates = [h for h in view.head if h.message.kind == "prompt"]
    candidates += [
        view.head_item(view.messages[i], f"m:{i}")
        for i in view.view_indices()
        if view.messages[i].kind == "prompt"
    ]
    kept: list[HeadItem] = []
    used = 0
    for item in reversed(candidates):
        if used + item.rough > budget:
            break
        used += item.rough
        kept.append(item)
    kept.reverse()
    return kept


def opaque_size(view: View, summary: Message) -> int | None:
    """The size of a recorded summary whose text only stands for it (a Codex remote
    compaction's encrypted summary, sized from the next recorded count): its blocks' sizes
    summed; None for a readable summary, which is counted as the text it is."""
    if not any(isinstance(b.data, dict) and b.data.get("opaque") for b in summary.blocks):
        return None
    return sum(b.tok if b.tok >= 0 else view.counter.count(b.text) for b in summary.blocks)


def _is_text_message(msg: Message) -> bool:
    if msg.role == "assistant":
        return any(b.type == "text" for b in msg.blocks)
    if msg.role == "user":
        if msg.string_content:
            return bool(msg.blocks and msg.blocks[0].text)
        return any(b.type == "text" for b in msg.blocks)
    return False


def _preserve_invariants(view: View, start: int) -> int:
    """``adjustIndexToPreserveAPIInvariants``: keep tool pairs and split responses together."""
    kept = range(start, view.end)
    uses = {b.tool_use_id for i in kept for b in view.messages[i].blocks if b.type == "tool_use"}
    needed = {
        b.tool_use_id
        for i in kept
        for b in view.messages[i].blocks
        if b.type == "tool_result" and b.tool_use_id not in uses
    }
    i = start - 1
    while needed and i >= view.start:
        ids = {b.tool_use_id for b in view.messages[i].blocks if b.type == "tool_use"}
        if ids & needed:
            start = i
            needed -= ids
        i -= 1
    # merged assistant messages already hold every split record of a response
    return start


class Autocompact:
    name = "autocompact"
    modeled = False

    def recorded_triggers(self, session: Session) -> frozenset[str]:
        """Recorded mode: acts only on the compaction the boundary step read from a
        ``compact_boundary`` among the request's new messages (``recorded_compaction``)."""
        return frozenset(("compact_boundary",))

    def apply(self, ctx: StepContext) -> None:
        if ctx.mode == "recorded" or ctx.recorded_compaction is not None:
            if ctx.recorded_compaction is not None:
                info = ctx.recorded_compaction
                ctx.compacted = True
                ctx.event(
                    self.name,
                    "compacted",
                    recorded=True,
                    trigger=info["trigger"],
                    pre_tokens=info["pre_tokens"],
                    decision_tokens=info["decision_tokens"],
                    threshold=ctx.thresholds.autocompact_threshold,
                    summary_message=info["summary_message"],
                    restored_files=info["restored_files"],
                    user_requested=info["trigger"] == "manual",
                )
            return
        cfg = ctx.config
        if not cfg.autocompact_enabled or cfg.collapse_enabled:
            return
        tracking = ctx.step_state(self.name)
        if ctx.turn_start:
            tracking["failures"] = 0  # the breaker's state lives in one query() call
        if tracking.get("failures", 0) >= cfg.max_consecutive_autocompact_failures:
            return
        count = ctx.decision_count() - ctx.snip_freed
        threshold = ctx.thresholds.autocompact_threshold
        if count < threshold:
            return
        if cfg.sm_compact_enabled and self._session_memory(ctx, count):
            return
        self._full(ctx, count, tracking)

    def _session_memory(self, ctx: StepContext, count: int) -> bool:
        cfg = ctx.config
        view = ctx.view
        keep_start = sm_keep_start(
            view,
            cfg.sm_compact_min_tokens,
            cfg.sm_compact_min_text_block_messages,
            cfg.sm_compact_max_tokens,
        )
        kept_padded = sum(
            padded_message_estimate(view.messages[i])
            for i in range(keep_start, view.end)
            if view.in_view(i)
        )
        if kept_padded >= ctx.thresholds.autocompact_threshold:
            return False  # Claude Code falls back to a full compaction
        summarized = [view.messages[i] for i in view.view_indices() if i < keep_start]
        result = ctx.summarizer.summarize(
            SummaryRequest(
                messages=summarized, kind="session_memory", model=ctx.request.message.model
            )
        )
        text = (
            continuation_message(result.text, suppress=True)
            + "\n\nRecent messages are preserved verbatim."
        )
        self._install(
            ctx,
            text,
            keep_start,
            result,
            count,
            variant="session_memory",
            kept=view.end - keep_start,
        )
        return True

    def _full(self, ctx: StepContext, count: int, tracking: dict[str, Any]) -> None:
        view = ctx.view
        keep_start = view.end
        codex = ctx.session.agent == "codex"
        restore = not codex
        kept_after: list[HeadItem] = []
        reused = self._recorded_summary(ctx)
        sized: int | None = None
        if reused is not None:
            recorded, summary_index = reused
            result = SummaryResult(text=recorded, backend="recorded", reused=True)
            text = recorded
            sized = opaque_size(view, view.messages[summary_index])
            # the history the recorded compaction sent after its summary (Codex), as recorded;
            # what came after that (the next turn's context and prompt) stays in view
            copies = ctx.state.get("recorded_kept_after", {}).get(summary_index, [])
            kept_after = [view.head_item(view.messages[i], f"m:{i}") for i in copies]
            after = max([summary_index, *copies]) + 1
            if codex and view.start <= after < view.end:
                keep_start = after
            kept = ctx.state.get("recorded_preserved", {}).get(summary_index)
            if kept is not None and view.start <= kept < view.end:
                # the recorded compaction kept a segment (preservedSegment): keep the same one
                keep_start = kept
            if keep_start <= summary_index < view.end and restoration_recorded(
                view.messages, summary_index
            ):
                restore = False  # the recorded restored files are kept: none is modeled
        else:
            summarized = [view.messages[i] for i in view.view_indices()]
            try:
                # a Codex session's compaction asks for what Codex's asks for
                kind = "codex_compact" if ctx.session.agent == "codex" else "compact"
                result = ctx.summarizer.summarize(
                    SummaryRequest(messages=summarized, kind=kind, model=ctx.request.message.model)
                )
            except ReplayInterrupted:
                raise  # the caller fetches the summary and replays again, or stops
            except Exception as exc:  # a backend failure is a compaction failure, as in Claude Code
                tracking["failures"] = tracking.get("failures", 0) + 1
                ctx.event(
                    self.name,
                    "failed",
                    reason=str(exc)[:300],
                    failures=tracking["failures"],
                    decision_tokens=count,
                )
                return
            text = continuation_message(result.text, suppress=True)
            if codex:
                kept_after = codex_kept_prompts(ctx)
        tracking["failures"] = 0
        variant = "full" if keep_start == view.end else "preserved_segment"
        kept_messages = sum(1 for i in range(keep_start, view.end) if view.in_view(i))
        self._install(
            ctx,
            text,
            keep_start,
            result,
            count,
            variant=variant,
            kept=kept_messages + len(kept_after),
            restore=restore,
            sized=sized,
            kept_after=kept_after,
        )

    def _recorded_summary(self, ctx: StepContext) -> tuple[str, int] | None:
        """A recorded compaction summary within one request of this point, to reuse (its text
        and message index)."""
        windows: dict[int, int] = ctx.state.get("recorded_summaries", {})
        for k in (ctx.k, ctx.k - 1, ctx.k + 1):
            index = windows.get(k)
            if index is not None and not ctx.step_state(self.name).get(f"used-{index}"):
                ctx.step_state(self.name)[f"used-{index}"] = True
                msg = ctx.view.messages[index]
                return "".join(b.text for b in msg.blocks), index
        return None

    def _install(
        self,
        ctx: StepContext,
        summary_text: str,
        keep_start: int,
        result: SummaryResult,
        count: int,
        *,
        variant: str,
        kept: int,
        restore: bool = True,
        sized: int | None = None,
        kept_after: list[HeadItem] | None = None,
    ) -> None:
        view = ctx.view
        block = Block("text", summary_text)
        if sized is not None:
            block.tok = block.rough = sized
        summary = Message(
            uuid=f"summary-{ctx.k}",
            role="user",
            kind="summary",
            blocks=[block],
            timestamp=ctx.request.timestamp,
            string_content=True,
        )
        ref = view.log.add_synthetic(
            view.thread.id,
            "summary",
            summary,
            {
                "request": ctx.k,
                "backend": result.backend,
                "model": result.model,
                "reused": result.reused,
                "input_tokens": result.input_tokens,
                "output_tokens": result.output_tokens,
                "cost_usd": result.cost_usd,
                "latency_s": result.latency_s,
                "fallback_reason": result.fallback_reason,
                "replaces": [view.start, keep_start],
                "variant": variant,
            },
        )
        head: list[HeadItem] = [view.head_item(summary, ref), *(kept_after or [])]
        restored: list[str] = []
        if restore and variant in ("full", "preserved_segment"):
            items, restored = restoration_head(ctx, view.end)
            head.extend(items)
        replaced = [view.start, keep_start]
        view.compact(head, keep_start, ctx.k - 1)
        ctx.compacted = True
        ctx.state["summary_calls"] = ctx.state.get("summary_calls", 0) + (0 if result.reused else 1)
        ctx.event(
            self.name,
            "compacted",
            variant=variant,
            trigger="auto",
            decision_tokens=count,
            threshold=ctx.thresholds.autocompact_threshold,
            summary=ref,
            summary_backend=result.backend,
            summary_reused=result.reused,
            summary_tokens=view.head[0].tok,
            replaced=replaced,
            kept_messages=kept,
            restored_files=restored,
            modeled_restoration=restore and variant in ("full", "preserved_segment"),
        )
