"""Pass 1: every thread's recorded view measured, and its display calibration fitted on it.

A recorded-mode replay of the thread, without results, gives the raw size of each request's
view; fitted against the recorded prompt sizes, that is the thread's calibration
(``a + b * raw``, per model when it switched models) and its anchors. It depends on the
session and the config only, so replays of the same pair reuse it (``Session.memo``), and
replays whose configs differ only in fields a recorded pass cannot feel share it too
(``recorded_pass_key``): an advice's or a sweep's threshold and cache-TTL variants measure
the session once.
"""

from __future__ import annotations

from contextlab.engine.config.fields import PipelineConfig
from contextlab.engine.input.session import RequestInfo, Thread
from contextlab.engine.measures.anchors import (
    ThreadAnchors,
    named_points,
    thinking_growth_factor,
    thread_anchors,
)
from contextlab.engine.measures.tokens import Calibration, fit_calibration, scale_unsized_thinking
from contextlab.engine.pipeline.base import TransformLog

from .state import Calibrations, ReplayInputs
from .thread import ThreadReplay


class ThreadCalibration:
    """What pass 1 measured of one thread (a plain class: see ``state``)."""

    __slots__ = ("anchors", "calibration", "per_model", "raw")

    def __init__(
        self,
        raw: list[int],
        calibration: Calibration | None,
        per_model: dict[str, Calibration],
        anchors: ThreadAnchors,
    ) -> None:
        #: raw size of each request's recorded view
        self.raw = raw
        #: the thread's line, None when its recording cannot fit one
        self.calibration = calibration
        #: one line per model, when the thread switched models
        self.per_model = per_model
        self.anchors = anchors


def recorded_pass_key(config: PipelineConfig, *, with_cache: bool) -> PipelineConfig:
    """``config`` as a recorded-mode pass sees it: the key under which such a pass's measures
    are shared by replays of the session under configs that differ only where it cannot tell.

    * ``autocompact_pct_override`` only moves the autocompact threshold (and the warning
      levels under it). A recorded pass keeps the recorded compactions (``Autocompact`` returns
      before its threshold test; snip and collapse do nothing in recorded mode), so the
      threshold only labels events and the decision count's ``blocked`` flag, which change
      neither the view nor the cache model.
    * ``cache_ttl`` is read by the cache model only (``CacheEstimator``), which a pass without
      results (``with_cache=False``: the calibration's probe) never runs.

    Tested in tests/engine/test_recorded_pass_sharing.py: what-if replays that share these
    measures give the same JSON as replays on a freshly loaded session.
    """
    shared = config.replace(autocompact_pct_override=None)
    return shared if with_cache else shared.replace(cache_ttl="auto")


def calibrate(
    inputs: ReplayInputs,
    threads: list[Thread],
    probes: dict[str, ThreadReplay] | None = None,
) -> dict[str, ThreadCalibration]:
    """Thread id → its pass-1 measures, for every thread of ``threads`` (memoized on the
    session, per config as a recorded pass without results sees it). ``probes`` gets each
    thread's last pass when this call made one (not from the memo)."""
    session = inputs.session
    memo_key = ("calibration", recorded_pass_key(inputs.config, with_cache=False))
    measured: dict[str, ThreadCalibration] = session.memo.get(memo_key) or {}
    for thread in threads:
        if thread.id in measured:
            continue
        probe = _probe(inputs, thread)
        totals = [(r.message.usage.prompt_total if r.message.usage else 0) for r in probe.requests]
        # where the thread restarts, compacts or starts a turn: the messages' kinds and order,
        # which sizing the thinking again does not change
        points = named_points(thread, probe.requests)
        # responses with only a streaming snapshot of their output: their thinking is sized
        # from what the thread's recording says thinking costs sent back, then measured
        # again. Measured once per thread and session, on the text sizes, so a replay under
        # another config (a sweep, an A/B pair) sizes it the same whatever ran first.
        factor_key = ("thinking_factor", thread.id)
        if factor_key not in session.memo:
            factor = thinking_growth_factor(
                thread, probe.requests, probe.trace.raw, totals, inputs.counter, points
            )
            session.memo[factor_key] = factor
            if factor > 1.0 and scale_unsized_thinking(
                thread.messages, factor, inputs.counter, thread.id
            ):
                probe = _probe(inputs, thread)
        raw = probe.trace.raw
        anchors = thread_anchors(thread, probe.requests, raw, totals, inputs.config, points)
        per_model = fit_per_model(probe.requests, raw, totals)
        if per_model or anchors.calibration is None:
            # a thread fitted per model keeps its per-model lines (segments still count)
            calibration = fit_calibration(raw, totals)
            segments = anchors.segment
            anchors = ThreadAnchors.empty(len(segments))
            anchors.segment = segments
        else:
            # (the whole thread's plain fit is not needed: the anchors' refit stands for it)
            calibration = anchors.calibration
        measured[thread.id] = ThreadCalibration(raw, calibration, per_model, anchors)
        if probes is not None:
            probes[thread.id] = probe
    session.memo[memo_key] = measured
    return measured


def _probe(inputs: ReplayInputs, thread: Thread) -> ThreadReplay:
    """A recorded-mode pass over ``thread`` without results: its raw view counts."""
    probe = ThreadReplay(inputs.with_mode("recorded"), thread, TransformLog(), Calibrations())
    probe.run(with_results=False)
    return probe


def fit_per_model(
    requests: list[RequestInfo], raw: list[int], totals: list[int]
) -> dict[str, Calibration]:
    """Separate fits for each model of a thread that switched models (``/model``)."""
    # in order of first use: a set's order would change with the hash seed, and so the JSON
    models = list(dict.fromkeys(r.message.model or "" for r in requests))
    if len(models) < 2:
        return {}
    out: dict[str, Calibration] = {}
    for model in models:
        idx = [i for i, r in enumerate(requests) if (r.message.model or "") == model]
        cal = fit_calibration([raw[i] for i in idx], [totals[i] for i in idx])
        if cal is not None:
            out[model] = cal
    return out
