"""Replay a session: pass 1 (calibration) then every thread in time order, resumable.

Two passes per thread. The first, in recorded mode, only measures the view of every request and
fits the display calibration (``a + b * raw``) against the recorded usage (``calibration``).
The second runs the requested mode with every step, decision counts, the prompt-cache model
and cost (``thread``). One prompt cache serves the whole session, fed in time order, so threads
that share a prompt share its entries.
"""

from __future__ import annotations

from collections.abc import Callable

from contextlab.engine.config.fields import PipelineConfig
from contextlab.engine.input.disk_cache import gc_paused
from contextlab.engine.input.session import Session, Thread
from contextlab.engine.measures.cost import PricingTable, load_pricing
from contextlab.engine.measures.prompt_cache import CacheSimulator
from contextlab.engine.measures.tokens import (
    DEFAULT_CALIBRATION,
    Calibration,
    TiktokenCounter,
    TokenCounter,
)
from contextlab.engine.pipeline import DEFAULT_STEPS, Step
from contextlab.engine.pipeline.base import TransformLog
from contextlab.engine.replay import checkpoints
from contextlab.engine.summarizing import ExtractiveSummarizer, Summarizer, SummaryPending

from .calibration import ThreadCalibration, calibrate, recorded_pass_key
from .forecast import forecast_session
from .result import ReplayResult, ThreadResult
from .state import Calibrations, ReplayInputs, continues_main, first_time
from .thread import ThreadReplay

MODES = ("recorded", "whatif")
ProgressCallback = Callable[[int, int], None]


class ProgressCounter:
    """Requests replayed so far out of the session's total, told to the caller's callback."""

    __slots__ = ("callback", "done", "total")

    def __init__(self, total: int, callback: ProgressCallback | None) -> None:
        self.total = total
        self.callback = callback
        self.done = 0

    def tick(self, n: int) -> None:
        self.done += n
        if self.callback is not None:
            self.callback(self.done, self.total)


class SessionReplay:
    """One replay of a session, resumable where a ``SummaryPending`` stopped it.

    When a summary is pending, the whole state can be pickled (``checkpoints``) and resumed
    later from exactly that step instead of replaying the session again.
    """

    def __init__(self, inputs: ReplayInputs, preset_name: str, progress: ProgressCallback | None):
        self.inputs = inputs
        self.preset_name = preset_name
        self.log = TransformLog()
        # a compaction fork is the recorded compaction's own call: a what-if replay decides
        # its compactions itself (and accounts their summaries), so it leaves the fork out
        self.threads = [
            t
            for t in inputs.session.threads
            if t.messages and not (inputs.mode == "whatif" and t.compaction_fork)
        ]
        # requests a thread emits: a branch or fork replays the main chain before its fork
        # point without emitting (or ticking progress for) those requests
        total = sum(
            sum(
                1
                for m in t.messages[t.fork_index if continues_main(t) else 0 :]
                if m.role == "assistant"
            )
            for t in self.threads
        )
        self.progress = ProgressCounter(total, progress)
        self.measured: dict[str, ThreadCalibration] = {}
        self.order: list[Thread] = []
        self.position = -1  # index in ``order`` of the thread being replayed; -1: not started
        self.runner: ThreadReplay | None = None
        self.cache_sim: CacheSimulator | None = None
        self.server_misses: dict[str, dict[int, int]] = {}
        self.by_thread: dict[str, ThreadResult] = {}
        #: keep each thread's finished replay (a live session's next append continues it)
        self.keep_runners = False
        self.finished: dict[str, ThreadReplay] = {}
        #: told when a one-thread replay stands before its last request (``replay.live`` keeps
        #: the state there too: an append that completes that response goes on from it)
        self.on_pause: Callable[[], None] | None = None
        #: a live replay: the session's requests when its calibration was fitted
        self.fitted = 0

    def recorded_server_misses(self) -> dict[str, dict[int, int]]:
        """Thread → message index → cache read of each server-side miss the recording shows.

        Measured by a recorded-mode replay under the same config (shared by every what-if
        replay of the session whose config a recorded replay cannot tell from it: the
        autocompact thresholds of a sweep or an advice, ``recorded_pass_key``).
        """
        session = self.inputs.session
        memo_key = ("server_misses", recorded_pass_key(self.inputs.config, with_cache=True))
        found: dict[str, dict[int, int]] | None = session.memo.get(memo_key)
        if found is None:
            recorded_inputs = self.inputs.with_mode("recorded")
            recorded = SessionReplay(recorded_inputs, self.preset_name, None).run()
            found = {
                tr.thread.id: {
                    r["message"]: r["cache_estimate"]["read"]
                    for r in tr.requests
                    if r["cache_estimate"]["reason"] == "server_miss"
                }
                for tr in recorded.threads
            }
            session.memo[memo_key] = found
        return found

    def run(self) -> ReplayResult:
        inputs = self.inputs
        config = inputs.config
        probes: dict[str, ThreadReplay] = {}
        if self.position < 0:
            self.measured = calibrate(inputs, self.threads, probes)
            if len(probes) != 1 or len(self.threads) != 1:
                # another thread's calibration may have sized blocks this one shares (thinking
                # scaled, a fork's copied messages) after this one's pass: each view measures
                probes = {}
            if inputs.mode == "whatif" and config.cache_recorded_server_misses:
                self.server_misses = self.recorded_server_misses()
            # one cache for the session, fed in time order: threads sharing a prompt share entries
            self.cache_sim = CacheSimulator(
                lookback_blocks=config.cache_lookback_blocks,
                lookback_enabled=config.cache_lookback_enabled,
            )
            self.order = sorted(self.threads, key=first_time)
            self.position = 0
        main_cal = self.measured[self.threads[0].id].calibration if self.threads else None
        while self.position < len(self.order):
            thread = self.order[self.position]
            measured = self.measured[thread.id]
            cal = measured.calibration
            if cal is None:
                inherited = main_cal if continues_main(thread) else None
                cal = (
                    Calibration(
                        inherited.prefix_tokens, inherited.ratio, 0, None, None, "inherited"
                    )
                    if inherited
                    else DEFAULT_CALIBRATION
                )
            if self.runner is None:
                self.runner = ThreadReplay(
                    inputs,
                    thread,
                    self.log,
                    Calibrations(cal, measured.per_model),
                    recorded_raw=measured.raw,
                    anchors=measured.anchors,
                    cache_sim=self.cache_sim,
                    server_misses=self.server_misses.get(thread.id, {}),
                    progress=self.progress.tick,
                    probe=probes.pop(thread.id, None),
                )
            self.finish_thread(self.runner, cal)
            self.runner = None
            self.position += 1
        return self.result()

    def pause_before_last(self, runner: ThreadReplay) -> None:
        """With ``on_pause`` and one thread: replay up to its last request, tell ``on_pause``."""
        last = len(runner.requests) - 1
        if self.on_pause is None or len(self.order) != 1 or last < runner.replayed():
            return
        runner.stop_before = last
        try:
            runner.run(with_results=True)
        finally:
            runner.stop_before = None
        self.on_pause()

    def finish_thread(self, runner: ThreadReplay, cal: Calibration) -> None:
        """Replay ``runner``'s thread to its end (from where it stands) and keep its rows."""
        self.pause_before_last(runner)
        thread = runner.thread
        measured = self.measured[thread.id]
        requests = runner.run(with_results=True)
        totals = [(r.message.usage.prompt_total if r.message.usage else 0) for r in runner.requests]
        self.by_thread[thread.id] = ThreadResult(
            thread,
            requests,
            runner.trace.raw,
            totals,
            cal,
            runner.summary_calls,
            measured.per_model,
            measured.anchors,
        )
        if self.keep_runners:
            self.finished[thread.id] = runner

    def result(self) -> ReplayResult:
        inputs = self.inputs
        return ReplayResult(
            session=inputs.session,
            mode=inputs.mode,
            preset=self.preset_name,
            config=inputs.config,
            threads=[self.by_thread[t.id] for t in self.threads],
            log=self.log,
            summarizer=inputs.summarizer.name,
        )

    def checkpoint(self) -> bytes:
        return checkpoints.dump(
            self, self.inputs.session, self.inputs.summarizer, self.progress.callback
        )

    @staticmethod
    def restore(
        data: bytes,
        session: Session,
        summarizer: Summarizer,
        progress: ProgressCallback | None,
    ) -> SessionReplay:
        state = checkpoints.load(data, session, summarizer, progress)
        if not isinstance(state, SessionReplay):
            raise ValueError("checkpoint written by another engine version")
        state.progress.callback = progress  # the caller's, also when the first run had none
        return state


def replay(
    session: Session,
    config: PipelineConfig,
    *,
    mode: str = "recorded",
    summarizer: Summarizer | None = None,
    progress: ProgressCallback | None = None,
    preset_name: str = "",
    counter: TokenCounter | None = None,
    pricing: PricingTable | None = None,
    steps: tuple[Step, ...] = DEFAULT_STEPS,
    checkpoint: bool = False,
    usage_until: float = 1.0,
) -> ReplayResult:
    """Replay every thread of ``session`` under ``config``.

    ``mode="recorded"`` rebuilds what Claude Code sent, from the transcript's own records;
    ``mode="whatif"`` removes the recorded compaction artifacts and lets ``config`` decide.
    ``progress(done, total)`` is called as requests complete (total = all requests).
    With ``checkpoint=True``, a ``SummaryPending`` carries ``checkpoint`` bytes that
    ``resume`` continues from, once the summary can be had.
    ``usage_until`` (0 < F ≤ 1): read the recorded usage and compaction figures only for the
    first F of each thread's requests and estimate every later one (``forecast``); a session
    that already is a forecast copy (``forecast_session``) keeps its own share.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    counter = counter or TiktokenCounter()
    session = forecast_session(session, usage_until, counter)
    inputs = ReplayInputs(
        session,
        config,
        mode,
        summarizer or ExtractiveSummarizer(),
        counter,
        pricing or load_pricing(),
        steps,
    )
    return _run(SessionReplay(inputs, preset_name, progress), checkpoint)


def resume(
    data: bytes,
    session: Session,
    *,
    summarizer: Summarizer,
    progress: ProgressCallback | None = None,
    usage_until: float = 1.0,
) -> ReplayResult:
    """Continue a replay from a ``SummaryPending.checkpoint`` of the same session (and the same
    ``usage_until``).

    Raises ``ValueError`` for a checkpoint of another engine version (replay from the start).
    """
    if usage_until < 1 and session.usage_until >= 1:
        session = forecast_session(session, usage_until, TiktokenCounter())
    return _run(SessionReplay.restore(data, session, summarizer, progress), True)


def _run(state: SessionReplay, checkpoint: bool) -> ReplayResult:
    """Run ``state`` to its end, with the cyclic garbage collector paused: a replay builds a
    row and a cache list per request and drops little that reference counting does not free,
    so collections triggered by its allocations only walk the session over and over."""
    try:
        with gc_paused():
            return state.run()
    except SummaryPending as pending:
        if checkpoint:
            pending.checkpoint = state.checkpoint()
        raise
