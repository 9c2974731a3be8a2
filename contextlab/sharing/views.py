"""Share pages: the Share dialog, the shared report and explorer (logged out, read-only), the
Shared links page."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from django_ratelimit.core import is_ratelimited  # type: ignore[import-untyped]

from contextlab.engine import as_result
from contextlab.errors import error_response
from contextlab.http import AuthedRequest, HtmxRequest
from contextlab.runs import charts, explorer
from contextlab.runs.models import Run
from contextlab.sharing import export, pages, services
from contextlab.sharing.models import ShareLink
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
            target_name=transcript.display_name,
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


def _wrong_token_limited(request: HttpRequest) -> bool:
    """Count one wrong token from the request's client (its address as ``RATELIMIT_IP_META_KEY``
    names it, so behind a proxy each client counts apart); True past the limit."""
    return bool(
        is_ratelimited(
            request,
            group="share-miss",
            key="ip",
            rate=f"{WRONG_TOKENS_PER_MINUTE}/m",
            increment=True,
        )
    )


def _open(request: HttpRequest, token: str) -> ShareLink | HttpResponse:
    """The live link of a token, or the answer: 404 unknown, 410 revoked/expired, 429 after a
    burst of wrong tokens (a right token is always served: the limit counts and refuses only
    wrong ones), 404 for a workspace-only link opened by a non-member."""
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
        if _wrong_token_limited(request):
            response = error_response(
                request, 404, "Too many wrong links from here; wait a minute."
            )
            response.status_code = 429
            return response
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
        "redaction_note": services.redaction_note(link.findings, link.kept),
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
    context.update(pages.report_parts(link, context["snapshot"], _request_url(token)))
    return render(request, "sharing/report.html", context)


@never_cache  # a revoked link must not live on in a cache
def shared_explorer(request: HtmxRequest, token: str, index: int) -> HttpResponse:
    """The read-only explorer of a link's redacted snapshot: the owner's explorer (navigator,
    breakdown, rows) built by the same builder, on the snapshot only, with no forms."""
    opened = _open(request, token)
    if isinstance(opened, HttpResponse):
        return opened
    link = opened
    context = _base(link, token)
    snapshot = context["snapshot"]
    count = len(as_result(snapshot["result"])["requests"])
    if not 0 <= index < count:
        raise Http404(f"request {index} does not exist (this run has {count})")
    services.record_view(link)
    shared_url = _request_url(token)
    context.update(
        explorer.build(
            snapshot["result"],
            snapshot["messages"],
            index,
            flags=explorer.Flags.of(request.GET),
            request_url=shared_url,
            # a snapshot never changes; the token's hash is this link's alone
            cache_key=("share", link.token_hash),
        )
    )
    context["block_prefix"] = reverse("sharing:shared", args=[token]) + "messages/"
    # the shared template adds to this page's query ("replaced=1", "&page=N")
    context["self_url"] = shared_url(index) + "?" + context["url_flags"].removeprefix("&")
    partial = request.htmx and not request.htmx.history_restore_request
    if partial and request.GET.get("page"):
        return render(request, "sharing/explorer.html#shared-rows", context)
    if partial:
        return render(request, "sharing/explorer.html#explorer", context)
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
    return explorer.block_text_response(request, messages, message, block)


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
