"""JSON API for sessions: upload, list, read, delete."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from ninja import File, Form, Router
from ninja.files import UploadedFile
from ninja.responses import Status

from contextlab.engine import FieldError
from contextlab.errors import field_error_body
from contextlab.http import AuthedRequest
from contextlab.transcripts import moving, resumable, services, tasks
from contextlab.transcripts.models import ResumableUpload, Transcript
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
        "display_name": transcript.display_name,
        "started_at": transcript.started_at,
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


# --- resumable uploads (tus 1.0.0: transcripts.resumable) -------------------------------------

uploads = Router(tags=["uploads"])


def _tus_response(status: int, body: dict[str, Any] | None = None, **headers: str) -> HttpResponse:
    response = (
        JsonResponse(body, status=status) if body is not None else HttpResponse(status=status)
    )
    response["Tus-Resumable"] = resumable.TUS_VERSION
    response["Cache-Control"] = "no-store"
    for key, value in headers.items():
        response[key.replace("_", "-")] = value
    return response


def _tus_error(exc: resumable.TusError) -> HttpResponse:
    headers = {"Upload_Offset": str(exc.offset)} if exc.offset is not None else {}
    return _tus_response(exc.status, {"detail": exc.message}, **headers)


def _header_int(request: AuthedRequest, header: str) -> int | None:
    raw = request.headers.get(header)
    if raw is None:
        return None
    if not raw.isdigit() or len(raw) > 18:
        raise resumable.TusError(400, f"{header} must be a non-negative integer, got {raw[:40]!r}.")
    return int(raw)


def _upload_for(request: AuthedRequest, upload_id: uuid.UUID) -> ResumableUpload:
    """The caller's own upload; anyone else's (or one the recovery removed) is 404, which
    tells a tus client to start again."""
    upload = ResumableUpload.objects.filter(pk=upload_id, owner=request.user).first()
    if upload is None:
        raise resumable.TusError(
            404, "No such upload: it finished, expired or was never made. Start it again."
        )
    return upload


def _upload_out(upload: ResumableUpload) -> dict[str, Any]:
    run = upload.transcript.runs.first() if upload.transcript is not None else None
    return {
        "id": str(upload.pk),
        "name": upload.name,
        "length": upload.length,
        "offset": upload.offset,
        "state": upload.state,
        "outcome": upload.outcome,
        "error": upload.error,
        "session": (
            {
                "id": upload.transcript_id,
                "url": upload.transcript.get_absolute_url(),
                # the recorded replay's progress (what the page's upload list shows next)
                "run_url": run.get_absolute_url() if run is not None else None,
            }
            if upload.transcript is not None
            else None
        ),
    }


@uploads.api_operation(
    ["OPTIONS"], "", operation_id="tus_options", summary="tus: the protocol's version and limits"
)
def tus_options(request: AuthedRequest) -> HttpResponse:
    response = _tus_response(204)
    response["Tus-Version"] = resumable.TUS_VERSION
    response["Tus-Extension"] = resumable.TUS_EXTENSIONS
    response["Tus-Max-Size"] = str(settings.UPLOAD_MAX_BYTES)
    return response


@uploads.post(
    "",
    response={201: None, 400: dict[str, Any], 412: dict[str, Any], 413: dict[str, Any]},
    operation_id="create_upload",
    summary="tus creation: headers `Upload-Length` and `Upload-Metadata` (`filename`, optional "
    "`workspace_id`); answers 201 with `Location`",
)
def create_upload(request: AuthedRequest) -> HttpResponse:
    try:
        if request.headers.get("Tus-Resumable") != resumable.TUS_VERSION:
            raise resumable.TusError(412, f"Send Tus-Resumable: {resumable.TUS_VERSION}.")
        length = _header_int(request, "Upload-Length")
        if length is None:
            raise resumable.TusError(400, "Upload-Length is required (deferred length is not).")
        meta = resumable.parse_metadata(request.headers.get("Upload-Metadata", ""))
        workspace = None
        if meta.get("workspace_id"):
            if not meta["workspace_id"].isdigit() or len(meta["workspace_id"]) > 18:
                raise resumable.TusError(400, "workspace_id must be a workspace's id.")
            workspace = access.workspace_for(request.user, int(meta["workspace_id"]), access.WRITE)
        upload = resumable.create(
            owner=request.user,
            length=length,
            name=meta.get("filename") or meta.get("name") or "",
            workspace=workspace,
        )
    except resumable.TusError as exc:
        return _tus_error(exc)
    location = request.build_absolute_uri(f"{request.path.rstrip('/')}/{upload.pk}")
    return _tus_response(201, Location=location, Upload_Expires=resumable.expires_at(upload))


@uploads.api_operation(
    ["HEAD"], "/{upload_id}", operation_id="upload_offset", summary="tus: where the upload stands"
)
def upload_offset(request: AuthedRequest, upload_id: uuid.UUID) -> HttpResponse:
    try:
        upload = _upload_for(request, upload_id)
    except resumable.TusError as exc:
        return _tus_response(exc.status)
    return _tus_response(
        200,
        Upload_Offset=str(upload.offset),
        Upload_Length=str(upload.length),
        Upload_Expires=resumable.expires_at(upload),
    )


@uploads.patch(
    "/{upload_id}",
    response={204: None, 400: dict[str, Any], 404: dict[str, Any], 409: dict[str, Any]},
    operation_id="append_upload",
    summary="tus: append a piece (`Upload-Offset`, `Content-Type: application/offset+octet-stream`)",
)
def append_upload(request: AuthedRequest, upload_id: uuid.UUID) -> HttpResponse:
    try:
        # whose upload first: anyone else's is 404 whatever else the request gets wrong
        upload = _upload_for(request, upload_id)
        if request.headers.get("Tus-Resumable") != resumable.TUS_VERSION:
            raise resumable.TusError(412, f"Send Tus-Resumable: {resumable.TUS_VERSION}.")
        if request.content_type != resumable.PIECE_CONTENT_TYPE:
            raise resumable.TusError(
                415, f"A piece's Content-Type is {resumable.PIECE_CONTENT_TYPE}.", upload.offset
            )
        offset = _header_int(request, "Upload-Offset")
        if offset is None:
            raise resumable.TusError(400, "Upload-Offset is required.", upload.offset)
        upload = resumable.append(
            upload, offset=offset, size=_header_int(request, "Content-Length"), body=request
        )
        if upload.state == ResumableUpload.State.COMPLETE:
            tasks.send_finish(upload.pk)  # the last piece: a worker joins them into a session
    except resumable.TusError as exc:
        response = _tus_error(exc)
        if exc.status in (400, 411, 413, 415):
            response["Connection"] = "close"  # an unread body must not be taken as a request
        return response
    return _tus_response(
        204, Upload_Offset=str(upload.offset), Upload_Expires=resumable.expires_at(upload)
    )


@uploads.get(
    "/{upload_id}",
    response={200: dict[str, Any], 404: dict[str, Any]},
    operation_id="get_upload",
    summary="An upload's state: receiving, complete (a worker is storing it), stored (with its "
    "session) or rejected (with the reason)",
)
def get_upload(request: AuthedRequest, upload_id: uuid.UUID) -> HttpResponse:
    try:
        upload = _upload_for(request, upload_id)
    except resumable.TusError as exc:
        return _tus_error(exc)
    return _tus_response(200, _upload_out(upload))


@uploads.delete(
    "/{upload_id}", response={204: None, 404: dict[str, Any]}, operation_id="delete_upload"
)
def delete_upload(request: AuthedRequest, upload_id: uuid.UUID) -> HttpResponse:
    try:
        upload = _upload_for(request, upload_id)
    except resumable.TusError as exc:
        return _tus_error(exc)
    resumable.terminate(upload)
    return _tus_response(204)
