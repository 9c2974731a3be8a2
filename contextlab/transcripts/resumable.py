"""Resumable uploads: the server side of the tus protocol 1.0.0 (core, creation, termination
and expiration; https://tus.io/protocols/resumable-upload), on ContextLab's storage.

Why tus: it is an open, versioned protocol with well-kept clients for both of ours, the
browser (tus-js-client, vendored) and ``contextlab upload`` (tuspy), which already resume from
the server's offset after a dropped connection. Its Django servers (django-tus, last released
in 2020) write to one local folder, which a stack without a shared disk cannot use; the core
protocol is three small requests, so the server part is here, on ``blobs``.

Each PATCH body is one piece, streamed to the storage as ``incoming/<upload>/<offset>-<n>``
and counted only once whole: a connection cut mid-piece leaves the offset where it was, and
the client sends that piece again (a HEAD tells it where to start). The web process never
holds a piece in memory nor parses the transcript: once the last byte is in, a worker joins
the pieces into a session (``finish``, via the ``transcripts.tasks`` task) exactly as a
one-request upload (``services.store_upload``).
"""

from __future__ import annotations

import base64
import binascii
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from contextlab import blobs
from contextlab.http import body_stalled
from contextlab.transcripts import services
from contextlab.transcripts.models import ResumableUpload
from contextlab.workspaces.models import Workspace
from contextlab.workspaces.services import personal_workspace

logger = logging.getLogger(__name__)

TUS_VERSION = "1.0.0"
TUS_EXTENSIONS = "creation,termination,expiration"
#: the one content type of a PATCH body (tus core)
PIECE_CONTENT_TYPE = "application/offset+octet-stream"
#: bytes read from the request at a time while a piece streams to the storage
READ_CHUNK = 1024**2
#: longest Upload-Metadata header, characters (a name and a workspace id)
MAX_METADATA = 4096


@dataclass
class TusError(Exception):
    """A request the protocol or our limits refuse: ``status`` and one clear ``message``;
    ``offset`` (when known) tells the client where the upload stands."""

    status: int
    message: str
    offset: int | None = None

    def __str__(self) -> str:
        return self.message


def parse_metadata(header: str) -> dict[str, str]:
    """``Upload-Metadata``: comma-separated ``key base64(value)`` pairs (tus creation)."""
    if len(header) > MAX_METADATA:
        raise TusError(400, f"Upload-Metadata is longer than {MAX_METADATA} characters.")
    values: dict[str, str] = {}
    for pair in filter(None, (p.strip() for p in header.split(","))):
        key, _, encoded = pair.partition(" ")
        try:
            values[key] = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise TusError(
                400, f"Upload-Metadata: the value of {key!r} is not base64 UTF-8."
            ) from None
    return values


def create(*, owner: User, length: int, name: str, workspace: Workspace | None) -> ResumableUpload:
    """A new upload of ``length`` bytes called ``name``; refused at once (413) past the size
    limit or the owner's quotas, and (400) for a name ContextLab cannot read."""
    if length <= 0:
        raise TusError(400, f"{name or 'The file'} is empty.")
    if length > settings.UPLOAD_MAX_BYTES:
        raise TusError(413, services.too_large_message(name))
    try:
        clean = services.clean_upload_name(name)
    except services.UploadRejected as exc:
        raise TusError(400, exc.message) from None
    workspace = workspace or personal_workspace(owner)
    over = services.quota_refusal(owner=owner, workspace=workspace, name=clean, size=length)
    if over is not None:
        raise TusError(413, over)
    return ResumableUpload.objects.create(
        owner=owner, workspace=workspace, name=clean, length=length
    )


def expires_at(upload: ResumableUpload) -> str:
    """``Upload-Expires`` (tus expiration): when the recovery gives up on an idle upload."""
    when = upload.updated_at + timedelta(seconds=settings.UPLOAD_RESUMABLE_STALE_AFTER)
    return when.strftime("%a, %d %b %Y %H:%M:%S GMT")


class _Piece:
    """The request body as a stream of exactly ``size`` bytes for the storage to read; a body
    that ends early (the connection dropped) raises, so the piece is never counted."""

    def __init__(self, body: blobs.Readable, size: int) -> None:
        self.body = body
        self.left = size

    def read(self, n: int = -1, /) -> bytes:
        if self.left <= 0:
            return b""
        want = self.left if n is None or n < 0 else min(n, self.left)
        data = self.body.read(min(want, READ_CHUNK) if n is None or n < 0 else want)
        if not data:
            raise TusError(400, "The piece ended before its Content-Length (connection dropped?).")
        self.left -= len(data)
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


def append(
    upload: ResumableUpload, *, offset: int, size: int | None, body: blobs.Readable
) -> ResumableUpload:
    """Store the piece ``body`` (``size`` bytes) at ``offset``; returns the upload after it.

    Refused with a clear answer and nothing lost: a finished or expired upload (404/410), an
    offset other than the upload's (409: a piece out of order, or sent twice), a piece larger
    than ``UPLOAD_CHUNK_MAX_BYTES`` or past the declared length (413), no ``Content-Length``
    (411). A piece cut short is dropped whole; the client sends it again from the offset.
    """
    if upload.state != ResumableUpload.State.RECEIVING:
        raise TusError(
            409, f"This upload is already {upload.state}; nothing more is taken.", upload.offset
        )
    if offset != upload.offset:
        raise TusError(
            409,
            f"Upload-Offset {offset} is not where this upload stands ({upload.offset} bytes "
            "received): send the piece that starts there (HEAD tells the offset).",
            upload.offset,
        )
    if size is None:
        raise TusError(411, "A piece needs a Content-Length.", upload.offset)
    if size > settings.UPLOAD_CHUNK_MAX_BYTES:
        raise TusError(
            413,
            f"A piece is at most {settings.UPLOAD_CHUNK_MAX_BYTES} bytes "
            f"(UPLOAD_CHUNK_MAX_BYTES); this one declares {size}.",
            upload.offset,
        )
    if offset + size > upload.length:
        raise TusError(
            413,
            f"This piece would end at byte {offset + size}, past the upload's declared length "
            f"({upload.length} bytes).",
            upload.offset,
        )
    if size == 0:
        upload.save(update_fields=["updated_at"])
        return upload
    name = f"incoming/{upload.pk}/{offset:013d}-{uuid.uuid4().hex[:8]}"
    try:
        blobs.save_stream(name, _Piece(body, size))
    except TusError:
        blobs.delete(name)
        raise
    except Exception as exc:
        blobs.delete(name)
        if body_stalled(exc):  # no byte for REQUEST_BODY_IDLE_TIMEOUT s: the client is gone
            raise TusError(
                408, "The piece stalled before its Content-Length; send it again.", upload.offset
            ) from None
        if isinstance(exc, OSError | ValueError):  # the client went away mid-body
            raise TusError(
                400, "The piece ended before its Content-Length.", upload.offset
            ) from None
        logger.exception("could not store a piece of upload %s", upload.pk)
        raise TusError(
            507, "The server could not store this piece; try again later.", upload.offset
        ) from None
    with transaction.atomic():
        current = ResumableUpload.objects.select_for_update().get(pk=upload.pk)
        if current.state != ResumableUpload.State.RECEIVING or current.offset != offset:
            # another request stored the same piece meanwhile (a client's retry)
            transaction.on_commit(lambda: blobs.delete(name))
            raise TusError(409, "This piece was already received.", current.offset)
        current.pieces = [*current.pieces, [offset, size, name]]
        current.offset = offset + size
        if current.offset == current.length:
            # the caller (the only request that gets this state back) queues the worker's task
            current.state = ResumableUpload.State.COMPLETE
        current.save()
    return current


def stream_pieces(upload: ResumableUpload) -> Iterator[bytes]:
    """The upload's bytes, piece after piece, read from the storage a chunk at a time."""
    expected = 0
    for offset, size, name in upload.pieces:
        if offset != expected:
            raise services.UploadRejected(f"{upload.name}: a piece is missing at byte {expected}.")
        with blobs.open_stored(name) as fh:
            while chunk := fh.read(blobs.COPY_CHUNK):
                yield chunk
        expected = offset + size
    if expected != upload.length:
        raise services.UploadRejected(f"{upload.name}: the pieces end at byte {expected}.")


def finish(upload_id: uuid.UUID | str) -> ResumableUpload | None:
    """Join a complete upload's pieces into a session (worker side); None when there is
    nothing to do (stored already, gone). Its pieces are removed whatever the outcome."""
    with transaction.atomic():
        upload = (
            ResumableUpload.objects.select_for_update(skip_locked=True)
            .filter(pk=upload_id, state=ResumableUpload.State.COMPLETE)
            .first()
        )
        if upload is None:
            return None
        # touched now, so the recovery does not send it again while this worker stores it
        upload.save(update_fields=["updated_at"])
    try:
        transcript, stored = services.store_upload(
            owner=upload.owner,
            name=upload.name,
            content=stream_pieces(upload),
            workspace=upload.workspace,
        )
    except services.UploadRejected as exc:
        upload.state = ResumableUpload.State.REJECTED
        upload.error = exc.message[:4000]
    else:
        upload.state = ResumableUpload.State.STORED
        upload.transcript = transcript
        upload.outcome = stored.value
    upload.save()
    remove_pieces(upload)
    return upload


def remove_pieces(upload: ResumableUpload) -> None:
    for _offset, _size, name in upload.pieces:
        blobs.delete(name)
    # a piece whose request died before it was counted is only in the folder
    _folders, files = blobs.listdir(f"incoming/{upload.pk}")
    for name in files:
        blobs.delete(f"incoming/{upload.pk}/{name}")


def terminate(upload: ResumableUpload) -> None:
    """tus termination: the client gives up; its pieces and row go."""
    remove_pieces(upload)
    upload.delete()
