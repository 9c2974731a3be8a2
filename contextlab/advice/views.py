"""Pages for advice: the form (sessions, goal, knobs) and the answer (progress, then the
recommended settings to copy, the Pareto chart, the candidates and the sessions it hurts)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRefresh

from contextlab import engine
from contextlab.advice import charts, reports, services
from contextlab.advice.models import Advice
from contextlab.http import AuthedRequest
from contextlab.runs.charts import figure_json
from contextlab.runs.models import Run
from contextlab.tuning import goals
from contextlab.tuning.views.common import (
    _preselected,
    _sessions_for_form,
    _workspace_choices,
)
from contextlab.workspaces import access

#: The longest text one knob's values may be typed as.
MAX_VALUES_TEXT = 200


def _knobs_from_form(post: QueryDict) -> dict[str, list[Any]]:
    """``{field: [values]}`` from the knob checkboxes and their value boxes ("60, 70, 80")."""
    out: dict[str, list[Any]] = {}
    for name in post.getlist("knob")[: len(services.EXPLORABLE) + 1]:
        if name not in services.EXPLORABLE:
            raise engine.FieldError("knobs", f"{name[:60]!r} cannot be explored")
        text = post.get(f"values_{name}", "")
        if len(text) > MAX_VALUES_TEXT:
            raise engine.FieldError(f"knobs.{name}", f"at most {MAX_VALUES_TEXT} characters")
        pieces = [p.strip() for p in text.split(",") if p.strip()]
        values = []
        for piece in pieces:
            try:
                values.append(engine.setting_from_text(name, piece))
            except engine.FieldError as exc:
                raise engine.FieldError(f"knobs.{name}", exc.message) from None
        out[name] = values or list(services.EXPLORABLE[name])
    if not out:
        raise engine.FieldError("knobs", "tick at least one knob to explore")
    return out


def _cap(post: QueryDict) -> float | None:
    raw = post.get("cost_cap", "").strip()[:40]
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise engine.FieldError("cost_cap", f"a number of USD, got {raw!r}") from None


def _create(request: AuthedRequest) -> Advice:
    post = request.POST
    filters = services.filters_from(post)
    use_workspace = post.get("choose") == "workspace"
    raw_ws = post.get("workspace_id", "")
    workspace_id = int(raw_ws) if use_workspace and raw_ws.isdigit() else None
    if use_workspace and workspace_id is None:
        raise engine.FieldError("workspace_id", "choose a workspace")
    ids = [int(i) for i in post.getlist("sessions")[:500] if i.isdigit()]
    transcripts = services.choose_sessions(
        request.user,
        session_ids=None if use_workspace else ids,
        workspace_id=workspace_id,
        filters=filters,
    )
    return services.create_advice(
        owner=request.user,
        transcripts=transcripts,
        goal=post.get("goal", "lowest_cost")[:40],
        cost_cap=_cap(post),
        knobs=_knobs_from_form(post),
        filters=filters if use_workspace else None,
        workspace_id=workspace_id,
    )


@login_required
def advice_list(request: AuthedRequest) -> HttpResponse:
    """The advice of every workspace the user is a member of, newest first."""
    rows = access.items(request.user, Advice.objects.all()).select_related("workspace")[:100]
    return render(request, "advice/list.html", {"advice": rows})


@login_required
def advice_new(request: AuthedRequest) -> HttpResponse:
    specs = {spec["name"]: spec for spec in engine.field_specs()}
    context: dict[str, Any] = {
        "sessions": _sessions_for_form(request),
        "workspaces": _workspace_choices(request),
        "selected": _preselected(request),
        "goals": goals.GOALS,
        "explorable": [
            {
                "name": name,
                "values": ", ".join(str(v) for v in values),
                "default": name in services.DEFAULT_KNOBS,
                "knobs": specs[name]["counterpart"]["knobs"],
            }
            for name, values in services.EXPLORABLE.items()
        ],
        "values": {"goal": "lowest_cost", "choose": "sessions"},
        "ticked": set(services.DEFAULT_KNOBS),
    }
    if request.method == "POST":
        try:
            advice = _create(request)
        except engine.FieldError as exc:
            context["error"] = {"field": exc.field, "message": exc.message}
            context["values"] = request.POST
            context["selected"] = {
                int(i) for i in request.POST.getlist("sessions")[:500] if i.isdigit()
            }
            context["ticked"] = set(request.POST.getlist("knob"))
            return render(request, "advice/new.html", context, status=422)
        return redirect(advice)
    return render(request, "advice/new.html", context)


@login_required
@vary_on_headers("HX-Request")
def advice_detail(request: AuthedRequest, pk: int) -> HttpResponse:
    """The answer page; to htmx, the progress line while the runs replay."""
    advice = services.readable(request.user, pk)
    body = reports.answer(advice)
    active = body["status"] in (Run.Status.QUEUED, Run.Status.RUNNING)
    if request.htmx:
        if not active:
            return HttpResponseClientRefresh()
        return render(
            request, "advice/detail.html#advice-progress", {"advice": advice, "body": body}
        )
    recommendations = body.get("recommendations") or []
    chosen = recommendations[0] if recommendations else None
    figure = (
        figure_json(charts.pareto_figure(body.get("candidates") or [], chosen["candidate"]))
        if chosen
        else None
    )
    role = access.member_role(advice)
    context = {
        "advice": advice,
        "body": body,
        "active": active,
        "chosen": chosen,
        "others": recommendations[1:],
        "figure": figure,
        "goal_label": goals.GOALS.get(advice.goal, advice.goal),
        "sessions": list(
            advice.sessions.filter(pk__in=access.sessions(request.user)).order_by("pk")
        ),
        "can_cancel": role is not None and role.allows(access.WRITE),
        "can_delete": role is not None and role.allows(access.MANAGE),
    }
    return render(request, "advice/detail.html", context)


@login_required
@require_POST
def advice_cancel(request: AuthedRequest, pk: int) -> HttpResponse:
    advice = services.readable(request.user, pk, access.WRITE)
    stopped = services.cancel(advice)
    messages.success(request, f"Stopped {stopped} run{'s' if stopped != 1 else ''}.")
    return redirect(advice)


@login_required
@require_POST
def advice_delete(request: AuthedRequest, pk: int) -> HttpResponse:
    services.delete(services.readable(request.user, pk, access.MANAGE))
    messages.success(request, "Deleted the advice. The runs it used stay with their sessions.")
    return redirect("tuning:index")
