"""Share links of a comparison or a sweep: the snapshot of its tables and charts, redacted.

A session's link serves its report and explorer (``services``); a comparison's or a sweep's
link serves what its page shows (totals, per-session rows, charts; no forms, no request
views), taken from the sessions the sharer can read when the link is made. Every text in it
(session names, config labels, chart titles and trace names) goes through the redaction pass,
and the outgoing bytes are scanned again, as for a session.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from contextlab import redaction
from contextlab.runs import services as run_services
from contextlab.runs.charts import figure_json
from contextlab.runs.models import Run
from contextlab.sharing.models import ShareLink
from contextlab.sharing.services import DEFAULT_EXPIRY_DAYS, Redacted, ShareError, publish
from contextlab.tuning import charts
from contextlab.tuning import reports as tuning_reports
from contextlab.tuning.models import Comparison, Sweep


def _no_request_view(_index: int) -> str:
    # a shared comparison has no A-vs-B request view: a click on a point stays on the page
    return "#charts"


def comparison_source(comparison: Comparison, reader: User) -> dict[str, Any]:
    """What a shared comparison shows, before redaction (409 while its runs are not done)."""
    report = tuning_reports.comparison_report(comparison, reader=reader)
    if report["status"] != Run.Status.DONE:
        raise ShareError(
            "comparison",
            f"the comparison is {report['status']}: share it when its replays are done",
            409,
        )
    labels = (f"A ({comparison.a_label})", f"B ({comparison.b_label})")
    pairs = []
    for pair in report["pairs"]:
        figures = None
        if pair.done and pair.a is not None and pair.b is not None:
            data_a = run_services.result_data(pair.a)
            data_b = run_services.result_data(pair.b)
            if data_a and data_b:
                # a list, not a dict: jsonb does not keep key order, and the page keeps the
                # owner's order of the charts
                figures = [
                    {"id": key, "figure": figure}
                    for key, figure in charts.compare_figures(
                        data_a, data_b, _no_request_view, labels=labels
                    ).items()
                ]
        pairs.append(
            {
                "name": pair.transcript.display_name,
                "file_name": pair.transcript.name,
                "delta": pair.delta,
                "divergence": pair.divergence,
                "figures": figures,
            }
        )
    return {
        "kind": "comparison",
        "comparison": {
            "id": comparison.pk,
            "a_label": comparison.a_label,
            "b_label": comparison.b_label,
            "workspace": comparison.workspace.name,
            "created_at": comparison.created_at.isoformat(),
        },
        "delta": report["delta"],
        "done_sessions": report["done_sessions"],
        "pairs": pairs,
    }


def sweep_source(sweep: Sweep, reader: User) -> dict[str, Any]:
    """What a shared sweep shows, before redaction (409 while its runs are not done)."""
    report = tuning_reports.sweep_report(sweep, reader=reader)
    if report["status"] != Run.Status.DONE:
        raise ShareError(
            "sweep", f"the sweep is {report['status']}: share it when its replays are done", 409
        )
    points = [
        {key: point[key] for key in ("value", "status", "summary", "sessions")}
        for point in report["points"]
    ]
    figure = figure_json(
        charts.build_sweep_figure(points, field=sweep.field, labels=tuning_reports.MEASURES)
    )
    names = sorted({s["name"] for p in points for s in p["sessions"]})
    return {
        "kind": "sweep",
        "sweep": {
            "id": sweep.pk,
            "field": sweep.field,
            "values": sweep.values,
            "base_label": sweep.base_label,
            "workspace": sweep.workspace.name,
            "created_at": sweep.created_at.isoformat(),
        },
        "sessions": names,
        "points": points,
        "figure": figure,
    }


def _locate(path: redaction.Path) -> str:
    """Where a string of a comparison's or sweep's snapshot is, in the dialog's words."""
    if len(path) >= 2 and path[0] == "pairs" and isinstance(path[1], int):
        where = f"session {path[1] + 1}"
        return where + (" · chart" if "figures" in path else " · name")
    if len(path) >= 2 and path[0] == "points" and isinstance(path[1], int):
        return f"value {path[1] + 1}"
    if path and path[0] == "figure":
        return "chart"
    if path and path[0] in ("comparison", "sweep") and len(path) >= 2:
        return str(path[1]).replace("_", " ")
    return ".".join(str(p) for p in path[:2]) or "page"


def source_of(target: Comparison | Sweep, reader: User) -> dict[str, Any]:
    if isinstance(target, Comparison):
        return comparison_source(target, reader)
    return sweep_source(target, reader)


def redact_source(source: dict[str, Any], keep: list[str]) -> Redacted:
    result = redaction.redact_tree(source, keep=keep, locate=_locate)
    return Redacted(result.tree, result.by_category())


def preview_findings(target: Comparison | Sweep, reader: User) -> list[dict[str, Any]]:
    """What redaction would find in a share of this comparison or sweep (for the dialog)."""
    return redact_source(source_of(target, reader), []).findings


def create_share(
    *,
    user: User,
    target: Comparison | Sweep,
    audience: str = ShareLink.Audience.LINK,
    days: int | None = DEFAULT_EXPIRY_DAYS,
    keep: list[str] | None = None,
    mode: str = ShareLink.Mode.FULL,
) -> tuple[ShareLink, str]:
    """A link to a redacted snapshot of a comparison or sweep (no message text: ``mode`` has
    nothing to leave out, and is stored as chosen). The caller checked ``user`` is
    an editor of its workspace. Returns the link and its token (shown once, never stored)."""
    return publish(
        user=user,
        workspace_id=target.workspace_id,
        audience=audience,
        days=days,
        keep=keep,
        redact=lambda kept: redact_source(source_of(target, user), kept),
        mode=mode,
        comparison=target if isinstance(target, Comparison) else None,
        sweep=target if isinstance(target, Sweep) else None,
    )
