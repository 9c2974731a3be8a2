"""JSON API for comments: list and add on a session, edit and delete one comment."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from ninja import Router
from ninja.responses import Status

from contextlab.comments import limits, markdown, services
from contextlab.comments.models import Comment
from contextlab.comments.schemas import CommentEdit, CommentIn, CommentOut
from contextlab.http import AuthedRequest
from contextlab.workspaces import access

sessions = Router(tags=["comments"])
router = Router(tags=["comments"])

_ANSWERS: dict[int, Any] = {
    403: dict[str, Any],
    404: dict[str, Any],
    422: dict[str, Any],
    429: dict[str, Any],
}


def _out(comment: Comment) -> dict[str, Any]:
    return {
        "id": comment.pk,
        "session_id": comment.transcript_id,
        "request": comment.request_index,
        "request_number": comment.request_index + 1,
        "block": comment.block,
        "author": comment.author_name,
        "body": comment.body,
        "html": str(markdown.render(comment.body)),
        "created_at": comment.created_at,
        "edited_at": comment.edited_at,
    }


def _throttled() -> Status[dict[str, Any]]:
    return Status(429, {"detail": limits.message()})


@sessions.get(
    "/{session_id}/comments",
    response=list[CommentOut],
    operation_id="list_comments",
    summary="The session's comments (any member), by request; ?request_index= for one request",
)
def list_comments(
    request: AuthedRequest, session_id: int, request_index: int | None = None
) -> list[dict[str, Any]]:
    transcript = access.session_for(request.user, session_id, access.READ)
    comments = services.of_session(transcript)
    if request_index is not None:
        comments = comments.filter(request_index=request_index)
    return [_out(c) for c in comments]


@sessions.post(
    "/{session_id}/comments",
    response={201: CommentOut, **_ANSWERS},
    operation_id="create_comment",
    summary="Comment on a request, or on one block of its model view (editors and owners)",
)
def create_comment(
    request: AuthedRequest, session_id: int, payload: CommentIn
) -> Status[dict[str, Any]]:
    transcript = access.session_for(request.user, session_id, access.WRITE)
    if limits.limited(request):
        return _throttled()
    comment = services.create_comment(
        user=request.user,
        transcript=transcript,
        request_index=payload.request,
        block=payload.block,
        body=payload.body,
    )
    return Status(201, _out(comment))


@router.patch(
    "/{comment_id}",
    response={200: CommentOut, **_ANSWERS},
    operation_id="update_comment",
    summary="Edit your own comment",
)
def update_comment(
    request: AuthedRequest, comment_id: int, payload: CommentEdit
) -> Status[dict[str, Any]]:
    gated = services.comment_for(request.user, comment_id)
    services.require_edit(request.user, gated)
    if limits.limited(request):
        return _throttled()
    comment = services.edit_comment(user=request.user, gated=gated, body=payload.body)
    return Status(200, _out(comment))


@router.delete(
    "/{comment_id}",
    response={204: None, 403: dict[str, Any], 404: dict[str, Any]},
    operation_id="delete_comment",
    summary="Delete your own comment (workspace owners: any comment of the workspace)",
)
def delete_comment(request: AuthedRequest, comment_id: int) -> HttpResponse:
    gated = services.comment_for(request.user, comment_id)
    services.delete_comment(user=request.user, gated=gated)
    return HttpResponse(status=204)
