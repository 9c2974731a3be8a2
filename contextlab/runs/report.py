"""The session report's parts built from a finished run: request URLs, the subagent table,
the chart data (kept per finished run) and the recorded baseline of a what-if run. The owner's
report page, a share link's report and the HTML export all call these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.core.cache import cache
from django.urls import reverse
from django.utils.html import json_script
from django.utils.safestring import mark_safe

from contextlab.advice.models import AdviceRun
from contextlab.engine import as_result
from contextlab.runs import charts
from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript
from contextlab.tuning.models import ComparisonRun, SweepRun, derived_status
from contextlab.workspaces import access


def request_url_factory(transcript: Transcript, run: Run) -> charts.RequestUrl:
    prefix = reverse("runs:report", args=[transcript.pk]) + "requests/"
    return lambda i: f"{prefix}{i}/?run={run.pk}"


def request_url_pattern(transcript: Transcript, run: Run) -> str:
    """``request_url_factory``'s URLs with ``{i}`` for the request (the charts' click target)."""
    return reverse("runs:report", args=[transcript.pk]) + "requests/{i}/?run=" + str(run.pk)


def subagent_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One line per subagent thread of a result: requests, peak context, costs."""
    rows = []
    for sub in as_result(data)["subagents"]:
        reqs = sub["requests"]
        recorded = [r["recorded_cost_usd"] for r in reqs if r["recorded_cost_usd"] is not None]
        rows.append(
            {
                "thread": sub["thread"],
                # the summarizer call of a recorded compaction, on the main conversation
                "kind": "compaction fork" if sub["compaction_fork"] else sub["kind"],
                "requests": len(reqs),
                "peak": max((r["model_tokens"] for r in reqs), default=0),
                # the replay's estimate, beside the recorded cost
                "cost": sum(float(r.get("cost_estimate_usd", r["cost_usd"])) for r in reqs),
                "recorded_cost": sum(recorded) if recorded else None,
            }
        )
    return rows


def report_figures(
    run: Run, result: Any, baseline: Run | None, baseline_data: dict[str, Any] | None
) -> dict[str, Any]:
    """The report's chart data as its ``json_script`` elements, and its fidelity figures,
    built once per finished run (and baseline): building plotly figures, serializing them and
    refitting the fidelity is most of the page's server time, and a stored result never
    changes. The cache holds the finished HTML, so a visit neither rebuilds nor re-encodes."""
    stamp = run.finished_at.isoformat() if run.finished_at else "active"
    key = f"report-figures:v2:{run.pk}:{stamp}:{baseline.pk if baseline else ''}"
    cached: dict[str, Any] | None = cache.get(key) if run.finished_at else None
    if cached is None:
        figures = {
            "chart-context-data": charts.figure_json(
                charts.build_context_figure(
                    result, baseline=as_result(baseline_data) if baseline_data else None
                )
            ),
            "chart-cache-data": charts.figure_json(charts.build_cache_figure(result)),
            "chart-cost-data": charts.figure_json(charts.build_cost_figure(result)),
            "chart-fidelity-data": charts.figure_json(charts.build_fidelity_figure(result)),
        }
        cached = {
            # escaped for a <script> element by json_script itself
            "scripts": "".join(json_script(fig, element) for element, fig in figures.items()),
            "fidelity": charts.fidelity(result),
        }
        if run.finished_at:
            cache.set(key, cached, timeout=3600)
    return {"scripts": mark_safe(cached["scripts"]), "fidelity": cached["fidelity"]}


def recorded_baseline(transcript: Transcript, run: Run) -> Run | None:
    """The finished recorded replay a what-if run is read against (None for a recorded run)."""
    if run.mode != Run.Mode.WHATIF:
        return None
    return transcript.runs.filter(status=Run.Status.DONE, mode=Run.Mode.RECORDED).first()


@dataclass
class RunGroup:
    """The runs of one comparison, sweep or advice request on this session, shown as one row."""

    kind: str
    pk: int
    label: str
    #: None when the reader is not a member of the item's workspace (no link)
    url: str | None
    runs: list[Run] = field(default_factory=list)

    @property
    def status(self) -> str:
        return derived_status(self.runs)


def group_runs(runs: list[Run], reader: User) -> tuple[list[Run], list[RunGroup]]:
    """The session's runs that no comparison, sweep or advice made (in their order), and a group
    per comparison, sweep or advice request with its runs on this session (newest first). A run
    several of them share shows in each."""
    by_id = {run.pk: run for run in runs}
    groups: dict[tuple[str, int], RunGroup] = {}
    sources: list[tuple[str, Any, str]] = [
        ("comparison", ComparisonRun, "comparison"),
        ("sweep", SweepRun, "sweep"),
        ("advice", AdviceRun, "advice"),
    ]
    for kind, through, parent in sources:
        links = through.objects.filter(run_id__in=by_id).select_related(parent)
        readable = set(
            access.items(reader, links.model._meta.get_field(parent).related_model.objects.all())
            .filter(pk__in=links.values(f"{parent}_id"))
            .values_list("pk", flat=True)
        )
        for link in links.order_by(f"-{parent}_id", "run_id"):
            item = getattr(link, parent)
            key = (kind, item.pk)
            if key not in groups:
                groups[key] = RunGroup(
                    kind,
                    item.pk,
                    _group_label(kind, item),
                    item.get_absolute_url() if item.pk in readable else None,
                )
            group = groups[key]
            if by_id[link.run_id] not in group.runs:
                group.runs.append(by_id[link.run_id])
    grouped = {run.pk for group in groups.values() for run in group.runs}
    loose = [run for run in runs if run.pk not in grouped]
    ordered = sorted(groups.values(), key=lambda g: max(r.pk for r in g.runs), reverse=True)
    return loose, ordered


def _group_label(kind: str, item: Any) -> str:
    if kind == "comparison":
        return f"comparison #{item.pk}: {item.a_label} vs {item.b_label}"
    if kind == "sweep":
        values = ", ".join(str(v) for v in item.values[:8])
        more = "…" if len(item.values) > 8 else ""
        return f"sweep #{item.pk} of {item.field}: {values}{more}"
    return f"advice #{item.pk} for {item.goal.replace('_', ' ')}"
