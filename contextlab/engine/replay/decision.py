"""Claude Code's own count of a request's prompt: the count its thresholds compare.

``tokenCountWithEstimation``: the usage of the last response still in the view plus Claude
Code's rough estimate of everything after it. A what-if replay leans on the recording while
its view matches it (and on Claude Code's own ``preTokens`` where it compacted), and on its own
count after.
"""

from __future__ import annotations

from contextlab.engine.config.fields import PipelineConfig
from contextlab.engine.input.model import Usage
from contextlab.engine.input.rough import block_rough
from contextlab.engine.input.session import RequestInfo
from contextlab.engine.pipeline.base import View

from .forecast import ESTIMATED_OUTPUT, FORECAST
from .recording import RecordedHistory
from .state import Calibrations, ThreadTrace, ThresholdsByModel


class DecisionCounter:
    """The decision count of any request of one thread, as its replay stands."""

    def __init__(
        self,
        *,
        view: View,
        requests: list[RequestInfo],
        recording: RecordedHistory,
        trace: ThreadTrace,
        calibrations: Calibrations,
        thresholds: ThresholdsByModel,
        config: PipelineConfig,
        mode: str,
        recorded_raw: list[int] | None,
    ) -> None:
        self.view = view
        self.requests = requests
        self.recording = recording
        self.trace = trace
        self.calibrations = calibrations
        self.thresholds = thresholds
        self.config = config
        self.mode = mode
        #: pass 1's raw view sizes (the recording's view), None in pass 1 itself
        self.recorded_raw = recorded_raw

    def count(self, k: int) -> int:
        """``tokenCountWithEstimation``: last usage in the view plus rough estimates after it.

        In a what-if replay whose view still matches the recording where Claude Code compacted,
        Claude Code's own count there (``preTokens``, its last response's usage) is the count:
        it also holds what the transcript lost to the compaction (a tool result never written).
        Where ``preTokens`` alone is below the threshold, Claude Code's count was above it all
        the same: it also estimated the messages after that response (the tool result a
        preserved segment kept), so they are estimated on top as Claude Code does."""
        pre = self.recording.pre_tokens.get(k)
        if (
            pre is not None
            and self.config.whatif_recorded_counts
            and self.recorded_raw is not None
            and (
                # a compaction before the file's first response: its history is not in the file
                k == 0
                or (
                    k <= len(self.trace.raw)
                    and k - 1 < len(self.recorded_raw)
                    and self.trace.raw[k - 1] == self.recorded_raw[k - 1]
                    and self.same_compactions(k - 1)
                )
            )
        ):
            threshold = self.thresholds.for_model(
                self.requests[k].message.model
            ).autocompact_threshold
            return pre if pre >= threshold else pre + self._estimated_before_boundary(k)
        view = self.view
        for j in range(k - 1, -1, -1):
            req = self.requests[j]
            pos = req.position
            if pos < view.start:
                break
            if not view.in_view(pos):
                continue
            usage = req.message.usage
            if (
                usage is None
                and FORECAST in req.message.metadata
                and j < len(self.trace.model_tokens)
            ):
                # a forecast left this response's usage out: the replay's own count stands in
                # (its estimated output holds every block of the response)
                base = self.trace.model_tokens[j] + int(req.message.metadata[ESTIMATED_OUTPUT])
                return base + view.rough_range(pos + 1, view.end)
            if usage is None:
                continue
            total = usage.total  # a property that adds up the usage: read once
            if total <= 0:
                continue
            recorded = self.mode == "recorded" or self.recorded_raw is None
            base = total if recorded else self._usage_total(j, usage)
            blocks = req.message.blocks
            first_blocks = int(req.message.metadata.get("first_record_blocks", len(blocks)))
            # (most responses are one record: nothing after it, no generator for an empty sum)
            tail = (
                sum(block_rough(b) for b in blocks[first_blocks:])
                if first_blocks < len(blocks)
                else 0
            )
            return base + tail + view.rough_range(pos + 1, view.end)
        return view.rough_total()

    def _estimated_before_boundary(self, k: int) -> int:
        """Rough tokens after the view's last recorded usage and before the recorded compaction
        boundary of request ``k`` (what ``preTokens`` does not count)."""
        summary = self.recording.summaries.get(k)
        view = self.view
        if summary is None:
            return 0
        boundary = summary - 1
        for j in range(k - 1, -1, -1):
            pos = self.requests[j].position
            if pos < view.start:
                break
            if view.in_view(pos):
                # the response's later split records (a tool use after its text) are estimated
                msg = self.requests[j].message
                first_blocks = int(msg.metadata.get("first_record_blocks", len(msg.blocks)))
                tail = sum(block_rough(b) for b in msg.blocks[first_blocks:])
                return tail + view.rough_range(pos + 1, min(boundary, view.end))
        return 0

    def _usage_total(self, j: int, usage: Usage) -> int:
        """Recorded usage while the view matches the recording; the replay's own count after."""
        if self.mode == "recorded" or self.recorded_raw is None:
            return usage.total
        if (
            j < len(self.trace.raw)
            and j < len(self.recorded_raw)
            and self.trace.raw[j] == self.recorded_raw[j]
        ):
            return usage.total
        if (
            self.config.whatif_recorded_counts
            and j < len(self.trace.raw)
            and j < len(self.recorded_raw)
            and self.same_compactions(j)
        ):
            # both views went through the same compactions: the recorded count plus the
            # calibrated difference between the two views leans on what Claude Code counted
            cal = self.calibrations.for_model(self.requests[j].message.model)
            return usage.total + round(cal.ratio * (self.trace.raw[j] - self.recorded_raw[j]))
        if j < len(self.trace.model_tokens):
            return self.trace.model_tokens[j] + usage.output
        return usage.total

    def same_compactions(self, j: int) -> bool:
        """This replay and the recording compacted as often up to request ``j``, each time
        within one request of the other (a summary reused there, so the views stay close)."""
        recorded = sorted(k for k in self.recording.summaries if k <= j)
        ours = [k for k in self.trace.compactions_at if k <= j]
        return len(recorded) == len(ours) and all(
            abs(a - b) <= 1 for a, b in zip(recorded, ours, strict=True)
        )
