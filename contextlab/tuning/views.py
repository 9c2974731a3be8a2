"""Pages for tuning: saved configs, A/B comparisons (with the A-vs-B request view) and sweeps."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers

from contextlab import engine
from contextlab.engine import RequestRow, as_result
from contextlab.http import AuthedRequest
from contextlab.runs import services as run_services
from contextlab.runs import views as run_views
from contextlab.runs.charts import figure_json
from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript
from contextlab.tuning import charts, services, verdicts
from contextlab.tuning.alignment import align_rows
from contextlab.tuning.models import Comparison, SavedConfig, Sweep
from contextlab.workspaces import access
from contextlab.workspaces import services as workspace_services
from contextlab.workspaces.models import Role, Workspace

# --- shared form helpers -----------------------------------------------------------------------


def _config_choices(request: AuthedRequest) -> list[dict[str, str]]:
    """Options for a "config" select: every preset, then the user's saved configs (latest)."""
    options = [
        {
            "value": f"preset:{name}",
            "label": name,
            "group": "Presets",
            "description": engine.PRESET_DESCRIPTIONS.get(
                name, "the preset matching each session's Claude Code version"
            ),
        }
        for name in engine.PRESET_NAMES
    ]
    for saved in services.readable_configs(request.user):
        latest = saved.latest
        if latest is not None:
            options.append(
                {
                    "value": f"version:{latest.pk}",
                    "label": latest.label,
                    "group": f"Configs of {saved.workspace.name}",
                    "description": f"{latest.base_preset} + {len(latest.overrides)} change(s)",
                }
            )
    return options


def _spec_from_form(request: AuthedRequest, prefix: str) -> services.ConfigSpec:
    choice = request.POST.get(f"{prefix}_config", "preset:auto")
    try:
        overrides = engine.parse_overrides(request.POST.get(f"{prefix}_overrides"))
    except engine.FieldError as exc:
        raise exc.within(prefix) from None
    preset: str | None = None
    version_id: int | None = None
    kind, _, value = choice.partition(":")
    if kind == "version" and value.isdigit():
        version_id = int(value)
    elif kind == "preset":
        preset = value
    else:
        raise engine.FieldError(f"{prefix}.preset", "pick a preset or a saved config")
    return services.config_spec(
        owner=request.user,
        preset=preset,
        overrides=overrides,
        version_id=version_id,
        prefix=prefix,
    )


def _error(exc: engine.FieldError) -> dict[str, Any]:
    return {"field": exc.field, "message": exc.message, "side": exc.field.split(".")[0]}


def _selected_sessions(request: AuthedRequest) -> list[Transcript]:
    ids = request.POST.getlist("sessions")
    if not all(i.isdigit() for i in ids):
        raise Http404("no such session")
    transcripts = services.owned_sessions(request.user, [int(i) for i in ids])
    if transcripts is None:
        raise Http404("no such session")
    return transcripts


def _workspace_choices(request: AuthedRequest) -> list[Workspace]:
    """The workspaces a new config, comparison or sweep may go to (where the user is an
    editor), the personal one first: it is the default."""
    personal = workspace_services.personal_workspace(request.user)
    others = access.workspaces(request.user, access.WRITE).exclude(pk=personal.pk)
    return [personal, *others]


def _workspace_from_form(request: AuthedRequest) -> Workspace:
    raw = request.POST.get("workspace_id", "")
    return services.target_workspace(request.user, int(raw) if raw.isdigit() else None)


def _sessions_workspace(request: AuthedRequest) -> str:
    """The form's default workspace: that of the sessions it was opened for (``?session=``),
    when they share one the user may create in, else "" (the personal one)."""
    picked = _preselected(request)
    if not picked:
        return ""
    found = set(
        access.sessions(request.user, access.WRITE)
        .filter(pk__in=picked)
        .values_list("workspace_id", flat=True)
    )
    return str(found.pop()) if len(found) == 1 else ""


def _preselected(request: AuthedRequest) -> set[int]:
    return {int(i) for i in request.GET.getlist("session") if i.isdigit()}


# --- overview ----------------------------------------------------------------------------------


def _with_status(items: Iterable[Comparison | Sweep], user: User) -> list[dict[str, Any]]:
    """``{"item", "status", "sessions"}`` rows for the Tune page (runs prefetched: no query per
    row); only the sessions the user can read are named."""
    readable = set(access.sessions(user).values_list("pk", flat=True))
    return [
        {
            "item": item,
            "status": services.items_status(item.items.all()),
            "sessions": [s for s in item.sessions.all() if s.pk in readable],
        }
        for item in items
    ]


@login_required
def index(request: AuthedRequest) -> HttpResponse:
    user = request.user
    return render(
        request,
        "tuning/index.html",
        {
            "configs": services.readable_configs(user),
            "comparisons": _with_status(services.workspace_comparisons(user)[:50], user),
            "sweeps": _with_status(services.workspace_sweeps(user)[:50], user),
            "has_sessions": access.sessions(user, access.WRITE).exists(),
        },
    )


Owned = TypeVar("Owned", SavedConfig, Comparison, Sweep)


def _delete_owned(request: AuthedRequest, model: type[Owned], pk: int) -> HttpResponse:
    """POST only: delete a config, comparison or sweep (an owner of its workspace) and go back
    to the Tune page."""
    item = access.item_for(request.user, model.objects.all(), pk, access.MANAGE)
    name = f"config “{item.name}”" if isinstance(item, SavedConfig) else str(item)
    services.delete_owned(item)
    messages.success(request, f"Deleted {name}. The runs it used stay with their sessions.")
    return redirect("tuning:index")


@login_required
@require_POST
def config_delete(request: AuthedRequest, pk: int) -> HttpResponse:
    return _delete_owned(request, SavedConfig, pk)


Runnable = TypeVar("Runnable", Comparison, Sweep)


def _cancel_owned(request: AuthedRequest, model: type[Runnable], pk: int) -> HttpResponse:
    """POST only: stop a comparison's or sweep's queued and running runs (an editor of its
    workspace: whoever may start one may stop one)."""
    item = access.item_for(request.user, model.objects.all(), pk, access.WRITE)
    stopped, shared = services.cancel_owned(item)
    note = (
        f" {shared} run{'s' if shared != 1 else ''} another comparison or sweep also uses went on."
        if shared
        else ""
    )
    messages.success(
        request, f"Cancelled {stopped} run{'s' if stopped != 1 else ''} of {item}.{note}"
    )
    return run_views.back_to(request, item.get_absolute_url())


@login_required
@require_POST
def comparison_cancel(request: AuthedRequest, pk: int) -> HttpResponse:
    return _cancel_owned(request, Comparison, pk)


@login_required
@require_POST
def sweep_cancel(request: AuthedRequest, pk: int) -> HttpResponse:
    return _cancel_owned(request, Sweep, pk)


@login_required
@require_POST
def comparison_delete(request: AuthedRequest, pk: int) -> HttpResponse:
    return _delete_owned(request, Comparison, pk)


@login_required
@require_POST
def sweep_delete(request: AuthedRequest, pk: int) -> HttpResponse:
    return _delete_owned(request, Sweep, pk)


def _role_allows(item: SavedConfig | Comparison | Sweep, need: Role) -> bool:
    """Whether the role the gate annotated on ``item`` allows ``need`` (for buttons)."""
    role = access.member_role(item)
    return role is not None and role.allows(need)


# --- configs -----------------------------------------------------------------------------------


def _field_rows(check: services.FormCheck, values: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per config field for the editor: its input, range, doc and error."""
    base = (
        services.preset_base(check.preset).to_dict() if check.preset in engine.PRESET_NAMES else {}
    )
    rows = []
    for spec in engine.field_specs():
        name, kind = spec["name"], str(spec["type"])
        if kind == "bool":
            widget = "checkbox"
        elif spec.get("choices"):
            widget = "select"
        elif kind.startswith(("int", "float")):
            widget = "number"
        else:
            widget = "text"
        rows.append(
            {
                **spec,
                "widget": widget,
                "value": values.get(name, services.form_value(base.get(name))),
                "checked": services.parse_field(spec, values.get(name))
                if kind == "bool" and name in values
                else bool(base.get(name)),
                "preset_value": json.dumps(base.get(name))
                if not isinstance(base.get(name), str)
                else base.get(name),
                "changed": name in check.overrides,
                "error": check.errors.get(name),
                "step": "1" if kind.startswith("int") else "any",
            }
        )
    return rows


def _groups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["group"], []).append(row)
    return [
        {"name": name, "rows": items, "changed": sum(1 for r in items if r["changed"])}
        for name, items in groups.items()
    ]


def _form_values(request: AuthedRequest) -> dict[str, str]:
    names = {spec["name"] for spec in engine.field_specs()}
    values: dict[str, str] = {k: str(request.POST.get(k, "")) for k in request.POST if k in names}
    # unchecked checkboxes are absent: the hidden "<name>__present" markers say they were shown
    for key in request.POST:
        if key.endswith("__present") and key[: -len("__present")] not in values:
            values[key[: -len("__present")]] = ""
    return values


def _config_context(
    request: AuthedRequest,
    *,
    saved: SavedConfig | None,
    preset: str,
    values: dict[str, str],
    name: str,
    name_error: str | None = None,
) -> dict[str, Any]:
    check = services.check_form(preset, values)
    rows = _field_rows(check, values)
    versions = list(saved.versions.all()) if saved else []
    return {
        "saved": saved,
        "workspaces": _workspace_choices(request) if saved is None else [],
        "workspace_id": request.POST.get("workspace_id", ""),
        "can_edit": saved is None or _role_allows(saved, access.WRITE),
        "can_delete": saved is not None and _role_allows(saved, access.MANAGE),
        "versions": versions,
        "name": name,
        "name_error": name_error,
        "preset": check.preset,
        "presets": [
            {"name": p, "description": engine.PRESET_DESCRIPTIONS.get(p, "")}
            for p in engine.PRESET_NAMES
        ],
        "check": check,
        "groups": _groups(rows),
        "error_fields": [(field, message) for field, message in check.errors.items()],
    }


def _values_of(preset: str, overrides: dict[str, Any]) -> dict[str, str]:
    """Form values of a stored config: the preset's values with the overrides on top."""
    try:
        config = services.validate_config(preset, overrides)
    except engine.FieldError:
        config = services.preset_base("auto")
    data = config.to_dict()
    return {
        spec["name"]: services.form_value(data.get(spec["name"])) for spec in engine.field_specs()
    }


@login_required
def config_new(request: AuthedRequest) -> HttpResponse:
    return _config_page(request, None)


@login_required
def config_detail(request: AuthedRequest, pk: int) -> HttpResponse:
    """A saved config: members read it, editors save a new version."""
    need = access.WRITE if request.method == "POST" else access.READ
    saved = access.item_for(request.user, SavedConfig.objects.all(), pk, need)
    return _config_page(request, saved)


def _config_page(request: AuthedRequest, saved: SavedConfig | None) -> HttpResponse:
    if request.method == "POST":
        preset = request.POST.get("preset", "auto")
        name = request.POST.get("name", "")
        values = _form_values(request)
        check = services.check_form(preset, values)
        name_error = None
        if not check.errors:
            try:
                version = services.save_config(
                    owner=request.user,
                    name=name,
                    preset=check.preset,
                    overrides=check.overrides,
                    saved=saved,
                    workspace=_workspace_from_form(request) if saved is None else None,
                )
            except engine.FieldError as exc:
                if exc.field in ("name", "workspace_id"):
                    name_error = exc.message
                else:
                    check.errors[exc.field.removeprefix("config.")] = exc.message
            else:
                return redirect(
                    version.saved_config.get_absolute_url() + f"?saved={version.number}"
                )
        context = _config_context(
            request, saved=saved, preset=preset, values=values, name=name, name_error=name_error
        )
        return render(request, "tuning/config_form.html", context, status=422)
    if saved is not None:
        latest = saved.latest
        preset = latest.base_preset if latest else saved.base_preset
        overrides = latest.overrides if latest else {}
        name = saved.name
    else:
        preset = request.GET.get("preset", "auto")
        if preset not in engine.PRESET_NAMES:
            preset = "auto"
        overrides = {}
        name = ""
    context = _config_context(
        request, saved=saved, preset=preset, values=_values_of(preset, overrides), name=name
    )
    context["just_saved"] = request.GET.get("saved")
    return render(request, "tuning/config_form.html", context)


@login_required
@require_POST
def config_check(request: AuthedRequest) -> HttpResponse:
    """Inline validation: the ``config-check`` partial (errors by field, diff from the preset)."""
    preset = request.POST.get("preset", "auto")
    values = _form_values(request)
    if request.POST.get("reset") == "1":
        values = _values_of(preset, {})
        context = _config_context(request, saved=None, preset=preset, values=values, name="")
        return render(request, "tuning/config_form.html#config-fields", context)
    context = _config_context(request, saved=None, preset=preset, values=values, name="")
    html = render_to_string("tuning/config_form.html#config-check", context, request)
    # each field's own error span is refreshed out of band, next to its input
    html += render_to_string("tuning/config_form.html#config-errors", context, request)
    return HttpResponse(html)


# --- comparisons -------------------------------------------------------------------------------


def _sessions_for_form(request: AuthedRequest) -> list[Transcript]:
    return list(access.sessions(request.user, access.WRITE).order_by("-created_at", "-pk"))


@login_required
def compare_new(request: AuthedRequest) -> HttpResponse:
    context: dict[str, Any] = {
        "sessions": _sessions_for_form(request),
        "choices": _config_choices(request),
        "workspaces": _workspace_choices(request),
        "selected": _preselected(request),
        "values": {
            "a_config": "preset:auto",
            "b_config": "preset:aggressive",
            "workspace_id": _sessions_workspace(request),
        },
    }
    if request.method == "POST":
        transcripts = _selected_sessions(request)
        context["selected"] = {t.pk for t in transcripts}
        context["values"] = request.POST
        try:
            comparison = services.create_comparison(
                owner=request.user,
                workspace=_workspace_from_form(request),
                transcripts=transcripts,
                a=_spec_from_form(request, "a"),
                b=_spec_from_form(request, "b"),
            )
        except engine.FieldError as exc:
            context["error"] = _error(exc)
            return render(request, "tuning/compare_new.html", context, status=422)
        return redirect(comparison)
    version = request.GET.get("a", "")
    if version.isdigit():
        context["values"] = {**context["values"], "a_config": f"version:{version}"}
    return render(request, "tuning/compare_new.html", context)


def _compare_url(comparison: Comparison, transcript: Transcript) -> Callable[[int], str]:
    prefix = reverse("tuning:comparison", args=[comparison.pk]) + "requests/"
    return lambda i: f"{prefix}{i}/?session={transcript.pk}"


def _pick_session(request: AuthedRequest, comparison: Comparison) -> Transcript:
    # only sessions the user can still read: leaving a workspace ends access through here too
    sessions = comparison.sessions.filter(pk__in=access.sessions(request.user)).order_by("pk")
    wanted = request.GET.get("session", "")
    if wanted:
        if not wanted.isdigit():
            raise Http404("no such session")
        return get_object_or_404(sessions, pk=int(wanted))
    first = sessions.first()
    if first is None:
        raise Http404("this comparison has no sessions left")
    return first


def _pick_pair(
    request: AuthedRequest, pairs: list[services.SessionPair]
) -> services.SessionPair | None:
    wanted = request.GET.get("session", "")
    if wanted:
        for pair in pairs:
            if str(pair.transcript.pk) == wanted:
                return pair
        raise Http404("that session is not part of this comparison")
    return pairs[0] if pairs else None


def _comparisons() -> QuerySet[Comparison]:
    return Comparison.objects.select_related(
        "workspace", "a_version__saved_config", "b_version__saved_config"
    )


@login_required
@vary_on_headers("HX-Request")
def comparison_detail(request: AuthedRequest, pk: int) -> HttpResponse:
    """The compare page; to htmx, the ``compare-progress`` partial (polls until finished)."""
    comparison = access.item_for(request.user, _comparisons(), pk)
    report = services.comparison_report(comparison, details=not request.htmx, reader=request.user)
    goal = verdicts.goal_of(request.GET.get("goal"))
    runs: dict[tuple[int, str], Run] = report["runs"]
    active = report["status"] in (Run.Status.QUEUED, Run.Status.RUNNING)
    context: dict[str, Any] = {
        "comparison": comparison,
        "report": report,
        "active": active,
        "run_rows": sorted(runs.items(), key=lambda item: (item[0][0], item[0][1])),
        "measures": services.MEASURES,
        "goal": goal,
        "goals": [{"key": k, "label": v[0]} for k, v in verdicts.GOALS.items()],
        "readings": verdicts.read_delta(report["delta"], goal) if report.get("delta") else {},
        "headline": verdicts.headline(report["delta"], goal) if report.get("delta") else "",
        "hidden_sessions": services.hidden_sessions(comparison, request.user),
        "can_share": _role_allows(comparison, access.WRITE),
        # whoever may start one may stop it
        "can_cancel": _role_allows(comparison, access.WRITE),
        "can_delete": _role_allows(comparison, access.MANAGE),
    }
    if request.htmx:
        response = render(request, "tuning/comparison.html#compare-progress", context)
        if not active:
            response["HX-Refresh"] = "true"  # the page then shows the charts and the delta
        return response
    pair = _pick_pair(request, report["pairs"])
    context["pair"] = pair
    if pair is not None and pair.done and pair.a is not None and pair.b is not None:
        data_a = run_services.result_data(pair.a)
        data_b = run_services.result_data(pair.b)
        url = _compare_url(comparison, pair.transcript)
        labels = (f"A ({comparison.a_label})", f"B ({comparison.b_label})")
        context["figures"] = charts.compare_figures(data_a, data_b, url, labels=labels)
        context["divergence_url"] = url(pair.divergence) if pair.divergence is not None else None
        context["first_url"] = url(0)
    return render(request, "tuning/comparison.html", context)


@login_required
@vary_on_headers("HX-Request")
def compare_request(request: AuthedRequest, pk: int, index: int) -> HttpResponse:
    """One request under A and under B: A's model view beside B's, ←/→ to move."""
    comparison = access.item_for(request.user, _comparisons(), pk)
    transcript = _pick_session(request, comparison)
    runs = services.comparison_runs(comparison)
    run_a, run_b = runs.get((transcript.pk, "a")), runs.get((transcript.pk, "b"))
    services.refresh(r for r in (run_a, run_b) if r is not None)
    context: dict[str, Any] = {"comparison": comparison, "transcript": transcript}
    data_a = run_services.result_data(run_a) if run_a else None
    data_b = run_services.result_data(run_b) if run_b else None
    if data_a is None or data_b is None:
        return render(request, "tuning/compare_request_empty.html", context)
    divergence = engine.compare.first_divergence(data_a, data_b)
    req_a_list: list[RequestRow] = as_result(data_a).get("requests") or []
    req_b_list: list[RequestRow] = as_result(data_b).get("requests") or []
    count = max(len(req_a_list), len(req_b_list))
    if not 0 <= index < count:
        raise Http404(f"request {index} does not exist (this session has {count})")
    req_a = req_a_list[index] if index < len(req_a_list) else None
    req_b = req_b_list[index] if index < len(req_b_list) else None
    req = req_a or req_b
    thread = str((req.get("thread") if req else None) or "main")
    messages = run_services.session_messages(transcript).get(thread) or []
    view_a = engine.side_by_side(messages, data_a, int(req_a["index"])) if req_a else {}
    view_b = engine.side_by_side(messages, data_b, int(req_b["index"])) if req_b else {}
    rows = align_rows(view_a, view_b)
    show_all = request.GET.get("all") == "1"
    hidden = 0
    if not show_all:
        kept = [row for row in rows if row["sent"]]
        hidden = len(rows) - len(kept)
        rows = kept
    url = _compare_url(comparison, transcript)
    suffix = "&all=1" if show_all else ""
    context.update(
        {
            "index": index,
            "number": index + 1,
            "count": count,
            "url_prefix": reverse("tuning:comparison", args=[comparison.pk]) + "requests/",
            "url_query": f"?session={transcript.pk}",
            "req_a": req_a,
            "req_b": req_b,
            "events_a": [engine.describe_event(e) for e in (req_a["events"] if req_a else [])],
            "events_b": [engine.describe_event(e) for e in (req_b["events"] if req_b else [])],
            "rows": rows,
            "hidden": hidden,
            "show_all": show_all,
            "thread": thread,
            "prev_url": url(index - 1) + suffix if index > 0 else None,
            "next_url": url(index + 1) + suffix if index + 1 < count else None,
            "self_url": url(index),
            "divergence": divergence,
            "divergence_number": divergence + 1 if divergence is not None else None,
            "divergence_url": url(divergence) if divergence is not None else None,
            "differs": sum(1 for row in rows if row["differs"]),
        }
    )
    if request.htmx:
        return render(request, "tuning/compare_request.html#explorer", context)
    return render(request, "tuning/compare_request.html", context)


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
        try:
            sweep = services.create_sweep(
                owner=request.user,
                workspace=_workspace_from_form(request),
                transcripts=transcripts,
                base=_spec_from_form(request, "base"),
                field_name=request.POST.get("field", ""),
                values=request.POST.get("sweep_values", ""),
            )
        except engine.FieldError as exc:
            context["error"] = _error(exc)
            return render(request, "tuning/sweep_new.html", context, status=422)
        return redirect(sweep)
    return render(request, "tuning/sweep_new.html", context)


def _axis(request: AuthedRequest, name: str, default: str) -> str:
    value = request.GET.get(name, default)
    return value if value in services.MEASURES else default


@login_required
@vary_on_headers("HX-Request")
def sweep_detail(request: AuthedRequest, pk: int) -> HttpResponse:
    """The sweep page; to htmx, ``sweep-progress`` (polling) or ``sweep-chart`` (axes changed)."""
    sweep = access.item_for(
        request.user, Sweep.objects.select_related("workspace", "base_version__saved_config"), pk
    )
    polling = bool(request.htmx) and request.htmx.target != "sweep-chart"
    report = services.sweep_report(sweep, details=not polling, reader=request.user)
    active = report["status"] in (Run.Status.QUEUED, Run.Status.RUNNING)
    x = _axis(request, "x", "mean_history_share")
    y = _axis(request, "y", "cost_usd")
    fig = charts.build_sweep_figure(
        report["points"], field=sweep.field, x=x, y=y, labels=services.MEASURES
    )
    context: dict[str, Any] = {
        "sweep": sweep,
        "report": report,
        "active": active,
        "x": x,
        "y": y,
        "measures": services.MEASURES,
        "figure": figure_json(fig),
        "any_done": any(p["summary"] for p in report["points"]),
        "sessions": list(
            sweep.sessions.filter(pk__in=access.sessions(request.user)).order_by("pk")
        ),
        "hidden_sessions": services.hidden_sessions(sweep, request.user),
        "can_share": _role_allows(sweep, access.WRITE),
        # whoever may start one may stop it
        "can_cancel": _role_allows(sweep, access.WRITE),
        "can_delete": _role_allows(sweep, access.MANAGE),
    }
    if request.htmx and request.htmx.target == "sweep-chart":
        return render(request, "tuning/sweep.html#sweep-chart", context)
    if request.htmx:
        response = render(request, "tuning/sweep.html#sweep-progress", context)
        if not active:
            response["HX-Refresh"] = "true"
        return response
    return render(request, "tuning/sweep.html", context)
