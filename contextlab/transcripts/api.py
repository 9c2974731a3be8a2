"""JSON API for sessions: upload, list, read, delete."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from ninja import File, Form, Router
from ninja.files import UploadedFile
from ninja.responses import Status

from contextlab.engine import FieldError
from contextlab.errors import field_error_body
from contextlab.http import AuthedRequest
from contextlab.transcripts import moving, services
from contextlab.transcripts.models import Transcript
from contextlab.transcripts.schemas import MovedOut, MoveIn, SessionDetailOut, SessionOut
from contextlab.transcripts.uploads import INCOMPLETE_KEY, OVERSIZE_KEY
from contextlab.workspaces import access

router = Router(tags=["sessions"])


def _session_out(
    transcript: Transcript, *, duplicate: bool = False, grew: bool = False
) -> dict[str, Any]:
    return {
        "id": transcript.pk,
        "name": transcript.name,
        "title": transcript.title,
        "project": transcript.project,
        "requests": transcript.request_count,
        "problems": transcript.problems,
        "size": transcript.size,
        "sha256": transcript.sha256,
        "session_id": transcript.session_id,
        "version": transcript.version,
        "workspace_id": transcript.workspace_id,
        "continues": transcript.continues_id,
        "created_at": transcript.created_at,
        "duplicate": duplicate,
        "grew": grew,
    }


@router.post(
    "",
    response={
        201: SessionOut,
        200: SessionOut,
        400: dict[str, Any],
        413: dict[str, Any],
        422: dict[str, Any],
        507: dict[str, Any],
    },
    operation_id="create_session",
    summary="Upload a transcript (multipart field `file`; optional `workspace_id`, default the "
    "personal workspace)",
)
def create_session(
    request: AuthedRequest,
    file: UploadedFile | None = File(None),  # type: ignore[assignment,type-arg]  # noqa: B008
    workspace_id: int | None = Form(None),  # type: ignore[assignment,type-arg]
) -> Status[dict[str, Any]]:
    # a workspace the caller may not upload to answers 404/403 before the body is stored
    workspace = (
        access.workspace_for(request.user, workspace_id, access.WRITE)
        if workspace_id is not None
        else None
    )
    oversize = request.META.get(OVERSIZE_KEY)
    if oversize:
        return Status(413, {"detail": services.too_large_message(oversize[0])})
    incomplete = request.META.get(INCOMPLETE_KEY)
    if file is None and incomplete:
        return Status(400, {"detail": services.interrupted_message(incomplete[0])})
    if file is None:
        raise FieldError("file", "a transcript file is required (multipart field `file`)")
    try:
        transcript, stored = services.store_upload(
            owner=request.user,
            name=file.name or "",
            content=file.chunks(),
            workspace=workspace,
        )
    except services.UploadRejected as exc:
        if exc.status in (413, 507):  # too large; the server could not store it
            return Status(exc.status, {"detail": exc.message})
        return Status(422, field_error_body("file", exc.message, problems=exc.problems[:100]))
    created = stored is services.Stored.CREATED
    out = _session_out(
        transcript,
        duplicate=stored is services.Stored.DUPLICATE,
        grew=stored is services.Stored.GREW,
    )
    return Status(201 if created else 200, out)


@router.get("", response=list[SessionOut], operation_id="list_sessions")
def list_sessions(request: AuthedRequest) -> list[dict[str, Any]]:
    return [_session_out(t) for t in access.sessions(request.user)]


@router.get("/{session_id}", response=SessionDetailOut, operation_id="get_session")
def get_session(request: AuthedRequest, session_id: int) -> dict[str, Any]:
    transcript = access.session_for(request.user, session_id, access.READ)
    data = _session_out(transcript)
    data["threads"] = transcript.threads
    data["runs"] = [
        {
            "id": run.pk,
            "mode": run.mode,
            "preset": run.preset,
            "status": run.status,
            "progress": run.progress,
            "error": run.error,
        }
        for run in transcript.runs.all()
    ]
    return data


@router.delete(
    "/{session_id}", response={204: None, 403: dict[str, Any]}, operation_id="delete_session"
)
def delete_session(request: AuthedRequest, session_id: int) -> HttpResponse:
    transcript = access.session_for(request.user, session_id, access.MANAGE)
    services.delete_transcript(transcript=transcript)
    return HttpResponse(status=204)


@router.post(
    "/{session_id}/move",
    response={200: MovedOut, 403: dict[str, Any], 422: dict[str, Any]},
    operation_id="move_session",
    summary="Move a session and its runs to another workspace (editor of both); its live "
    "share links are revoked",
)
def move_session(
    request: AuthedRequest, session_id: int, payload: MoveIn
) -> Status[dict[str, Any]]:
    transcript = access.session_for(request.user, session_id, access.WRITE)
    revoked = moving.move_session(
        user=request.user, transcript=transcript, workspace_id=payload.workspace_id
    )
    return Status(
        200,
        {"id": transcript.pk, "workspace_id": transcript.workspace_id, "revoked_links": revoked},
    )
