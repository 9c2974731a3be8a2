"""Pages for runs: the session report, run progress, what-if runs and the request explorer
(built by ``runs.explorer``; the report's parts by ``runs.report``)."""

from __future__ import annotations

from typing import Any, TypeVar

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh

from contextlab import engine
from contextlab.engine import as_result
from contextlab.http import AuthedRequest, back_to
from contextlab.runs import differences, labels, live, request_csv, services, waste
from contextlab.runs import explorer as explorer_builder
from contextlab.runs import report as report_parts
from contextlab.runs import tools as tool_panel
from contextlab.runs.forms import RunForm
from contextlab.runs.models import Run
from contextlab.search import services as search
from contextlab.summaries import services as summaries
from contextlab.transcripts.models import Transcript
from contextlab.workspaces import access

T = TypeVar("T")

#: problems listed on the report (the count says how many there are in all)
MAX_PROBLEMS_SHOWN = 500


def _selected_run(request: HttpRequest, transcript: Transcript) -> Run | None:
    """The run named by ``?run=`` (one of this session's, which the gate already let through),
    else the session's default run."""
    run_id = request.GET.get("run", "")
    if run_id:
        if not run_id.isdigit():
            raise Http404("no such run")
        return get_object_or_404(Run, pk=int(run_id), transcript=transcript)
    return services.default_run(transcript)


def _run_form_context(transcript: Transcript, **extra: Any) -> dict[str, Any]:
    presets = [
        {"name": name, "description": engine.PRESET_DESCRIPTIONS.get(name, "")}
        for name in engine.PRESET_NAMES
    ]
    return {
        "transcript": transcript,
        "presets": presets,
        "field_specs": engine.field_specs(),
        **extra,
    }


@access.session_view(access.READ)
def report(request: AuthedRequest, transcript: Transcript) -> HttpResponse:
    runs = list(transcript.runs.all())
    for each in runs:
        if each.status == Run.Status.RUNNING:
            services.refresh_run(each)
    run = _selected_run(request, transcript)
    data = services.result_data(run) if run else None
    loose, groups = report_parts.group_runs(runs, request.user)
    context: dict[str, Any] = {
        "transcript": transcript,
        "runs": runs,
        "loose_runs": loose,
        "run_groups": groups,
        "run": run,
        "data": data,
        "problems": transcript.problems[:MAX_PROBLEMS_SHOWN],
        # links are made within a workspace; the check keeps any other from showing
        "continues": (
            transcript.continues
            if transcript.continues is not None
            and transcript.continues.workspace_id == transcript.workspace_id
            else None
        ),
        "continued_in": transcript.continued_by.filter(
            workspace_id=transcript.workspace_id
        ).order_by("pk"),
        **_run_form_context(transcript, form_values={"preset": "auto", "config": ""}),
    }
    if data is not None and run is not None:
        url = report_parts.request_url_factory(transcript, run)
        result = as_result(data)
        baseline = report_parts.recorded_baseline(transcript, run)
        baseline_data = services.result_data(baseline) if baseline is not None else None
        if baseline is not None and baseline_data is not None:
            context["baseline"] = baseline
            context["changed"] = labels.describe_overrides(run.overrides) or (
                f"the {run.preset or 'auto'} preset"
            )
            baseline_summary = as_result(baseline_data)["summary"]
            context["differences"] = differences.whatif_differences(
                result["summary"], baseline_summary
            )
            # one cost answer: what was paid plus what the change changes, with its band
            context["whatif_cost"] = differences.whatif_cost(result["summary"], baseline_summary)
        # points carry their request's position; the charts' data-request-url makes it a link
        figures = report_parts.report_figures(run, result, baseline, baseline_data)
        context["figure_scripts"] = figures["scripts"]
        context["request_url_pattern"] = report_parts.request_url_pattern(transcript, run)
        context["fidelity"] = figures["fidelity"]
        context["summary"] = result["summary"]
        context["may_edit"] = run.provisional and _may_edit(transcript)
        context["session_info"] = result["session"]
        context["first_request_url"] = url(0) if result["requests"] else None
        context["subagents"] = report_parts.subagent_rows(data)
        context["waste"] = waste.page_waste(transcript, run, data, url)
        context.update(
            tool_panel.tools_card(services.tool_breakdown(run, data), url, len(result["requests"]))
        )
        # the session's messages (a large read) only when there are summaries to set beside them
        context["summaries"] = (
            summaries.run_summaries(data, services.session_messages(transcript))
            if data.get("summaries")
            else []
        )
        context["summarizer"] = summaries.RunSummarizer.objects.filter(run=run).first()
    return render(request, "runs/report.html", context)


@access.run_view(access.READ)
@vary_on_headers("HX-Request")
def run_detail(request: AuthedRequest, run: Run) -> HttpResponse:
    """A run's status page; to htmx, the ``run-progress`` partial (polls until finished)."""
    services.refresh_run(run)
    context = {
        "run": run,
        "transcript": run.transcript,
        "compact": request.GET.get("compact") == "1",
        "waiting": summaries.waiting_for(run),
        "can_cancel": run.is_active and _may_edit(run),
    }
    if request.htmx and not request.htmx.history_restore_request:
        if not run.is_active and request.GET.get("reload") == "1":
            return HttpResponseClientRefresh()  # the report shows the finished results
        return render(request, "runs/run_detail.html#run-progress", context)
    return render(request, "runs/run_detail.html", context)


@access.run_view(access.READ)
def run_requests_csv(request: AuthedRequest, run: Run) -> HttpResponse:
    """The run's request rows as a CSV download (``request_csv``); 409 until it is done."""
    data = services.result_data(run)
    if data is None:
        return HttpResponse(f"run {run.pk} is {run.status}: no rows yet", status=409)
    response = HttpResponse(
        request_csv.request_csv(as_result(data)["requests"]),
        content_type="text/csv; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-requests.csv"'
    return response


@access.run_view(access.READ)
def run_tools_csv(request: AuthedRequest, run: Run) -> HttpResponse:
    """The run's tools table (``engine.tool_breakdown``) as a CSV download; 409 until done."""
    data = services.result_data(run)
    if data is None:
        return HttpResponse(f"run {run.pk} is {run.status}: no tools yet", status=409)
    response = HttpResponse(
        tool_panel.tools_csv(services.tool_breakdown(run, data)),
        content_type="text/csv; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-tools.csv"'
    return response


def _may_edit(item: Run | Transcript) -> bool:
    """Whether the reader edits ``item`` (a run or session the gate fetched)."""
    role = access.member_role(item)
    return role is not None and role.allows(access.WRITE)


@access.run_view(access.WRITE)
@require_POST
def cancel_run(request: AuthedRequest, run: Run) -> HttpResponse:
    """Stop a queued or running run (editors): it ends failed, "Cancelled by its owner"."""
    if services.cancel_run(run):
        messages.success(request, f"Run {run.pk} was cancelled.")
    else:
        messages.info(request, f"Run {run.pk} had already ended; nothing was cancelled.")
    return back_to(request, run.get_absolute_url())


@access.run_view(access.WRITE)
@require_POST
def replay_in_full(request: AuthedRequest, run: Run) -> HttpResponse:
    """Replay a provisional run (a live session's) whole now (editors)."""
    if services.replay_in_full(run):
        messages.success(request, f"Run {run.pk} is being replayed in full.")
    else:
        messages.info(request, f"Run {run.pk} has no provisional result to replace.")
    return back_to(request, run.transcript.get_absolute_url())


@access.session_view(access.WRITE)
@require_POST
def create_run(request: AuthedRequest, transcript: Transcript) -> HttpResponse:
    """Queue a what-if run from the report's form; errors come back in the form, by field."""
    form = RunForm(request.POST)
    error = None if form.is_valid() else form.first_error()
    if error is None:
        values = form.cleaned_data
        try:
            run = services.start_run(
                owner=request.user,
                transcript=transcript,
                mode=values["mode"],
                preset=values["preset"],
                overrides=engine.parse_overrides(values["config"]),
                summarizer=values["summarizer"],
                summary_model=values["summary_model"],
                spend_cap_usd=values["spend_cap_usd"],
            )
        except engine.FieldError as exc:
            error = {"field": exc.field, "message": exc.message}
        else:
            target = reverse("runs:report", args=[transcript.pk]) + f"?run={run.pk}"
            if request.htmx:
                return HttpResponseClientRedirect(target, status=204)
            return redirect(target)
    context = _run_form_context(transcript, form_values=form.echoed(), form_error=error)
    if request.htmx:
        return render(request, "runs/report.html#run-form", context, status=422)
    return render(request, "runs/run_form_page.html", context, status=422)


@access.session_view(access.READ)
@vary_on_headers("HX-Request")
def explorer(request: AuthedRequest, transcript: Transcript, index: int) -> HttpResponse:
    """The request explorer: full history beside the model's view for one request."""
    run = _selected_run(request, transcript)
    data = services.result_data(run) if run else None
    polling = bool(request.htmx) and request.GET.get("live") == "1"
    if run is None or data is None:
        if polling:  # a live session's poll while its run replays the grown file: no change
            return HttpResponse(status=204)
        empty: dict[str, Any] = {
            "transcript": transcript,
            "run": run,
            "live_url": live.poll_url(request, last=True),
        }
        return render(request, "runs/explorer_empty.html", empty)
    seen = live.result_version(run)
    if polling and request.GET.get("seen") == seen:
        return HttpResponse(status=204)  # the same result as the page shows
    count = len(as_result(data)["requests"])
    if polling and request.GET.get("follow") == "1":
        index = max(0, count - 1)  # the poll of a reader on the last request: the new last
    if not 0 <= index < count:
        raise Http404(f"request {index + 1} does not exist (this run has {count})")
    context = explorer_builder.build(
        data,
        services.session_messages(transcript),
        index,
        flags=explorer_builder.Flags.of(request.GET),
        request_url=report_parts.request_url_factory(transcript, run),
        # a finished run's result never changes: what its pages share is kept per process
        cache_key=("run", run.pk, run.finished_at.isoformat() if run.finished_at else ""),
    )
    context.update(
        transcript=transcript,
        run=run,
        url_prefix=reverse("runs:report", args=[transcript.pk]) + "requests/",
        live_url=live.poll_url(
            request,
            path=reverse("runs:request", args=[transcript.pk, index]),
            last=index == count - 1,
            seen=seen,
        ),
        # the search box above the explorer
        kinds=search.KIND_LABELS,
        tools=search.tools_of(transcript.pk),
        **_tool_filter(run, data, index, context["tool_filter"], context["self_url"]),
        compare_url=(
            reverse("runs:compare_requests", args=[transcript.pk])
            + f"?run={run.pk}&a={index}&b={index + 1}"
            if index > 0
            else None
        ),
    )
    # htmx restoring history (back button, cache miss) wants the whole page
    partial = request.htmx and not request.htmx.history_restore_request
    if partial and request.GET.get("page"):
        return render(request, "runs/explorer.html#explorer-rows", context)
    if partial:
        return render(request, "runs/explorer.html#explorer", context)
    return render(request, "runs/explorer.html", context)


#: what a badge means for a block between two requests, in the pages' words
DIFF_STATES = {
    "intact": "sent whole",
    "persisted": "persisted preview",
    "cleared": "cleared (microcompact)",
    "snipped": "snipped",
    "collapsed": "collapsed into a summary",
    "summarized": "replaced by a summary",
    "boundary": "compaction boundary",
    "restored": "restored file",
    "anchored": "unrecorded input",
    "": "not in the view",
}


def _request_number(value: str, count: int) -> int | None:
    """A 1-based request number from the form, None when absent or out of range."""
    value = value.strip()
    if not value.isdigit() or not 1 <= int(value) <= count:
        return None
    return int(value)


@access.session_view(access.READ)
def compare_requests(request: AuthedRequest, transcript: Transcript) -> HttpResponse:
    """What the model saw at request A set beside request B (``?a=3&b=7``, numbers from 1):
    blocks added, removed and changed, with their tokens."""
    run = _selected_run(request, transcript)
    data = services.result_data(run) if run else None
    context: dict[str, Any] = {"transcript": transcript, "run": run}
    if run is None or data is None:
        return render(request, "runs/explorer_empty.html", context)
    count = len(as_result(data)["requests"])
    raw_a, raw_b = request.GET.get("a", ""), request.GET.get("b", "")
    a, b = _request_number(raw_a, count), _request_number(raw_b, count)
    context.update(count=count, a=a or raw_a[:12], b=b or raw_b[:12])
    if (raw_a or raw_b) and (a is None or b is None):
        context["error"] = f"Choose two request numbers from 1 to {count}."
    url = report_parts.request_url_factory(transcript, run)
    if a is not None and b is not None:
        messages_by_thread = services.session_messages(transcript)
        cache = ("run", run.pk, run.finished_at.isoformat() if run.finished_at else "", "messages")
        views = [
            explorer_builder.request_view(
                data, messages_by_thread, n - 1, show_replaced=False, thread_cache=cache
            )
            for n in (a, b)
        ]
        diff = engine.view_diff(
            views[0]["rows"], views[1]["rows"], start_b=views[1]["view"]["start"]
        )
        parts = {
            "added": (diff["added"], b),
            "removed": (diff["removed"], a),
            "changed": (diff["changed"], b),
        }
        # each block links to the request page it shows at
        listed = {
            name: {
                "count": part["count"],
                "items": [
                    {
                        **item,
                        "url": f"{url(side - 1)}#{item['anchor']}",
                        "before_words": DIFF_STATES.get(item["before"], item["before"]),
                        "after_words": DIFF_STATES.get(item["after"], item["after"]),
                    }
                    for item in part["items"]
                ],
            }
            for name, (part, side) in parts.items()
        }
        context.update(
            diff=diff,
            listed=listed,
            changed_tokens_abs=abs(diff["changed"]["tokens"]),
            req_a=views[0]["req"],
            req_b=views[1]["req"],
            url_a=url(a - 1),
            url_b=url(b - 1),
            same_thread=views[0]["thread"] == views[1]["thread"],
        )
    return render(request, "runs/compare_requests.html", context)


#: request links the tool filter lists at most
MAX_TOOL_REQUEST_LINKS = 120


def _tool_filter(
    run: Run, data: dict[str, Any], index: int, tool: str | None, self_url: str
) -> dict[str, Any]:
    """The explorer's tool filter: the session's tools (for the picker) and, with one chosen,
    the requests whose response calls it, the previous and next of them."""
    breakdown = services.tool_breakdown(run, data)
    names = sorted((t["tool"] for t in breakdown["tools"]), key=str.lower)
    chosen = next((t for t in breakdown["tools"] if t["tool"] == tool), None)
    calling = chosen["requests"] if chosen else []
    base = self_url.split("/requests/")[0] + "/requests/"
    flags = self_url.split("?", 1)[1] if "?" in self_url else ""

    def link(i: int) -> dict[str, Any]:
        return {"number": i + 1, "url": f"{base}{i}/?{flags}", "current": i == index}

    return {
        "tool_names": names,
        "tool_requests": [link(i) for i in calling[:MAX_TOOL_REQUEST_LINKS]],
        "tool_request_count": len(calling),
        "tool_prev": next((link(i) for i in reversed(calling) if i < index), None),
        "tool_next": next((link(i) for i in calling if i > index), None),
    }


@login_required
def glossary(request: HttpRequest) -> HttpResponse:
    """What the figures on the report and explorer mean (their tooltips link here)."""
    return render(request, "runs/glossary.html")


@access.session_view(access.READ)
def block_text(
    request: AuthedRequest, transcript: Transcript, thread: str, message: int, block: int
) -> HttpResponse:
    """The full original text of one block (folded text, persisted previews, summaries)."""
    return explorer_builder.block_text_response(
        request, services.session_messages(transcript).get(thread), message, block
    )
