"""Pages for A/B comparisons: the form, the report, and one request under A and B."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRefresh

from contextlab import engine
from contextlab.engine import as_result
from contextlab.http import AuthedRequest
from contextlab.runs import services as run_services
from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript
from contextlab.tuning import charts, services, verdicts
from contextlab.tuning import reports as tuning_reports
from contextlab.tuning.alignment import align_rows
from contextlab.tuning.forms import ComparisonForm
from contextlab.tuning.models import Comparison
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

# --- comparisons -------------------------------------------------------------------------------


@login_required
def compare_new(request: AuthedRequest) -> HttpResponse:
    choices = _config_choices(request)
    context: dict[str, Any] = {
        "sessions": _sessions_for_form(request),
        "choices": choices,
        # the hint to build a config shows only to someone who has none
        "has_own_configs": any(c["group"] != "Presets" for c in choices),
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
        form = ComparisonForm(request.POST)
        try:
            comparison = services.create_comparison(
                owner=request.user,
                workspace=_workspace_from_form(request, form.workspace_id_value()),
                transcripts=transcripts,
                a=_spec_from_form(request, form.values(), "a"),
                b=_spec_from_form(request, form.values(), "b"),
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
    request: AuthedRequest, pairs: list[tuning_reports.SessionPair]
) -> tuning_reports.SessionPair | None:
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
    report = tuning_reports.comparison_report(
        comparison, details=not request.htmx, reader=request.user
    )
    goal = verdicts.goal_of(request.GET.get("goal"))
    runs: dict[tuple[int, str], Run] = report["runs"]
    active = report["status"] in (Run.Status.QUEUED, Run.Status.RUNNING)
    context: dict[str, Any] = {
        "comparison": comparison,
        "report": report,
        "active": active,
        "run_rows": sorted(runs.items(), key=lambda item: (item[0][0], item[0][1])),
        "measures": tuning_reports.MEASURES,
        "goal": goal,
        "goals": [{"key": k, "label": v[0]} for k, v in verdicts.GOALS.items()],
        "readings": verdicts.read_delta(report["delta"], goal) if report.get("delta") else {},
        "headline": verdicts.headline(report["delta"], goal) if report.get("delta") else "",
        "hidden_sessions": tuning_reports.hidden_sessions(comparison, request.user),
        "can_share": _role_allows(comparison, access.WRITE),
        # whoever may start one may stop it
        "can_cancel": _role_allows(comparison, access.WRITE),
        "can_delete": _role_allows(comparison, access.MANAGE),
    }
    if request.htmx:
        if not active:
            return HttpResponseClientRefresh()  # the page then shows the charts and the delta
        return render(request, "tuning/comparison.html#compare-progress", context)
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
    runs = tuning_reports.comparison_runs(comparison)
    run_a, run_b = runs.get((transcript.pk, "a")), runs.get((transcript.pk, "b"))
    tuning_reports.refresh(r for r in (run_a, run_b) if r is not None)
    context: dict[str, Any] = {"comparison": comparison, "transcript": transcript}
    data_a = run_services.result_data(run_a) if run_a else None
    data_b = run_services.result_data(run_b) if run_b else None
    if data_a is None or data_b is None:
        return render(request, "tuning/compare_request_empty.html", context)
    divergence = engine.compare.first_divergence(data_a, data_b)
    req_a_list = as_result(data_a)["requests"]
    req_b_list = as_result(data_b)["requests"]
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
