"""Share pages: the Share dialog, the shared report and explorer (logged out, read-only), the
Shared links page."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from contextlab import engine
from contextlab.engine import RequestRow, as_result
from contextlab.errors import error_response
from contextlab.http import AuthedRequest, HtmxRequest
from contextlab.runs import charts
from contextlab.runs.models import Run
from contextlab.runs.views import explorer_page, render_block_text, subagent_rows
from contextlab.sharing import export, pages, services
from contextlab.sharing.models import ShareLink
from contextlab.summaries import services as summaries
from contextlab.transcripts.models import Transcript
from contextlab.workspaces import access

#: wrong tokens one client may try per minute before share pages answer 429
WRONG_TOKENS_PER_MINUTE = 30


def _selected_run(request: HttpRequest, transcript: Transcript) -> Run | None:
    run_id = request.GET.get("run") or request.POST.get("run") or ""
    if run_id:
        if not run_id.isdigit():
            raise Http404("no such run")
        return get_object_or_404(Run, pk=int(run_id), transcript=transcript)
    return None


@access.session_view(access.WRITE)
def share_dialog(request: AuthedRequest, transcript: Transcript) -> HttpResponse:
    """GET: who will see it, expiry, what redaction found (keep or drop by category).
    POST: make the link and show it, once."""
    run = _selected_run(request, transcript)
    context: dict[str, Any] = {
        "transcript": transcript,
        "run": run,
        **pages.dialog_context(
            target_kind="report",
            target_name=transcript.name,
            back_url=transcript.get_absolute_url(),
            crumbs=[(reverse("transcripts:list"), "Sessions")],
            workspace_name=transcript.workspace.name,
            not_ready="This session has no finished run yet: share it once its replay is done.",
        ),
    }
    return pages.dialog_answer(
        request,
        context,
        create=lambda form: services.create_share(
            user=request.user, transcript=transcript, run=run, **form
        ),
        findings=lambda: _findings_or_none(transcript, run),
    )


def _findings_or_none(transcript: Transcript, run: Run | None) -> list[dict[str, Any]] | None:
    try:
        return services.preview_findings(transcript, run)
    except services.ShareError:
        return None


def _client_key(request: HttpRequest) -> str:
    return "share-miss:" + str(request.META.get("REMOTE_ADDR", "?"))


def _open(request: HttpRequest, token: str) -> ShareLink | HttpResponse:
    """The live link of a token, or the answer: 404 unknown, 410 revoked/expired, 429 after a
    burst of wrong tokens, 404 for a workspace-only link opened by a non-member."""
    key = _client_key(request)
    if (cache.get(key) or 0) >= WRONG_TOKENS_PER_MINUTE:
        response = error_response(request, 404, "Too many wrong links from here; wait a minute.")
        response.status_code = 429
        return response
    try:
        link = services.resolve(token)
    except services.LinkGone as gone:
        state = gone.link.state
        return error_response(
            request,
            410,
            f"This shared link was {state}"
            + (
                f" on {gone.link.revoked_at:%Y-%m-%d %H:%M} UTC."
                if state == "revoked" and gone.link.revoked_at
                else "."
            )
            + " Ask whoever shared it for a new one.",
        )
    if link is None:
        cache.add(key, 0, 60)
        cache.incr(key)
        raise Http404("no such shared link")
    if not services.can_open(link, request.user):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        raise Http404("no such shared link")
    return link


def _link_base(link: ShareLink, token: str) -> dict[str, Any]:
    """What every shared page shows of its link (who shared it, expiry, what was redacted)."""
    return {
        "link": link,
        "token": token,
        "share_root": reverse("sharing:shared", args=[token]),
        # never the raw username: it may be an e-mail address
        "shared_by": services.display_name(link.created_by),
        "kept": link.kept,
        "redacted_count": sum(f["count"] for f in link.findings if f["category"] not in link.kept),
    }


def _base(link: ShareLink, token: str) -> dict[str, Any]:
    if link.kind != "session":
        # a comparison's or sweep's link has no request explorer or block fragments
        raise Http404("this shared link has no request pages")
    data = services.snapshot_data(link)
    return {
        **_link_base(link, token),
        "snapshot": data,
        "transcript": data["transcript"],
        "run": data["run"],
    }


def _request_url(token: str) -> charts.RequestUrl:
    prefix = reverse("sharing:shared", args=[token]) + "requests/"
    return lambda i: f"{prefix}{i}/"


@never_cache  # a revoked link must not live on in a cache
def shared_report(request: HttpRequest, token: str) -> HttpResponse:
    opened = _open(request, token)
    if isinstance(opened, HttpResponse):
        return opened
    link = opened
    services.record_view(link)
    if link.kind != "session":
        return pages.shared_target(request, link, _link_base(link, token))
    context = _base(link, token)
    context.update(_report_parts(link, token, context["snapshot"]))
    return render(request, "sharing/report.html", context)


def _report_parts(link: ShareLink, token: str, snapshot: dict[str, Any]) -> dict[str, Any]:
    """What the shared report computes from its snapshot (charts above all), once per link: a
    snapshot never changes. Keyed by the token's hash, which no other link ever has."""
    key = f"share-report:{link.token_hash}"
    parts: dict[str, Any] | None = cache.get(key)
    if parts is not None:
        return parts
    data = snapshot["result"]
    result = as_result(data)
    url = _request_url(token)
    parts = {
        "summary": data.get("summary") or {},
        "figures": {
            "chart-context-data": charts.figure_json(charts.build_context_figure(result, url)),
            "chart-cache-data": charts.figure_json(charts.build_cache_figure(result, url)),
            "chart-cost-data": charts.figure_json(charts.build_cost_figure(result, url)),
            "chart-fidelity-data": charts.figure_json(charts.build_fidelity_figure(result, url)),
        },
        "fidelity": charts.fidelity(result),
        "subagents": subagent_rows(data),
        "summaries": summaries.run_summaries(data, snapshot["messages"]),
        "rows": _request_rows(result.get("requests") or [], url),
    }
    cache.set(key, parts, timeout=3600)
    return parts


def _request_rows(requests: list[RequestRow], url: charts.RequestUrl) -> list[dict[str, Any]]:
    return [
        {
            "index": i,
            "url": url(i),
            "thread": r.get("thread") or "main",
            "model_tokens": r.get("model_tokens"),
            "recorded": charts.recorded_prompt(r),
            "cost_usd": r.get("cost_usd"),
            "events": len(r.get("events") or []),
        }
        for i, r in enumerate(requests)
    ]


@never_cache  # a revoked link must not live on in a cache
def shared_explorer(request: HtmxRequest, token: str, index: int) -> HttpResponse:
    opened = _open(request, token)
    if isinstance(opened, HttpResponse):
        return opened
    link = opened
    context = _base(link, token)
    snapshot = context["snapshot"]
    data = snapshot["result"]
    requests: list[RequestRow] = as_result(data).get("requests") or []
    if not 0 <= index < len(requests):
        raise Http404(f"request {index} does not exist (this run has {len(requests)})")
    services.record_view(link)
    req = requests[index]
    thread = str(req.get("thread") or "main")
    session_messages = snapshot["messages"].get(thread) or []
    view = engine.side_by_side(session_messages, data, int(req.get("index", index)))
    show_replaced = request.GET.get("replaced") == "1"
    shown = explorer_page(request, view.get("rows") or [], view, show_replaced=show_replaced)
    url = _request_url(token)
    context.update(
        {
            "index": index,
            "count": len(requests),
            "req": req,
            "rows": shown["rows"],
            "row_count": shown["row_count"],
            "page": shown["page"],
            "next_page": shown["next_page"],
            "prev_url": url(index - 1) if index > 0 else None,
            "next_url": url(index + 1) if index + 1 < len(requests) else None,
            "self_url": url(index) + ("?replaced=1" if show_replaced else "?"),
            "thread": thread,
            "replaced_count": len(shown["replaced"]),
            "show_replaced": show_replaced,
            "summary_start": view.get("start", 0),
            "block_prefix": reverse("sharing:shared", args=[token]) + "messages/",
        }
    )
    if request.htmx and request.GET.get("page"):
        return render(request, "sharing/explorer.html#shared-rows", context)
    return render(request, "sharing/explorer.html", context)


@never_cache  # a revoked link must not live on in a cache
def shared_block(
    request: HttpRequest, token: str, thread: str, message: int, block: int
) -> HttpResponse:
    """The rest of a folded block of the shared explorer (redacted, like everything shared)."""
    opened = _open(request, token)
    if isinstance(opened, HttpResponse):
        return opened
    if opened.kind != "session":
        raise Http404("this shared link has no request pages")
    messages = services.snapshot_data(opened)["messages"].get(thread)
    return render_block_text(request, messages, message, block)


@login_required
def link_list(request: AuthedRequest) -> HttpResponse:
    links = list(services.visible_links(request.user))
    owner_of = set(access.workspaces(request.user, access.MANAGE).values_list("pk", flat=True))
    return render(
        request,
        "sharing/links.html",
        {
            "links": [
                {
                    "link": link,
                    "mine": link.created_by_id == request.user.pk,
                    "as_owner": link.workspace_id in owner_of,
                }
                for link in links
            ]
        },
    )


@login_required
@require_POST
def revoke(request: AuthedRequest, pk: int) -> HttpResponse:
    link = services.link_for(request.user, pk)
    if link is None:
        raise Http404("no such link")
    services.revoke(link)
    messages.success(request, f"Revoked the link to {link.target_label}; it now answers 410.")
    return redirect("sharing:links")


@access.session_view(access.READ)
def export_html(request: AuthedRequest, transcript: Transcript) -> HttpResponse:
    """Download the report as one self-contained, redacted HTML file."""
    run = _selected_run(request, transcript) or services.pick_run(transcript, None)
    try:
        html, _ = export.html_export(transcript, run)
    except services.ShareError as exc:
        return error_response(request, 400, exc.message)
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="session-{transcript.pk}.html"'
    return response
