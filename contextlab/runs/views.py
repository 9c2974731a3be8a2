"""Pages for runs: the session report, run progress, what-if runs and the request explorer."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers

from contextlab import engine
from contextlab.engine.results import RequestRow, as_result
from contextlab.http import AuthedRequest
from contextlab.runs import charts, services
from contextlab.runs.models import Run
from contextlab.summaries import services as summaries
from contextlab.transcripts.models import Transcript
from contextlab.workspaces import access

#: text longer than this is folded server-side; the rest loads on demand
FOLD_CHARS = 1500
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


def request_url_factory(transcript: Transcript, run: Run) -> charts.RequestUrl:
    prefix = reverse("runs:report", args=[transcript.pk]) + "requests/"
    return lambda i: f"{prefix}{i}/?run={run.pk}"


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


def subagent_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One line per subagent thread of a result: requests, peak context, costs."""
    rows = []
    for sub in data.get("subagents") or []:
        reqs = sub.get("requests") or []
        recorded = [r["recorded_cost_usd"] for r in reqs if r.get("recorded_cost_usd") is not None]
        rows.append(
            {
                "thread": sub.get("thread"),
                # the summarizer call of a recorded compaction, on the main conversation
                "kind": "compaction fork" if sub.get("compaction_fork") else sub.get("kind"),
                "requests": len(reqs),
                "peak": max((r.get("model_tokens") or 0 for r in reqs), default=0),
                "cost": sum(r.get("cost_usd") or 0 for r in reqs),
                "recorded_cost": sum(recorded) if recorded else None,
            }
        )
    return rows


@access.session_view(access.READ)
def report(request: AuthedRequest, transcript: Transcript) -> HttpResponse:
    runs = list(transcript.runs.all())
    for each in runs:
        if each.status == Run.Status.RUNNING:
            services.refresh_run(each)
    run = _selected_run(request, transcript)
    data = services.result_data(run) if run else None
    context: dict[str, Any] = {
        "transcript": transcript,
        "runs": runs,
        "run": run,
        "data": data,
        "problems": transcript.problems[:MAX_PROBLEMS_SHOWN],
        **_run_form_context(transcript, form_values={"preset": "auto", "config": ""}),
    }
    if data is not None and run is not None:
        url = request_url_factory(transcript, run)
        result = as_result(data)
        context["figures"] = {
            "chart-context-data": charts.figure_json(charts.build_context_figure(result, url)),
            "chart-cache-data": charts.figure_json(charts.build_cache_figure(result, url)),
            "chart-cost-data": charts.figure_json(charts.build_cost_figure(result, url)),
            "chart-fidelity-data": charts.figure_json(charts.build_fidelity_figure(result, url)),
        }
        context["fidelity"] = charts.fidelity(result)
        context["summary"] = data.get("summary") or {}
        context["session_info"] = data.get("session") or {}
        context["first_request_url"] = url(0) if data.get("requests") else None
        context["subagents"] = subagent_rows(data)
        context["summaries"] = summaries.run_summaries(data, services.session_messages(transcript))
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
    }
    if request.htmx and not request.htmx.history_restore_request:
        response = render(request, "runs/run_detail.html#run-progress", context)
        if not run.is_active and request.GET.get("reload") == "1":
            response["HX-Refresh"] = "true"  # the report shows the finished results
        return response
    return render(request, "runs/run_detail.html", context)


@access.session_view(access.WRITE)
@require_POST
def create_run(request: AuthedRequest, transcript: Transcript) -> HttpResponse:
    """Queue a what-if run from the report's form; errors come back in the form, by field."""
    preset = request.POST.get("preset", "auto")
    raw_config = request.POST.get("config", "").strip()
    mode = request.POST.get("mode", Run.Mode.WHATIF)
    summarizer = request.POST.get("summarizer", "extractive")
    summary_model = request.POST.get("summary_model", "").strip()
    raw_cap = request.POST.get("spend_cap_usd", "").strip()
    error: dict[str, str] | None = None
    spend_cap: float | None = None
    if raw_cap:
        try:
            spend_cap = float(raw_cap)
        except ValueError:
            error = {"field": "spend_cap_usd", "message": "must be a number of dollars, e.g. 2.50"}
    if error is None:
        try:
            run = services.start_run(
                owner=request.user,
                transcript=transcript,
                mode=mode,
                preset=preset,
                overrides=engine.parse_overrides(raw_config),
                summarizer=summarizer,
                summary_model=summary_model,
                spend_cap_usd=spend_cap,
            )
        except engine.FieldError as exc:
            error = {"field": exc.field, "message": exc.message}
        else:
            target = reverse("runs:report", args=[transcript.pk]) + f"?run={run.pk}"
            if request.htmx:
                response = HttpResponse(status=204)
                response["HX-Redirect"] = target
                return response
            return redirect(target)
    context = _run_form_context(
        transcript,
        form_values={
            "preset": preset,
            "config": raw_config,
            "summarizer": summarizer,
            "summary_model": summary_model,
            "spend_cap_usd": raw_cap,
        },
        form_error=error,
    )
    if request.htmx:
        return render(request, "runs/report.html#run-form", context, status=422)
    return render(request, "runs/run_form_page.html", context, status=422)


def _fold(text: str | None) -> dict[str, Any]:
    text = text or ""
    if len(text) <= FOLD_CHARS:
        return {"head": text, "rest": 0}
    return {"head": text[:FOLD_CHARS], "rest": len(text) - FOLD_CHARS}


def _prepare_rows(
    rows: list[dict[str, Any]], gutter: list[str], first: int
) -> list[dict[str, Any]]:
    prepared = []
    for offset, row in enumerate(rows):
        item = dict(row)
        synthetic = row.get("message") is None
        item["anchor"] = (
            f"b-s-{first + offset}" if synthetic else f"b-{row['message']}-{row['block']}"
        )
        item["cache"] = gutter[first + offset] if first + offset < len(gutter) else "none"
        item["synthetic"] = synthetic
        # history the model did not see starts folded, so what it did see stands out
        item["repl_open"] = bool(row.get("model"))
        for side in ("repl", "model"):
            cell = row.get(side)
            if isinstance(cell, dict):
                cell = dict(cell)
                # synthetic text (summaries) has no stored block to load the rest from
                # only text identical to a stored block can load its rest on demand
                loadable = not synthetic and (side == "repl" or row.get("badge") == "intact")
                cell["fold"] = (
                    _fold(cell.get("text"))
                    if loadable
                    else {"head": cell.get("text") or "", "rest": 0}
                )
                item[side] = cell
        item["has_original"] = bool(item.pop("original", None))  # loaded on demand, never inlined
        prepared.append(item)
    return prepared


def _is_replaced(row: dict[str, Any], view: dict[str, Any]) -> bool:
    """A history row the model did not see because a summary replaced it."""
    message = row.get("message")
    return (
        row.get("badge") == "summarized"
        and not row.get("model")
        and message is not None
        and message < int(view.get("start") or 0)
    )


@access.session_view(access.READ)
@vary_on_headers("HX-Request")
def explorer(request: AuthedRequest, transcript: Transcript, index: int) -> HttpResponse:
    """The request explorer: full history beside the model's view for one request."""
    run = _selected_run(request, transcript)
    data = services.result_data(run) if run else None
    if run is None or data is None:
        return render(request, "runs/explorer_empty.html", {"transcript": transcript, "run": run})
    requests: list[RequestRow] = as_result(data).get("requests") or []
    if not 0 <= index < len(requests):
        raise Http404(f"request {index} does not exist (this run has {len(requests)})")
    req = requests[index]
    thread = str(req.get("thread") or "main")
    messages = services.session_messages(transcript).get(thread) or []
    view = engine.side_by_side(messages, data, int(req.get("index", index)))
    rows: list[dict[str, Any]] = view.get("rows") or []
    # the engine marks each sent block read / write / uncached from its cache model
    gutter = [str(row.get("cache") or "none") for row in rows]
    # After a compaction most of the history is replaced by the summary: hide those rows
    # unless asked, so the first page shows what the model saw.
    show_replaced = request.GET.get("replaced") == "1"
    replaced = [i for i, row in enumerate(rows) if _is_replaced(row, view)]
    if replaced and not show_replaced:
        hidden = set(replaced)
        gutter = [g for i, g in enumerate(gutter) if i not in hidden]
        rows = [row for i, row in enumerate(rows) if i not in hidden]
    try:
        page = max(1, int(request.GET.get("page", "1")))
    except ValueError:
        page = 1
    per_page = settings.EXPLORER_ROWS_PER_PAGE
    start = (page - 1) * per_page
    page_rows = _prepare_rows(rows[start : start + per_page], gutter, start)
    recorded_total = charts.recorded_prompt(req)
    rel_error = (
        (int(req.get("model_tokens") or 0) - recorded_total) / recorded_total
        if recorded_total
        else None
    )
    url = request_url_factory(transcript, run)
    if show_replaced:
        base_url = url

        def url(i: int) -> str:
            return base_url(i) + "&replaced=1"

    context = {
        "transcript": transcript,
        "run": run,
        "index": index,
        "count": len(requests),
        "req": req,
        "view": view,
        "rows": page_rows,
        "row_count": len(rows),
        "page": page,
        "next_page": page + 1 if start + per_page < len(rows) else None,
        "prev_url": url(index - 1) if index > 0 else None,
        "next_url": url(index + 1) if index + 1 < len(requests) else None,
        "self_url": url(index),
        "url_prefix": reverse("runs:report", args=[transcript.pk]) + "requests/",
        "thread": thread,
        "summary_start": view.get("start", 0),
        "replaced_count": len(replaced),
        "recorded_total": recorded_total,
        "rel_error": rel_error,
        "show_replaced": show_replaced,
    }
    # htmx restoring history (back button, cache miss) wants the whole page
    partial = request.htmx and not request.htmx.history_restore_request
    if partial and request.GET.get("page"):
        return render(request, "runs/explorer.html#explorer-rows", context)
    if partial:
        return render(request, "runs/explorer.html#explorer", context)
    return render(request, "runs/explorer.html", context)


@access.session_view(access.READ)
def block_text(
    request: AuthedRequest, transcript: Transcript, thread: str, message: int, block: int
) -> HttpResponse:
    """The full original text of one block (folded text, persisted previews, summaries)."""
    messages = services.session_messages(transcript).get(thread)
    if not messages or not 0 <= message < len(messages):
        raise Http404("no such message")
    msg = messages[message]
    if request.GET.get("original") == "1":
        # the full tool output behind a persisted preview
        text = msg.get("original_output")
        if text is None:
            raise Http404("the transcript does not hold the original output")
        return render(request, "runs/block_text.html", {"text": text})
    blocks = msg.get("blocks") or []
    if not 0 <= block < len(blocks):
        raise Http404("no such block")
    return render(request, "runs/block_text.html", {"text": blocks[block].get("text") or ""})
