"""The Share dialog's parts used by every kind of link, the dialog of a comparison and of a
sweep, their read-only shared pages (tables and charts; no forms), and what a session link's
report computes from its snapshot."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from contextlab.engine import RequestRow, as_result
from contextlab.http import AuthedRequest
from contextlab.runs import charts, report, tools, waste
from contextlab.sharing import services, targets
from contextlab.sharing.forms import ShareForm
from contextlab.sharing.models import ShareLink
from contextlab.summaries import services as summaries
from contextlab.tuning import reports as tuning_reports
from contextlab.tuning import verdicts
from contextlab.tuning.models import Comparison, Sweep
from contextlab.workspaces import access


def dialog_context(
    *,
    target_kind: str,
    target_name: str,
    back_url: str,
    crumbs: list[tuple[str, str]],
    workspace_name: str,
    not_ready: str,
) -> dict[str, Any]:
    """What the one Share dialog (and its "created" page) needs of whatever is shared."""
    return {
        "target_kind": target_kind,
        "target_name": target_name,
        "back_url": back_url,
        "crumbs": [*crumbs, (back_url, target_name)],
        "workspace_name": workspace_name,
        "not_ready": not_ready,
        "expiry_days": services.EXPIRY_DAYS,
        "default_days": services.DEFAULT_EXPIRY_DAYS,
    }


def dialog_answer(
    request: HttpRequest,
    context: dict[str, Any],
    *,
    create: Callable[[dict[str, Any]], tuple[ShareLink, str]],
    findings: Callable[[], list[dict[str, Any]] | None],
) -> HttpResponse:
    """The Share dialog for anything shared. GET: audience, expiry and what redaction found
    (keep or drop by category); POST: ``create(choices)`` and show the link once, or the
    dialog again with the reason."""
    if request.method == "POST":
        try:
            link, token = create(ShareForm(request.POST).choices())
        except services.ShareError as exc:
            context["error"] = exc
            context["findings"] = findings()
            return render(request, "sharing/dialog.html", context, status=exc.http_status)
        context["link"] = link
        context["url"] = request.build_absolute_uri(reverse("sharing:shared", args=[token]))
        return render(request, "sharing/created.html", context, status=201)
    context["findings"] = findings()
    return render(request, "sharing/dialog.html", context)


def _target_dialog(request: AuthedRequest, target: Comparison | Sweep) -> HttpResponse:
    """GET: audience, expiry and the redaction findings; POST: make the link, show it once."""
    kind = "comparison" if isinstance(target, Comparison) else "sweep"
    context = dialog_context(
        target_kind=kind,
        target_name=f"{kind} #{target.pk}",
        back_url=target.get_absolute_url(),
        crumbs=[(reverse("tuning:index"), "Tune")],
        workspace_name=target.workspace.name,
        not_ready=f"This {kind}'s replays are not all done: share it once they are.",
    )
    return dialog_answer(
        request,
        context,
        create=lambda form: targets.create_share(user=request.user, target=target, **form),
        findings=lambda: _target_findings(target, request),
    )


def _target_findings(
    target: Comparison | Sweep, request: AuthedRequest
) -> list[dict[str, Any]] | None:
    try:
        return targets.preview_findings(target, request.user)
    except services.ShareError:
        return None


def _gated(request: AuthedRequest, queryset: QuerySet[Any], pk: int) -> Any:
    # sharing is an editor's action, as for a session
    return access.item_for(request.user, queryset, pk, access.WRITE)


@login_required
def comparison_dialog(request: AuthedRequest, pk: int) -> HttpResponse:
    return _target_dialog(
        request, _gated(request, Comparison.objects.select_related("workspace"), pk)
    )


@login_required
def sweep_dialog(request: AuthedRequest, pk: int) -> HttpResponse:
    return _target_dialog(request, _gated(request, Sweep.objects.select_related("workspace"), pk))


def shared_target(request: HttpRequest, link: ShareLink, base: dict[str, Any]) -> HttpResponse:
    """The shared page of a comparison or sweep link (``base``: what every shared page has)."""
    snapshot = services.snapshot_data(link)
    context = {**base, "snapshot": snapshot}
    if link.kind == "comparison":
        delta = snapshot["delta"]
        goal = verdicts.DEFAULT_GOAL
        context.update(
            {
                "comparison": snapshot["comparison"],
                "readings": verdicts.read_delta(delta, goal) if delta else {},
                "headline": verdicts.headline(delta, goal) if delta else "",
                "pairs": [
                    {
                        **pair,
                        # unique ids per session: app.js draws every [data-chart] it finds
                        "charts": [
                            (f"{chart['id']}-{number}", chart["figure"])
                            for chart in pair["figures"] or []
                        ],
                    }
                    for number, pair in enumerate(snapshot["pairs"])
                ],
            }
        )
        return render(request, "sharing/comparison.html", context)
    context.update(
        {
            "sweep": snapshot["sweep"],
            "points": snapshot["points"],
            "figure": snapshot["figure"],
            "measures": tuning_reports.MEASURES,
        }
    )
    return render(request, "sharing/sweep.html", context)


def report_parts(
    link: ShareLink, snapshot: dict[str, Any], url: charts.RequestUrl
) -> dict[str, Any]:
    """What the shared report computes from its snapshot (charts above all), once per link: a
    snapshot never changes. Keyed by the token's hash, which no other link ever has."""
    key = f"share-report:{link.token_hash}"
    parts: dict[str, Any] | None = cache.get(key)
    if parts is not None:
        return parts
    data = snapshot["result"]
    result = as_result(data)
    parts = {
        "summary": result["summary"],
        "figures": {
            "chart-context-data": charts.figure_json(charts.build_context_figure(result, url)),
            "chart-cache-data": charts.figure_json(charts.build_cache_figure(result, url)),
            "chart-cost-data": charts.figure_json(charts.build_cost_figure(result, url)),
            "chart-fidelity-data": charts.figure_json(charts.build_fidelity_figure(result, url)),
        },
        "fidelity": charts.fidelity(result),
        "subagents": report.subagent_rows(data),
        "summaries": summaries.run_summaries(data, snapshot["messages"]),
        "rows": request_rows(result["requests"], url),
        **report_cards(snapshot, url),
    }
    cache.set(key, parts, timeout=3600)
    return parts


def report_cards(
    snapshot: dict[str, Any], url: charts.RequestUrl, *, explorer: bool = True
) -> dict[str, Any]:
    """The owner's report's waste, compact-now-or-wait and tools cards from a share's snapshot
    (``runs/_waste.html``, ``runs/_tools.html``), their requests linked by ``url``; without an
    ``explorer`` (the HTML export) a tool's name links nowhere."""
    found = waste.snapshot_waste(snapshot)
    count = len(as_result(snapshot["result"])["requests"])
    return {
        "waste": waste.shown_waste(found, url) if found is not None else None,
        **tools.tools_card(tools.snapshot_tools(snapshot), url if explorer else None, count),
    }


def request_rows(requests: list[RequestRow], url: charts.RequestUrl) -> list[dict[str, Any]]:
    return [
        {
            "index": i,
            "url": url(i),
            "thread": r["thread"],
            "model_tokens": r["model_tokens"],
            "recorded": charts.recorded_prompt(r),
            "cost_usd": r["cost_usd"],
            "events": len(r["events"]),
        }
        for i, r in enumerate(requests)
    ]
