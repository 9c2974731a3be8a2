"""What the comparison and sweep pages read: their runs' status, per-side totals, deltas and
per-session rows, and which comparisons, sweeps and configs a reader may see."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet

from contextlab import engine
from contextlab.runs import services as run_services
from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript
from contextlab.tuning import goals
from contextlab.tuning.models import (
    Comparison,
    ComparisonRun,
    SavedConfig,
    Side,
    Sweep,
    SweepRun,
    derived_status,
)
from contextlab.workspaces import access

# --- configs ----------------------------------------------------------------------------------


#: Measures a sweep chart may put on an axis (the engine's comparison measures).
MEASURES: dict[str, str] = {key: label for key, (label, _) in engine.compare.MEASURES.items()}
#: Keys the API promises in every summary (a subset of MEASURES).
SUMMARY_KEYS = (
    "requests",
    "compactions",
    "peak_model_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "uncached_tokens",
    "cost_usd",
)


def refresh(runs: Iterable[Run]) -> list[Run]:
    """The runs as stored now (abandoned ones recovered), for a status poll."""
    out = []
    for run in runs:
        if run.status == Run.Status.RUNNING:
            run_services.refresh_run(run)
        out.append(run)
    return out


def measures(run: Run) -> dict[str, Any] | None:
    """``engine.compare.summary_measures`` of a finished run, or None."""
    data = run_services.result_data(run)
    return engine.compare.summary_measures(data) if data else None


def totals(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return engine.compare.add_measures(list(items))


@dataclass
class SessionPair:
    transcript: Transcript
    a: Run | None
    b: Run | None
    a_measures: dict[str, Any] | None = None
    b_measures: dict[str, Any] | None = None
    delta: dict[str, dict[str, Any]] | None = None
    divergence: int | None = None

    @property
    def done(self) -> bool:
        return self.a_measures is not None and self.b_measures is not None


def comparison_runs(comparison: Comparison) -> dict[tuple[int, str], Run]:
    """``{(session id, side): run}`` of a comparison."""
    items = ComparisonRun.objects.filter(comparison=comparison).select_related("run__transcript")
    return {(item.run.transcript_id, item.side): item.run for item in items}


def workspace_comparisons(reader: User) -> QuerySet[Comparison]:
    """The comparisons of every workspace ``reader`` is a member of, newest first, with what a
    list shows prefetched."""
    return (
        access.items(reader, Comparison.objects.all())
        .select_related("workspace", "a_version__saved_config", "b_version__saved_config")
        .prefetch_related("sessions", "items__run")
    )


def workspace_sweeps(reader: User) -> QuerySet[Sweep]:
    """The sweeps of every workspace ``reader`` is a member of, newest first, with what a list
    shows prefetched."""
    return (
        access.items(reader, Sweep.objects.all())
        .select_related("workspace", "base_version__saved_config")
        .prefetch_related("sessions", "items__run")
    )


def readable_configs(reader: User) -> QuerySet[SavedConfig]:
    """The saved configs of every workspace ``reader`` is a member of."""
    return (
        access.items(reader, SavedConfig.objects.all())
        .select_related("workspace")
        .prefetch_related("versions")
    )


def hidden_sessions(item: Comparison | Sweep, reader: User) -> int:
    """How many of a comparison's or sweep's sessions ``reader`` can no longer read (moved to
    another workspace, or in one they left): the page says so instead of silently shrinking."""
    readable = access.sessions(reader).values("pk")
    return item.sessions.exclude(pk__in=readable).count()


def items_status(items: Iterable[ComparisonRun | SweepRun]) -> str:
    """The derived status of a comparison's or sweep's (prefetched) run links."""
    return derived_status(refresh(item.run for item in items))


def comparison_status(comparison: Comparison) -> str:
    return derived_status(refresh(comparison_runs(comparison).values()))


def _readable(reader: User | None) -> set[int] | None:
    """The ids of the sessions ``reader`` may still read (None: no reader, no filter)."""
    if reader is None:
        return None
    return set(access.sessions(reader).values_list("pk", flat=True))


def comparison_report(
    comparison: Comparison,
    *,
    details: bool = True,
    divergence: bool = True,
    reader: User | None = None,
) -> dict[str, Any]:
    """Everything the compare page and API show: status, per-session pairs, totals, delta.

    With ``details=False`` (a progress poll) no result is read: pairs carry their runs only.
    With a ``reader``, only the sessions they can still read count (leaving a workspace takes
    its sessions out of one's comparisons).
    """
    readable = _readable(reader)
    runs = {
        key: run
        for key, run in comparison_runs(comparison).items()
        if readable is None or key[0] in readable
    }
    refresh(runs.values())
    pairs: list[SessionPair] = []
    sessions = comparison.sessions.order_by("pk")
    if readable is not None:
        sessions = sessions.filter(pk__in=readable)
    for transcript in sessions:
        pair = SessionPair(
            transcript, runs.get((transcript.pk, Side.A)), runs.get((transcript.pk, Side.B))
        )
        if details and pair.a is not None and pair.b is not None:
            pair.a_measures = measures(pair.a)
            pair.b_measures = measures(pair.b)
            if pair.done:
                assert pair.a_measures is not None
                assert pair.b_measures is not None
                pair.delta = engine.compare.delta(pair.a_measures, pair.b_measures)
                if divergence:
                    data_a = run_services.result_data(pair.a)
                    data_b = run_services.result_data(pair.b)
                    if data_a and data_b:
                        pair.divergence = engine.compare.first_divergence(data_a, data_b)
        pairs.append(pair)
    done = [p for p in pairs if p.done]
    total_a = totals([p.a_measures for p in done if p.a_measures is not None])
    total_b = totals([p.b_measures for p in done if p.b_measures is not None])
    return {
        "status": derived_status(runs.values()),
        "pairs": pairs,
        "done_sessions": len(done),
        "a": {
            "run_ids": sorted({r.pk for (_, side), r in runs.items() if side == Side.A}),
            "summary": total_a,
        },
        "b": {
            "run_ids": sorted({r.pk for (_, side), r in runs.items() if side == Side.B}),
            "summary": total_b,
        },
        "delta": engine.compare.delta(total_a, total_b) if done else {},
        "runs": runs,
    }


def sweep_items(sweep: Sweep) -> list[SweepRun]:
    return list(SweepRun.objects.filter(sweep=sweep).select_related("run", "run__transcript"))


def sweep_status(sweep: Sweep) -> str:
    return items_status(sweep_items(sweep))


def sweep_report(
    sweep: Sweep, *, details: bool = True, reader: User | None = None
) -> dict[str, Any]:
    """Status and one point per value: summed measures over the sessions, when all are done.

    With ``details=False`` (a progress poll) no result is read and summaries are None. With a
    ``reader``, only the sessions they can still read count.
    """
    readable = _readable(reader)
    items = [
        item
        for item in sweep_items(sweep)
        if readable is None or item.run.transcript_id in readable
    ]
    refresh(item.run for item in items)
    by_value: dict[str, list[SweepRun]] = defaultdict(list)
    for item in items:
        by_value[json.dumps(item.value)].append(item)
    points = []
    for value in sweep.values:
        group = by_value.get(json.dumps(value), [])
        found = [measures(item.run) if details else None for item in group]
        complete = bool(group) and all(m is not None for m in found)
        points.append(
            {
                "value": value,
                "status": derived_status(item.run for item in group),
                "run_ids": [item.run.pk for item in group],
                "summary": totals([m for m in found if m is not None]) if complete else None,
                # each session's own measures, for the chart's per-session series
                "sessions": [
                    {"name": item.run.transcript.name, "summary": m}
                    for item, m in zip(group, found, strict=True)
                    if m is not None
                ]
                if complete
                else [],
            }
        )
    return {
        "status": derived_status(item.run for item in items),
        "points": points,
        "best": sweep_best(points),
    }


def sweep_best(
    points: Sequence[dict[str, Any]], cost_cap: float | None = None
) -> dict[str, dict[str, Any] | None]:
    """Per goal, the sweep value that meets it best (its point's value and summary), among the
    values measured on every session; None while none is (or none fits the cost cap)."""
    out: dict[str, dict[str, Any] | None] = {}
    for goal in goals.GOALS:
        if goal == "cost_cap" and cost_cap is None:
            continue
        point = goals.best(points, lambda p: p["summary"], goal, cost_cap)
        scores = {goals.score(goal, p["summary"]) for p in points if p["summary"]}
        out[goal] = (
            None
            if point is None
            else {
                "goal": goal,
                "label": goals.GOALS[goal],
                "value": point["value"],
                "summary": point["summary"],
                # every value measured the same: none is better (a threshold never reached)
                "tie": len(scores) == 1 and len(points) > 1,
            }
        )
    return out
