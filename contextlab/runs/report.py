"""The session report's parts built from a finished run: request URLs, the subagent table,
the chart data (kept per finished run) and the recorded baseline of a what-if run. The owner's
report page, a share link's report and the HTML export all call these."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.urls import reverse
from django.utils.html import json_script
from django.utils.safestring import mark_safe

from contextlab.engine import as_result
from contextlab.runs import charts
from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript


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
