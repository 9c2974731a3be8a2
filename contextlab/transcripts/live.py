"""Live sessions: bytes appended to a session's transcript as Claude Code writes them.

``contextlab watch`` sends what a session file gained since its last call, with the byte offset
it thinks the server has. Only whole lines are taken: a partial last line waits in
``Transcript.live_tail`` for the append that ends it, and the offset counts it. The session then
grows as a longer upload of it does (``services.store_upload``): a new stored file, its columns
read again (only its new lines are parsed: ``engine.load_growing`` reads on from the state the
last append's read left), its stored messages dropped and its finished runs replayed.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from contextlab import blobs, engine
from contextlab.transcripts import continuations, quotas, services
from contextlab.transcripts.models import Transcript

logger = logging.getLogger(__name__)


@dataclass
class AppendRefused(Exception):
    """The append was not taken; ``offset`` is where the session stands (for a 409)."""

    status: int
    message: str
    offset: int

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Appended:
    transcript: Transcript
    #: bytes of whole lines added to the transcript by this append
    taken: int
    #: bytes waiting for the rest of their line
    pending: int
    #: the runs queued to replay the grown session
    replays: list[int]


def read_body(body: blobs.Readable, size: int | None, *, offset: int) -> bytes:
    """The append's body, at most ``LIVE_APPEND_MAX_BYTES`` (413 past it, read no further)."""
    limit: int = settings.LIVE_APPEND_MAX_BYTES
    if size is not None and size > limit:
        raise AppendRefused(
            413,
            f"An append is at most {limit} bytes (LIVE_APPEND_MAX_BYTES); this one declares "
            f"{size}. Send it in smaller pieces.",
            offset,
        )
    data = body.read(limit + 1)
    if len(data) > limit:
        raise AppendRefused(
            413, f"An append is at most {limit} bytes (LIVE_APPEND_MAX_BYTES).", offset
        )
    return data


def append(transcript_id: int, *, offset: int, data: bytes) -> Appended:
    """Append ``data`` to session ``transcript_id`` at byte ``offset`` (the caller checked the
    user may change it). Refused (``AppendRefused``): an offset other than the session's
    (409, with the session's), a session stored as an archive (422), past the upload limit or
    a quota (413)."""
    with transaction.atomic():
        # one append at a time per session: the next one waits here and then sees the offset
        transcript = Transcript.objects.select_for_update().get(pk=transcript_id)
        received = transcript.received
        if offset != received:
            raise AppendRefused(
                409,
                f"offset {offset} is not where this session stands ({received} bytes "
                "received): send what follows that byte.",
                received,
            )
        if not transcript.file.endswith(".jsonl"):
            raise AppendRefused(
                422,
                "Only a session uploaded as a plain .jsonl transcript grows by appending; "
                "upload this one again whole.",
                received,
            )
        if received + len(data) > settings.UPLOAD_MAX_BYTES:
            raise AppendRefused(413, services.too_large_message(transcript.name), received)
        joined = bytes(transcript.live_tail) + data
        cut = joined.rfind(b"\n") + 1
        whole, tail = joined[:cut], joined[cut:]
        if not whole:
            transcript.live_tail = tail
            transcript.appended_at = timezone.now()
            transcript.save(update_fields=["live_tail", "appended_at"])
            return Appended(transcript, taken=0, pending=len(tail), replays=[])
        over = quotas.refusal(
            owner=transcript.owner,
            workspace=transcript.workspace,
            name=transcript.name,
            size=len(whole),
            new_file=False,
        )
        if over is not None:
            raise AppendRefused(413, over, received)
        return _grow(transcript, whole, tail)


#: The SHA-256 of live sessions' files as this process last hashed them, by their hex digest:
#: the next append hashes only its bytes (``hashlib``'s state is carried on, not saved: a web
#: process that did not take the last append hashes the file whole)
_RUNNING_DIGESTS: OrderedDict[str, Any] = OrderedDict()
RUNNING_DIGESTS_LIMIT = 64


def _running_digest(sha256: str) -> Any | None:
    """A copy of the hash of the file of digest ``sha256`` taken on its bytes, to go on with
    (None when this process holds none). The digest it gives is ``sha256`` itself, so it is
    the hash of those very bytes."""
    digest = _RUNNING_DIGESTS.pop(sha256, None)
    return digest if digest is not None and digest.hexdigest() == sha256 else None


def _keep_digest(digest: Any) -> None:
    _RUNNING_DIGESTS[digest.hexdigest()] = digest.copy()
    while len(_RUNNING_DIGESTS) > RUNNING_DIGESTS_LIMIT:
        _RUNNING_DIGESTS.popitem(last=False)


def _grow(transcript: Transcript, whole: bytes, tail: bytes) -> Appended:
    """Store the transcript with ``whole`` appended and make it the session's file."""
    folder = f"uploads/{transcript.owner_id}"
    partial = blobs.new_spool_name(blobs.spool_dir(f"{folder}/live"), ".jsonl")
    stored_name = ""
    try:
        digest = _running_digest(transcript.sha256)
        with Path(transcript.path).open("rb") as old, partial.open("wb") as out:
            if digest is not None:
                shutil.copyfileobj(old, out, 1 << 20)  # its bytes are hashed already
            else:
                digest = hashlib.sha256()
                while chunk := old.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
            digest.update(whole)
            out.write(whole)
        sha256 = digest.hexdigest()
        _keep_digest(digest)
        size = transcript.size + len(whole)
        stored_name = f"{folder}/{sha256}.jsonl"
        final = blobs.store_file(partial, stored_name)
        try:
            # read on from where the last append's read stopped (its state is in the session
            # cache under the earlier digest): the work grows with the bytes appended
            session, resumed = engine.load_growing(
                final,
                transcript.name,
                cache_dir=settings.SESSION_CACHE_DIR,
                sha256=sha256,
                earlier_sha256=transcript.sha256,
                mirror=blobs.session_cache_mirror(),
            )
            logger.info(
                "session %s grew by %s bytes: %s",
                transcript.pk,
                len(whole),
                "read on from the last append's read" if resumed else "read whole",
            )
        except engine.TranscriptError as exc:
            raise AppendRefused(422, f"{transcript.name}: {exc}", transcript.received) from None
        try:
            # no parse handed over to the worker: it reads on from the read of the version
            # before that it kept, else from the state this read left (``load_growing``)
            fields = services.session_fields(
                session, stored_name=stored_name, name=transcript.name, size=size, sha256=sha256
            )
        finally:
            session.close()
        fields.pop("continues_uuid", None)  # where the file starts did not change
        fields.update(live_tail=tail, appended_at=timezone.now(), previous_sha256=transcript.sha256)
        try:
            with transaction.atomic():
                transcript = services.replace_with_longer(transcript, fields, live=True)
        except IntegrityError:
            raise AppendRefused(
                409,
                "Another session of this workspace holds exactly these bytes.",
                transcript.size + len(transcript.live_tail),
            ) from None
        stored_name = ""  # the row owns the file now
        continuations.replay_with_new_history(transcript, itself=False)
        replays = list(transcript.runs.filter(status="queued").values_list("pk", flat=True))
        return Appended(transcript, taken=len(whole), pending=len(tail), replays=replays)
    finally:
        partial.unlink(missing_ok=True)
        if stored_name and not Transcript.objects.filter(file=stored_name).exists():
            blobs.delete(stored_name)
