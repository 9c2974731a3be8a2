"""Pages for sweeps: the form and the report (cost against history kept, axes chosen)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRefresh

from contextlab import engine
from contextlab.http import AuthedRequest
from contextlab.runs.charts import figure_json
from contextlab.runs.models import Run
from contextlab.tuning import charts, goals, services
from contextlab.tuning import reports as tuning_reports
from contextlab.tuning.forms import SweepForm
from contextlab.tuning.models import Sweep
from contextlab.tuning.views.common import (
    _config_choices,
    _error,
    _preselected,
    _role_allows,
    _selected_sessions,
    _sessions_for_form,
    _sessions_workspace,
    _spec_from_form,
    _workspace_choices,
    _workspace_from_form,
)
from contextlab.workspaces import access

# --- sweeps ------------------------------------------------------------------------------------


@login_required
def sweep_new(request: AuthedRequest) -> HttpResponse:
    fields = engine.compare.numeric_fields()
    context: dict[str, Any] = {
        "sessions": _sessions_for_form(request),
        "choices": _config_choices(request),
        "workspaces": _workspace_choices(request),
        "fields": fields,
        "selected": _preselected(request),
        "values": {
            "base_config": "preset:auto",
            "field": "autocompact_pct_override",
            "sweep_values": "50:90:10",
            "workspace_id": _sessions_workspace(request),
        },
    }
    if request.method == "POST":
        transcripts = _selected_sessions(request)
        context["selected"] = {t.pk for t in transcripts}
        context["values"] = request.POST
        form = SweepForm(request.POST)
        try:
            sweep = services.create_sweep(
                owner=request.user,
                workspace=_workspace_from_form(request, form.workspace_id_value()),
                transcripts=transcripts,
                base=_spec_from_form(request, form.values(), "base"),
                field_name=form.values()["field"],
                values=form.values()["sweep_values"],
            )
        except engine.FieldError as exc:
            context["error"] = _error(exc)
            return render(request, "tuning/sweep_new.html", context, status=422)
        return redirect(sweep)
    return render(request, "tuning/sweep_new.html", context)


def _axis(request: AuthedRequest, name: str, default: str) -> str:
    value = request.GET.get(name, default)
    return value if value in tuning_reports.MEASURES else default


def _goal(request: AuthedRequest) -> tuple[str, float | None, str | None]:
    """The goal the page names the best value for (default lowest cost), its cost cap, and
    what is wrong with them (the page says so and names no best value)."""
    goal = request.GET.get("goal", "lowest_cost")[:40]
    raw = request.GET.get("cost_cap", "").strip()[:40]
    cap: float | None = None
    try:
        cap = float(raw) if raw else None
        goals.check_goal(goal, cap)
    except ValueError:
        return "cost_cap", None, f"the cost cap is not a number: {raw!r}"
    except engine.FieldError as exc:
        return ("lowest_cost" if exc.field == "goal" else goal), None, exc.message
    return goal, cap, None


@login_required
@vary_on_headers("HX-Request")
def sweep_detail(request: AuthedRequest, pk: int) -> HttpResponse:
    """The sweep page; to htmx, ``sweep-progress`` (polling) or ``sweep-chart`` (axes changed)."""
    sweep = access.item_for(
        request.user, Sweep.objects.select_related("workspace", "base_version__saved_config"), pk
    )
    polling = bool(request.htmx) and request.htmx.target != "sweep-chart"
    report = tuning_reports.sweep_report(sweep, details=not polling, reader=request.user)
    active = report["status"] in (Run.Status.QUEUED, Run.Status.RUNNING)
    x = _axis(request, "x", "mean_history_share")
    y = _axis(request, "y", "cost_usd")
    fig = charts.build_sweep_figure(
        report["points"], field=sweep.field, x=x, y=y, labels=tuning_reports.MEASURES
    )
    goal, cost_cap, goal_error = _goal(request)
    best = (
        tuning_reports.sweep_best(report["points"], cost_cap).get(goal)
        if not polling and goal_error is None
        else None
    )
    context: dict[str, Any] = {
        "sweep": sweep,
        "report": report,
        "goals": goals.GOALS,
        "goal": goal,
        "cost_cap": request.GET.get("cost_cap", ""),
        "goal_error": goal_error,
        "best": best,
        "best_settings": engine.claude_code_settings(
            {**sweep.base_overrides, sweep.field: best["value"]}
        )
        if best
        else None,
        "active": active,
        "x": x,
        "y": y,
        "measures": tuning_reports.MEASURES,
        "figure": figure_json(fig),
        "any_done": any(p["summary"] for p in report["points"]),
        "sessions": list(
            sweep.sessions.filter(pk__in=access.sessions(request.user)).order_by("pk")
        ),
        "hidden_sessions": tuning_reports.hidden_sessions(sweep, request.user),
        "can_share": _role_allows(sweep, access.WRITE),
        # whoever may start one may stop it
        "can_cancel": _role_allows(sweep, access.WRITE),
        "can_delete": _role_allows(sweep, access.MANAGE),
    }
    if request.htmx and request.htmx.target == "sweep-chart":
        return render(request, "tuning/sweep.html#sweep-chart", context)
    if request.htmx:
        if not active:
            return HttpResponseClientRefresh()  # the page then shows the finished sweep
        return render(request, "tuning/sweep.html#sweep-progress", context)
    return render(request, "tuning/sweep.html", context)
