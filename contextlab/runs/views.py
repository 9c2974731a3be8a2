"""Pages for runs: the session report, run progress, what-if runs and the request explorer."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import get_template
from django.urls import reverse
from django.utils.html import json_script
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers

from contextlab import engine
from contextlab.engine import HistoryIndex, NavigatorEvent, RequestRow, TiktokenCounter, as_result
from contextlab.http import AuthedRequest
from contextlab.runs import charts, differences, labels, services
from contextlab.runs.models import Run
from contextlab.summaries import services as summaries
from contextlab.transcripts.models import Transcript
from contextlab.workspaces import access

T = TypeVar("T")

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


def request_url_pattern(transcript: Transcript, run: Run) -> str:
    """``request_url_factory``'s URLs with ``{i}`` for the request (the charts' click target)."""
    return reverse("runs:report", args=[transcript.pk]) + "requests/{i}/?run=" + str(run.pk)


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


def _report_figures(
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


def _recorded_baseline(transcript: Transcript, run: Run) -> Run | None:
    """The finished recorded replay a what-if run is read against (None for a recorded run)."""
    if run.mode != Run.Mode.WHATIF:
        return None
    return transcript.runs.filter(status=Run.Status.DONE, mode=Run.Mode.RECORDED).first()


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
        url = request_url_factory(transcript, run)
        result = as_result(data)
        baseline = _recorded_baseline(transcript, run)
        baseline_data = services.result_data(baseline) if baseline is not None else None
        if baseline is not None and baseline_data is not None:
            context["baseline"] = baseline
            context["changed"] = labels.describe_overrides(run.overrides) or (
                f"the {run.preset or 'auto'} preset"
            )
            context["differences"] = differences.whatif_differences(
                data.get("summary") or {}, baseline_data.get("summary") or {}
            )
        # points carry their request's position; the charts' data-request-url makes it a link
        figures = _report_figures(run, result, baseline, baseline_data)
        context["figure_scripts"] = figures["scripts"]
        context["request_url_pattern"] = request_url_pattern(transcript, run)
        context["fidelity"] = figures["fidelity"]
        context["summary"] = data.get("summary") or {}
        context["session_info"] = data.get("session") or {}
        context["first_request_url"] = url(0) if data.get("requests") else None
        context["subagents"] = subagent_rows(data)
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
        response = render(request, "runs/run_detail.html#run-progress", context)
        if not run.is_active and request.GET.get("reload") == "1":
            response["HX-Refresh"] = "true"  # the report shows the finished results
        return response
    return render(request, "runs/run_detail.html", context)


def _may_edit(run: Run) -> bool:
    role = access.member_role(run)
    return role is not None and role.allows(access.WRITE)


def back_to(request: AuthedRequest, url: str) -> HttpResponse:
    """After a POST from a page: htmx reloads the page (its messages show), a form redirects."""
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Refresh"] = "true"
        return response
    return redirect(url)


@access.run_view(access.WRITE)
@require_POST
def cancel_run(request: AuthedRequest, run: Run) -> HttpResponse:
    """Stop a queued or running run (editors): it ends failed, "Cancelled by its owner"."""
    if services.cancel_run(run):
        messages.success(request, f"Run {run.pk} was cancelled.")
    else:
        messages.info(request, f"Run {run.pk} had already ended; nothing was cancelled.")
    return back_to(request, run.get_absolute_url())


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
        item.setdefault("anchor", _anchor(row, first + offset))
        item["cache"] = gutter[first + offset] if first + offset < len(gutter) else "none"
        item["synthetic"] = synthetic
        # history the model did not see starts folded, so what it did see stands out
        item["repl_open"] = bool(row.get("model"))
        for side in ("repl", "model"):
            cell = row.get(side)
            if isinstance(cell, dict):
                # every key the cell template reads: a missing key costs the template a dir()
                cell = {"role": None, "tool_name": None, "is_error": False, **cell}
                # synthetic text (summaries) has no stored block to load the rest from
                # only text identical to a stored block can load its rest on demand
                loadable = not synthetic and (side == "repl" or row.get("badge") == "intact")
                cell["fold"] = (
                    _fold(cell.get("text"))
                    if loadable
                    else {"head": cell.get("text") or "", "rest": 0}
                )
                # display tokens of this side's block (engine.compose), shown in its head
                cell["tokens"] = (row.get("tokens") or {}).get(side)
                item[side] = cell
        item["has_original"] = bool(item.pop("original", None))  # loaded on demand, never inlined
        prepared.append(item)
    return prepared


def explorer_page(
    request: HttpRequest,
    rows: list[dict[str, Any]],
    view: dict[str, Any],
    *,
    show_replaced: bool,
    changed_only: bool = False,
) -> dict[str, Any]:
    """The rows one explorer page shows (the owner's and a share link's): history a summary
    replaced hidden unless asked for, unchanged rows hidden for "changed rows only", then the
    ``?page=`` slice, prepared with its cache gutter. Also ``replaced`` (positions of the
    replaced rows), ``row_count`` (rows left after hiding), ``page`` and ``next_page``."""
    # the engine marks each sent block read / write / uncached from its cache model
    gutter = [str(row.get("cache") or "none") for row in rows]
    replaced = [i for i, row in enumerate(rows) if _is_replaced(row, view)]
    hidden = set(replaced) if not show_replaced else set()
    if changed_only:
        # only rows the pipeline changed: what the model saw differs from the history
        hidden |= {i for i, row in enumerate(rows) if row.get("badge") == "intact"}
    if hidden:
        gutter = [g for i, g in enumerate(gutter) if i not in hidden]
        rows = [row for i, row in enumerate(rows) if i not in hidden]
    try:
        page = max(1, int(request.GET.get("page", "1")))
    except ValueError:
        page = 1
    per_page = settings.EXPLORER_ROWS_PER_PAGE
    start = (page - 1) * per_page
    return {
        "rows": _prepare_rows(rows[start : start + per_page], gutter, start),
        "replaced": replaced,
        "row_count": len(rows),
        "page": page,
        "next_page": page + 1 if start + per_page < len(rows) else None,
    }


def _is_replaced(row: dict[str, Any], view: dict[str, Any]) -> bool:
    """A history row the model did not see because a summary replaced it."""
    message = row.get("message")
    return (
        row.get("badge") == "summarized"
        and not row.get("model")
        and message is not None
        and message < int(view.get("start") or 0)
    )


def _calibration(data: dict[str, Any], req: RequestRow) -> tuple[int, float]:
    """(fitted prefix tokens, ratio) of the request's thread and model: display tokens are
    ``prefix + ratio * tiktoken count``, the prefix standing for the system prompt and tools."""
    session = data.get("session") or {}
    thread = str(req.get("thread") or "main")
    info = next((t for t in session.get("threads") or [] if t.get("id") == thread), None) or {}
    fit = (info.get("model_calibrations") or {}).get(req.get("model") or "") or info.get(
        "calibration"
    )
    fit = fit or session.get("calibration") or {}
    return int(fit.get("prefix_tokens") or 0), float(fit.get("ratio") or 1.0)


#: Data derived from a finished run's stored result (and its session's messages), kept per
#: process: neither ever changes, and rebuilding it (or unpickling it from the cache backend)
#: on every explorer step was most of the step's time. Keyed by kind, run and its finish.
_DERIVED: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_DERIVED_LOCK = threading.Lock()
_DERIVED_SIZE = 32


def _derived(run: Run, key: tuple[Any, ...], build: Callable[[], T], *, keep: bool = True) -> T:
    """``build()``, remembered per process under ``key`` once ``run`` finished (``keep``:
    False for a value not worth keeping, e.g. built from messages not stored yet)."""
    full = (run.pk, run.finished_at.isoformat() if run.finished_at else "", *key)
    with _DERIVED_LOCK:
        if full in _DERIVED:
            _DERIVED.move_to_end(full)
            found: T = _DERIVED[full]
            return found
    value = build()
    if run.finished_at and keep:
        with _DERIVED_LOCK:
            _DERIVED[full] = value
            while len(_DERIVED) > _DERIVED_SIZE:
                _DERIVED.popitem(last=False)
    return value


def _run_overview(run: Run, requests: list[RequestRow]) -> dict[str, Any]:
    """What every request page of a run shares (its events, the mini chart's lines)."""

    def build() -> dict[str, Any]:
        events = engine.request_events(requests)
        return {
            "events": events,
            "event_kinds": engine.event_counts(events),
            "mini": charts.mini_chart(requests, 0),
        }

    return _derived(run, ("overview",), build)


def _thread_indexes(
    run: Run, data: dict[str, Any], messages: list[dict[str, Any]], thread: str
) -> tuple[engine.TransformIndex, HistoryIndex, TiktokenCounter]:
    """What ``side_by_side`` and ``compose`` look up for any request of ``thread``: its
    transforms indexed, its history's running totals, and a counter that remembers the texts
    it counted (a summary is counted again on every request it heads otherwise)."""

    def build() -> tuple[engine.TransformIndex, HistoryIndex, TiktokenCounter]:
        return (
            engine.TransformIndex((data.get("views") or {}).get("transforms") or [], thread),
            HistoryIndex(messages),
            MemoCounter(),
        )

    # an empty list is the messages not stored yet
    return _derived(run, ("thread", run.transcript.sha256, thread), build, keep=bool(messages))


class MemoCounter(TiktokenCounter):
    """A tiktoken counter that remembers its last few thousand texts' counts."""

    LIMIT = 4096

    def __init__(self) -> None:
        super().__init__()
        self._memo: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        with self._lock:
            if text in self._memo:
                self._memo.move_to_end(text)
                return self._memo[text]
        value = int(super().count(text))
        with self._lock:
            self._memo[text] = value
            while len(self._memo) > self.LIMIT:
                self._memo.popitem(last=False)
        return value


def _event_navigator(
    run: Run,
    events: list[NavigatorEvent],
    index: int,
    count: int,
    flags: str,
    url: charts.RequestUrl,
) -> dict[str, SafeString]:
    """The event strip's ticks and the navigator's list, as HTML: each event is rendered once
    per run (and flags) and reused by every request page; only the current request's events
    are rendered again, marked."""
    tick = get_template("runs/explorer.html#event-tick")
    item = get_template("runs/explorer.html#event-item")

    def context(e: NavigatorEvent, current: bool) -> dict[str, Any]:
        return {
            "e": {
                **e,
                "number": e["request"] + 1,
                "url": url(e["request"]),
                "left": round(e["request"] / max(1, count - 1) * 100, 2),
                "current": current,
            }
        }

    def build() -> tuple[list[str], list[str]]:
        contexts = [context(e, False) for e in events]
        return [tick.render(c) for c in contexts], [item.render(c) for c in contexts]

    cached = _derived(run, ("events", flags), build)
    ticks, items = list(cached[0]), list(cached[1])
    for position, e in enumerate(events):
        if e["request"] == index:
            ticks[position] = tick.render(context(e, True))
            items[position] = item.render(context(e, True))
    # rendered by the template engine (escaped there), joined here
    return {"event_ticks": mark_safe("".join(ticks)), "event_items": mark_safe("".join(items))}


def _gap_before(requests: list[RequestRow], index: int) -> float | None:
    """Seconds since the previous request of the same thread, None for a thread's first."""
    previous = _previous_in_thread(requests, index)
    if previous is None:
        return None
    return engine.gaps([previous, requests[index]])[1]


def _previous_in_thread(requests: list[RequestRow], index: int) -> RequestRow | None:
    thread = requests[index].get("thread")
    for i in range(index - 1, -1, -1):
        if requests[i].get("thread") == thread:
            return requests[i]
    return None


def _styled_parts(parts: list[Any]) -> list[dict[str, Any]]:
    """The composition's parts with a colour class: one per kind, tool results in shades."""
    out = []
    tools = 0
    for part in parts:
        kind = str(part["kind"])
        if kind.startswith("tool results"):
            css = f"part-tool t{tools % 4}"
            tools += 1
        else:
            css = "part-" + "".join(c if c.isalnum() else "-" for c in kind.split(" (")[0].lower())
        out.append({**part, "css": css})
    return out


def _preview(row: dict[str, Any], chars: int = 90) -> str:
    text = " ".join(str((row.get("model") or row.get("repl") or {}).get("text") or "").split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _anchor(row: dict[str, Any], position: int) -> str:
    if row.get("message") is None:
        return f"b-s-{position}"
    return f"b-{row['message']}-{row['block']}"


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
        raise Http404(f"request {index + 1} does not exist (this run has {len(requests)})")
    req = requests[index]
    thread = str(req.get("thread") or "main")
    messages = services.session_messages(transcript).get(thread) or []
    previous = _previous_in_thread(requests, index)
    compacted = any(
        e.get("step") == "autocompact" and e.get("action") == "compacted"
        for e in req.get("events") or []
    )
    replaced_from = (
        int((previous or {}).get("view", {}).get("start") or 0)
        if compacted and previous is not None
        else None
    )
    # After a compaction most of the history is replaced by the summary: hide those rows
    # unless asked, so the first page shows what the model saw.
    show_replaced = request.GET.get("replaced") == "1"
    changed_only = request.GET.get("changed") == "1"
    transforms, history, counter = _thread_indexes(run, data, messages, thread)
    # hidden replaced rows are only counted (all but the few this compaction removed, which
    # its breakdown lists by kind): a long session's history is mostly replaced
    view = engine.side_by_side(
        messages,
        data,
        int(req.get("index", index)),
        transforms=transforms,
        history=None if show_replaced else history,
        list_replaced_from=replaced_from,
    )
    rows: list[dict[str, Any]] = view.get("rows") or []
    omitted = view.get("omitted") or {"rows": 0, "tokens": 0}
    prefix_tokens, ratio = _calibration(data, req)
    composition = engine.compose(
        rows,
        messages,
        model_tokens=int(req.get("model_tokens") or 0),
        prefix_tokens=prefix_tokens,
        ratio=ratio,
        replaced_from=replaced_from,
        counter=counter,
        omitted_tokens=int(omitted["tokens"]),
    )
    for position, row in enumerate(rows):
        row["tokens"] = composition["row_tokens"][position]
        row["anchor"] = _anchor(row, position)
    heaviest = [
        {
            "anchor": rows[h["position"]]["anchor"],
            "kind": h["kind"],
            "tokens": h["tokens"],
            "preview": _preview(rows[h["position"]]),
        }
        for h in composition["heaviest"]
    ]
    shown = explorer_page(
        request, rows, view, show_replaced=show_replaced, changed_only=changed_only
    )
    replaced, page_rows = shown["replaced"], shown["rows"]
    recorded_total = charts.recorded_prompt(req)
    rel_error = (
        (int(req.get("model_tokens") or 0) - recorded_total) / recorded_total
        if recorded_total
        else None
    )
    base_url = request_url_factory(transcript, run)
    flags = ("&replaced=1" if show_replaced else "") + ("&changed=1" if changed_only else "")

    def url(i: int) -> str:
        return base_url(i) + flags

    count = len(requests)
    overview = _run_overview(run, requests)
    events: list[NavigatorEvent] = overview["events"]
    gap = _gap_before(requests, index)
    context = {
        "transcript": transcript,
        "run": run,
        "index": index,
        "number": index + 1,
        "count": count,
        "req": req,
        "view": view,
        "rows": page_rows,
        "row_count": shown["row_count"],
        "page": shown["page"],
        "next_page": shown["next_page"],
        "prev_url": url(index - 1) if index > 0 else None,
        "next_url": url(index + 1) if index + 1 < count else None,
        "self_url": url(index),
        "url_prefix": reverse("runs:report", args=[transcript.pk]) + "requests/",
        "url_flags": flags,
        "thread": thread,
        "summary_start": view.get("start", 0),
        "replaced_count": len(replaced) + int(omitted["rows"]),
        "recorded_total": recorded_total,
        "rel_error": rel_error,
        "show_replaced": show_replaced,
        "changed_only": changed_only,
        "changed_url": base_url(index)
        + ("&replaced=1" if show_replaced else "")
        + ("" if changed_only else "&changed=1"),
        "event_count": len(events),
        **_event_navigator(run, events, index, count, flags, url),
        "event_kinds": overview["event_kinds"],
        "request_events": [engine.describe_event(e) for e in req.get("events") or []],
        "cache_text": engine.cache_sentence(req, previous, gap),
        "gap": engine.format_duration(gap) if gap is not None else None,
        "mini": charts.mark_request(overview["mini"], index, requests),
        "composition": composition,
        "parts": _styled_parts(composition["parts"]),
        "heaviest": heaviest,
        "compacted": compacted,
    }
    # htmx restoring history (back button, cache miss) wants the whole page
    partial = request.htmx and not request.htmx.history_restore_request
    if partial and request.GET.get("page"):
        return render(request, "runs/explorer.html#explorer-rows", context)
    if partial:
        return render(request, "runs/explorer.html#explorer", context)
    return render(request, "runs/explorer.html", context)


@login_required
def glossary(request: HttpRequest) -> HttpResponse:
    """What the figures on the report and explorer mean (their tooltips link here)."""
    return render(request, "runs/glossary.html")


@access.session_view(access.READ)
def block_text(
    request: AuthedRequest, transcript: Transcript, thread: str, message: int, block: int
) -> HttpResponse:
    """The full original text of one block (folded text, persisted previews, summaries)."""
    return render_block_text(
        request, services.session_messages(transcript).get(thread), message, block
    )


def render_block_text(
    request: HttpRequest, messages: list[dict[str, Any]] | None, message: int, block: int
) -> HttpResponse:
    """One block's whole text from a thread's stored messages (``?original=1``: the full tool
    output behind a persisted preview); 404 for a message or block that does not exist.
    Shared by the explorer and the read-only explorer of a share link."""
    if not messages or not 0 <= message < len(messages):
        raise Http404("no such message")
    msg = messages[message]
    if request.GET.get("original") == "1":
        text = msg.get("original_output")
        if text is None:
            raise Http404("the transcript does not hold the original output")
        return render(request, "runs/block_text.html", {"text": text})
    blocks = msg.get("blocks") or []
    if not 0 <= block < len(blocks):
        raise Http404("no such block")
    return render(request, "runs/block_text.html", {"text": blocks[block].get("text") or ""})
