"""Context collapse ("marble-origami") — MODELED; the module is not in the public build.

What is known (spec §4.5): committed spans of messages are replaced, at read time, by one meta
user message ``<collapsed id="<16 digits>">summary</collapsed>``; commits are ordered and
replayed every request; autocompact is suppressed while collapse is on (collapse owns the
headroom), committing starts around 90 % of the effective window and blocks around 95 %.

The policy we model: when the estimated prompt reaches ``collapse_commit_pct`` of the effective
window, the oldest span of up to ``collapse_max_span_messages`` messages (at least
``collapse_min_span_messages``, never the last ``collapse_keep_recent_messages``, never splitting
a tool call from its result) is summarized by the Summarizer, the summary cut to
``collapse_summary_max_tokens``, and committed; this repeats until the estimate is under the
commit level or nothing is left to collapse. Recorded
``marble-origami-commit`` records are replayed as they were written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextlab.engine.summarizing import SummaryRequest

from .base import WHOLE_MESSAGE, StepContext

if TYPE_CHECKING:
    from contextlab.engine.input.session import Session


def collapse_id(k: int, n: int) -> str:
    return f"{(k * 1000 + n) % 10**16:016d}"


class ContextCollapse:
    name = "collapse"
    modeled = True

    def recorded_triggers(self, session: Session) -> frozenset[str] | None:
        """Recorded mode: a session with recorded collapse commits may apply one at any
        request (None); one without never acts."""
        return None if session.side.collapse_commits else frozenset()

    def apply(self, ctx: StepContext) -> None:
        if ctx.mode == "recorded":
            self._recorded(ctx)
            return
        if not ctx.config.collapse_enabled:
            return
        cfg = ctx.config
        effective = ctx.thresholds.effective_window
        commit_level = int(effective * cfg.collapse_commit_pct)
        view = ctx.view
        span_len = max(2, cfg.collapse_max_span_messages)
        min_span = max(2, cfg.collapse_min_span_messages)
        keep_recent = max(1, cfg.collapse_keep_recent_messages)
        commits = 0
        while ctx.prompt_estimate() >= commit_level:
            indices = [i for i in view.view_indices() if (i, WHOLE_MESSAGE) not in view.overrides]
            candidates = indices[:-keep_recent]
            if len(candidates) < min_span:
                break
            span = candidates[:span_len]
            # never split a tool_use from its result: extend over trailing tool results
            last = span[-1]
            for i in indices[len(span) :]:
                if view.messages[i].kind == "tool_result" and i not in set(indices[-keep_recent:]):
                    span.append(i)
                    last = i
                else:
                    break
            result = ctx.summarizer.summarize(
                SummaryRequest(
                    messages=[view.messages[i] for i in span],
                    kind="collapse",
                    model=ctx.request.message.model,
                )
            )
            cid = collapse_id(ctx.k, commits)
            summary = result.text[: cfg.collapse_summary_max_tokens * 4]  # rough: 4 chars a token
            text = f'<collapsed id="{cid}">{summary}</collapsed>'
            first = span[0]
            view.set_override(
                first,
                WHOLE_MESSAGE,
                view.make_override(
                    "collapsed",
                    self.name,
                    text,
                    ctx.k,
                    block_type="text",
                    modeled=True,
                    detail={
                        "collapse_id": cid,
                        "span": [first, last],
                        # what ReplayResult's "summaries" list reports for this commit
                        "backend": result.backend,
                        "model": result.model,
                        "input_tokens": result.input_tokens,
                        "output_tokens": result.output_tokens,
                        "cost_usd": result.cost_usd,
                        "latency_s": result.latency_s,
                        "reused": result.reused,
                        "fallback_reason": result.fallback_reason,
                    },
                ),
            )
            for i in span[1:]:
                view.set_override(
                    i,
                    WHOLE_MESSAGE,
                    view.make_override(
                        "collapsed",
                        self.name,
                        None,
                        ctx.k,
                        modeled=True,
                        detail={"collapse_id": cid},
                    ),
                )
            commits += 1
            ctx.state["summary_calls"] = ctx.state.get("summary_calls", 0) + 1
            ctx.event(
                self.name,
                "collapsed",
                modeled=True,
                collapse_id=cid,
                messages=len(span),
                first=first,
                last=last,
                summary_backend=result.backend,
                summary_tokens=view.counter.count(text),
            )

    def _recorded(self, ctx: StepContext) -> None:
        commits = ctx.session.side.collapse_commits
        if not commits:
            return
        view = ctx.view
        applied: set[str] = ctx.step_state(self.name).setdefault("applied", set())
        uuid_index = ctx.step_state(self.name).setdefault(
            "uuid_index", {u: i for i, m in enumerate(view.messages) for u in m.uuids}
        )
        for commit in commits:
            cid = str(commit.get("collapseId") or commit["summaryUuid"])
            if cid in applied:
                continue
            first = uuid_index.get(commit["firstArchivedUuid"])
            last = uuid_index.get(commit["lastArchivedUuid"])
            if first is None or last is None or last >= view.end or first < view.start:
                continue  # Claude Code skips commits whose span it cannot find
            applied.add(cid)
            view.set_override(
                first,
                WHOLE_MESSAGE,
                view.make_override(
                    "collapsed",
                    self.name,
                    commit["summaryContent"],
                    ctx.k,
                    block_type="text",
                    detail={"recorded": True, "collapse_id": cid},
                ),
            )
            for i in range(first + 1, last + 1):
                view.set_override(
                    i,
                    WHOLE_MESSAGE,
                    view.make_override(
                        "collapsed", self.name, None, ctx.k, detail={"collapse_id": cid}
                    ),
                )
            ctx.event(
                self.name, "collapsed", recorded=True, collapse_id=cid, messages=last - first + 1
            )
