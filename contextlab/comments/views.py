"""Comment pages (htmx forms of the explorer and the report): parse, call the services, render.

Each answer to htmx is the piece of page that changed: the explorer's panel after a new comment,
the comment itself after an edit, nothing (the comment goes) after a delete; the block's gutter
mark comes along out of band. Bad input answers 422 with the form and the message beside the
field; a role too low 403, another workspace's comment 404, too many comments 429."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from contextlab.comments import limits, presenting, services
from contextlab.comments.models import Comment
from contextlab.errors import error_response
from contextlab.http import AuthedRequest
from contextlab.transcripts.models import Transcript
from contextlab.workspaces import access


def _run_id(request: AuthedRequest) -> int | None:
    raw = request.POST.get("run", "")
    return int(raw) if raw.isdigit() else None


def _mark(
    request: AuthedRequest, transcript: Transcript, index: int, block: str
) -> dict[str, Any] | None:
    # only the explorer has gutter marks to update
    if not block or request.POST.get("from") != "explorer":
        return None
    return presenting.mark_context(request, transcript, index, block)


def _throttled(request: AuthedRequest) -> HttpResponse:
    # the error pages have no 429 of their own: the 400 page with the limit's message
    response = error_response(request, 400, limits.message())
    response.status_code = 429
    return response


@access.session_view(access.WRITE)
@require_POST
def create(request: AuthedRequest, transcript: Transcript, index: int) -> HttpResponse:
    """A new comment on request ``index`` (and the block the form names, if any)."""
    run_id = _run_id(request)
    body = request.POST.get("body", "")
    block = request.POST.get("block", "")
    if limits.limited(request):
        return _throttled(request)
    try:
        comment = services.create_comment(
            user=request.user, transcript=transcript, request_index=index, body=body, block=block
        )
    except services.CommentError as exc:
        context = presenting.panel_context(
            request,
            transcript,
            index,
            run_id,
            form_error={"field": exc.field, "message": exc.message},
            form_values={"body": body[: services.MAX_BODY + 100], "block": block[:40]},
        )
        return render(request, "comments/_panel.html", context, status=422)
    if not request.htmx:
        url = presenting.explorer_url(transcript, run_id)(index, "")
        return redirect(f"{url}#c-{comment.pk}")
    context = presenting.panel_context(
        request, transcript, index, run_id, mark=_mark(request, transcript, index, comment.block)
    )
    return render(request, "comments/_panel.html", context, status=201)


def _gated(request: AuthedRequest, pk: int) -> services.Gated:
    return services.comment_for(request.user, pk)


@login_required
@require_POST
def edit(request: AuthedRequest, pk: int) -> HttpResponse:
    gated = _gated(request, pk)
    comment = gated.comment
    body = request.POST.get("body", "")
    services.require_edit(request.user, gated)  # before the rate limit counts the attempt
    if limits.limited(request):
        return _throttled(request)
    url = presenting.explorer_url(comment.transcript, _run_id(request))
    try:
        services.edit_comment(user=request.user, gated=gated, body=body)
    except services.CommentError as exc:
        comment.refresh_from_db()
        item = presenting.live_item(comment, request.user, gated.role, url)
        context = {
            "c": item,
            "editing": True,
            "form_error": {"field": exc.field, "message": exc.message},
            "edit_body": body[: services.MAX_BODY + 100],
            "max_body": services.MAX_BODY,
        }
        return render(request, "comments/_item.html", context, status=422)
    if not request.htmx:
        return redirect(f"{url(comment.request_index, '')}#c-{comment.pk}")
    item = presenting.live_item(comment, request.user, gated.role, url)
    return render(request, "comments/_item.html", {"c": item, "max_body": services.MAX_BODY})


@login_required
@require_POST
def delete(request: AuthedRequest, pk: int) -> HttpResponse:
    gated = _gated(request, pk)
    comment: Comment = gated.comment
    transcript, index, block = comment.transcript, comment.request_index, comment.block
    services.delete_comment(user=request.user, gated=gated)
    if not request.htmx:
        return redirect(presenting.explorer_url(transcript, _run_id(request))(index, ""))
    context: dict[str, Any] = {"mark": _mark(request, transcript, index, block)}
    if request.POST.get("from") == "explorer":
        # the panel's count, out of band like the mark
        context["total"] = len(services.of_request(transcript, index))
    return render(request, "comments/_deleted.html", context)
