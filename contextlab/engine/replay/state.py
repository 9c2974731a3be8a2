"""What the parts of a replay share: its inputs, a thread's calibrations, thresholds and trace.

The replay's own small records are plain slotted classes, not dataclasses: creating a dataclass
costs about half a millisecond at import, and ``contextlab replay``'s start-up counts
(bench/bench_replay.py).
"""

from __future__ import annotations

from contextlab.engine.config.fields import PipelineConfig
from contextlab.engine.config.thresholds import Thresholds, compute_thresholds
from contextlab.engine.input.session import Session, Thread, auto_compaction_pre_tokens
from contextlab.engine.measures.anchors import ThreadAnchors
from contextlab.engine.measures.cost import PricingTable
from contextlab.engine.measures.tokens import DEFAULT_CALIBRATION, Calibration, TokenCounter
from contextlab.engine.pipeline import Step
from contextlab.engine.summarizing import Summarizer


class ReplayInputs:
    """What one replay of a session runs with, the same for every thread."""

    __slots__ = ("config", "counter", "mode", "pricing", "session", "steps", "summarizer")

    def __init__(
        self,
        session: Session,
        config: PipelineConfig,
        mode: str,
        summarizer: Summarizer,
        counter: TokenCounter,
        pricing: PricingTable,
        steps: tuple[Step, ...],
    ) -> None:
        self.session = session
        self.config = config
        self.mode = mode
        self.summarizer = summarizer
        self.counter = counter
        self.pricing = pricing
        self.steps = steps

    def with_mode(self, mode: str) -> ReplayInputs:
        """The same inputs in another mode."""
        return ReplayInputs(
            self.session, self.config, mode, self.summarizer, self.counter, self.pricing, self.steps
        )


class Calibrations:
    """A thread's display calibration (``a + b * raw``): its own line, and one per model when
    the thread switched models (each has its own tokenizer and system prompt)."""

    __slots__ = ("per_model", "thread")

    def __init__(
        self, thread: Calibration | None = None, per_model: dict[str, Calibration] | None = None
    ) -> None:
        #: None in pass 1, which measures the plain view: the default line stands in
        self.thread = thread
        self.per_model = per_model or {}

    def for_model(self, model: str | None) -> Calibration:
        # asked several times a request: most threads have no per-model line (no look-up)
        if self.per_model:
            found = self.per_model.get(model or "")
            if found is not None:
                return found
        return self.thread or DEFAULT_CALIBRATION


class ThresholdsByModel:
    """``compute_thresholds`` of one config, once per model (the output reserve is the model's)."""

    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        self._by_model: dict[str | None, Thresholds] = {}

    def for_model(self, model: str | None) -> Thresholds:
        found = self._by_model.get(model)
        if found is None:
            found = compute_thresholds(self.config, model)
            self._by_model[model] = found
        return found


class ThreadTrace:
    """What a thread's replay measured so far, one entry per request replayed."""

    __slots__ = ("compacted_once", "compactions_at", "model_tokens", "raw")

    def __init__(self) -> None:
        #: raw (uncalibrated tiktoken) size of each request's view
        self.raw: list[int] = []
        #: calibrated size of each request's view, anchors included
        self.model_tokens: list[int] = []
        #: requests at which this replay compacted (recorded or simulated)
        self.compactions_at: list[int] = []
        #: the replay compacted (recorded or simulated): the earlier-history span is gone
        self.compacted_once = False


def anchored_tokens(
    anchors: ThreadAnchors | None, k: int, compacted_once: bool
) -> tuple[int, int, int]:
    """Request ``k``'s view tokens beyond the transcript: earlier history until the replay's
    first compaction and the segment's prefix change (raw units), and its unrecorded input
    (recorded units)."""
    if anchors is None or k >= len(anchors.segment):
        return 0, 0, 0
    history = 0 if compacted_once else anchors.history_peak(k)
    return history, anchors.segment_raw[k], anchors.unrecorded[k]


def continues_main(thread: Thread) -> bool:
    """A branch or a compaction fork: the main chain up to ``fork_index``, then its own part
    (replayed from the start so its state and cache match; requests emitted from the fork)."""
    return thread.kind == "branch" or thread.compaction_fork


def first_time(thread: Thread) -> str:
    return next((m.timestamp for m in thread.messages if m.timestamp), "")


def window_evidence(thread: Thread) -> tuple[int, list[int]]:
    """A thread's largest recorded prompt (as Claude Code counted it: what its thresholds saw)
    and its automatic compactions' ``preTokens``."""
    largest = max(
        (m.usage.counted_prompt for m in thread.messages if m.usage is not None), default=0
    )
    return largest, auto_compaction_pre_tokens(thread.messages)
