"""Links between sessions that continue each other: a resumed session's file and the session
whose record its first record hangs from (``Transcript.continues``).

Claude Code writes a new file when a session is resumed or continued. Uploaded apart (files
dropped together, the older one later, a SessionEnd hook), the two are linked within their
workspace, in either order, and every session whose history a link changes replays again, as a
session whose file grew does: a replay reads a session stitched to the ones it continues.
"""

from __future__ import annotations

import json
import logging
import tarfile
import zipfile
import zlib
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from pathlib import Path

from django.db import transaction
from django.db.models import Q

from contextlab import engine
from contextlab.runs import services as run_services
from contextlab.transcripts.models import MAX_CHAIN, Transcript, TranscriptMessages

logger = logging.getLogger(__name__)

#: Sessions of a workspace searched for the record a new upload hangs from (newest first, those
#: of the same project or sessionId first). Each is read through, so the search is bounded.
MAX_CONTINUED_CANDIDATES = 20
#: Bytes read at a time when looking for a record in a stored transcript.
_SCAN_CHUNK = 1 << 20
#: What reading a stored transcript can raise past its first bytes (a corrupt tail is a
#: listed problem for the reader, and here only means "not found")
_UNREADABLE = (
    OSError,
    EOFError,
    ValueError,
    RuntimeError,
    NotImplementedError,
    zlib.error,
    zipfile.BadZipFile,
    tarfile.TarError,
    engine.TranscriptError,
)


def _record_needles(record_uuid: str) -> tuple[bytes, ...]:
    """The bytes a record with uuid ``record_uuid`` holds in a JSONL file: Claude Code writes
    compact JSON; other writers put a space after the colon. The value is JSON-escaped, so
    quotes and backslashes in it match only themselves."""
    value = json.dumps(record_uuid, ensure_ascii=False)
    return (f'"uuid":{value}'.encode(), f'"uuid": {value}'.encode())


def _records_held(path: Path, uuids: Iterable[str]) -> set[str]:
    """Which of ``uuids`` the session files of the upload at ``path`` (a file, or an archive's
    session files) hold a record of, read a chunk at a time (never whole)."""
    needles = {
        needle: record_uuid for record_uuid in uuids for needle in _record_needles(record_uuid)
    }
    wanted = set(needles.values())
    found: set[str] = set()
    if not needles:
        return found
    # a needle split by a chunk boundary is found in the tail kept from the chunk before
    keep = max(len(n) for n in needles) - 1
    try:
        with engine.open_upload(path) as upload:
            for tfile in (upload.main, *upload.siblings):
                if tfile is None:
                    continue
                with tfile.opener() as stream:
                    tail = b""
                    while chunk := stream.read(_SCAN_CHUNK):
                        window = tail + chunk
                        found.update(
                            record_uuid
                            for needle, record_uuid in needles.items()
                            if needle in window
                        )
                        if found == wanted:
                            return found
                        tail = window[-keep:]
    except _UNREADABLE:
        pass  # a file gone or unreadable (past what was read) holds nothing more to continue
    return found


def continued_session(
    workspace_id: int,
    *,
    record_uuid: str,
    project: str,
    session_id: str,
    continuing: Transcript | None = None,
    scanned: set[int] | None = None,
) -> Transcript | None:
    """The session of the workspace whose transcript holds the record ``record_uuid``: the one
    a file starting from that record continues. Looks at the newest
    ``MAX_CONTINUED_CANDIDATES`` sessions, those of the same project or sessionId first,
    skipping (and adding to) ``scanned``, and never at one that would make a loop with
    ``continuing``."""
    if not record_uuid:
        return None
    scanned = scanned if scanned is not None else set()
    sessions = Transcript.objects.filter(workspace_id=workspace_id).order_by("-pk")
    if continuing is not None:
        # a session continued (through any number of files) by ``continuing`` cannot be
        # continued by it: the links would make a loop
        later = later_sessions(continuing)
        scanned |= {continuing.pk, *(t.pk for t in later)}
    related = Q(pk__in=[])
    if project:
        related |= Q(project=project)
    if session_id:
        related |= Q(session_id=session_id)
    first = list(sessions.filter(related).exclude(pk__in=scanned)[:MAX_CONTINUED_CANDIDATES])
    rest = list(
        sessions.exclude(pk__in=scanned | {t.pk for t in first})[
            : MAX_CONTINUED_CANDIDATES - len(first)
        ]
    )
    for candidate in first + rest:
        scanned.add(candidate.pk)
        if _records_held(Path(candidate.path), [record_uuid]):
            return candidate
    return None


def later_sessions(transcript: Transcript) -> list[Transcript]:
    """The sessions of its workspace that continue ``transcript``, directly or through others,
    at most ``MAX_CHAIN`` steps away."""
    found: list[Transcript] = []
    seen = {transcript.pk}
    level = [transcript]
    for _ in range(MAX_CHAIN):
        level = [
            t
            for t in Transcript.objects.filter(
                continues__in=level, workspace_id=transcript.workspace_id
            )
            if t.pk not in seen
        ]
        if not level:
            break
        seen.update(t.pk for t in level)
        found.extend(level)
    return found


def replay_with_new_history(transcript: Transcript, *, itself: bool = True) -> None:
    """The history ``transcript`` continues was linked, unlinked or grew: its stored messages
    (and those of every session continuing it) were read with the old one, so they go and the
    finished runs replay again, as for a session whose file grew."""
    for each in [*([transcript] if itself else []), *later_sessions(transcript)]:
        with transaction.atomic():
            TranscriptMessages.objects.filter(transcript=each).delete()
            if not run_services.replay_again(each) and not each.runs.exists():
                run_services.start_run(owner=each.owner, transcript=each, mode="recorded")


def link_continuations(transcript: Transcript, record_uuids: AbstractSet[str]) -> None:
    """Link the sessions of the workspace that start from a record of ``transcript`` (an
    earlier session uploaded after them) and replay them with their real history."""
    waiting = (
        Transcript.objects.filter(workspace_id=transcript.workspace_id, continues__isnull=True)
        .exclude(continues_uuid="")
        .exclude(pk=transcript.pk)
        .values_list("pk", "continues_uuid")
    )
    found = [pk for pk, record_uuid in waiting.iterator() if record_uuid in record_uuids]
    # one that ``transcript`` itself continues would make a loop
    earlier = {t.pk for t in transcript.earlier_sessions()}
    found = [pk for pk in found if pk not in earlier]
    for child in Transcript.objects.filter(pk__in=found):
        # only if still unlinked: a concurrent upload may have linked it first
        if Transcript.objects.filter(pk=child.pk, continues__isnull=True).update(
            continues=transcript
        ):
            child.continues = transcript
            replay_with_new_history(child)
            logger.info("session %s continues session %s", child.pk, transcript.pk)


def link_after_upload(
    transcript: Transcript, record_uuids: AbstractSet[str], scanned: set[int]
) -> None:
    """Once the upload is committed: link it to the session it continues if that one arrived
    meanwhile (files dropped together are stored by concurrent requests, and each only sees
    what was committed before it looked), and link the sessions that continue it."""
    if transcript.continues_id is None and transcript.continues_uuid:
        parent = continued_session(
            transcript.workspace_id,
            record_uuid=transcript.continues_uuid,
            project=transcript.project,
            session_id=transcript.session_id,
            continuing=transcript,
            scanned=scanned,
        )
        if parent is not None:
            updated = Transcript.objects.filter(pk=transcript.pk, continues__isnull=True).update(
                continues=parent
            )
            if updated:
                transcript.continues = parent
                replay_with_new_history(transcript)
    link_continuations(transcript, record_uuids)


#: Sessions of a workspace waiting for the one they continue that a session moved into it is
#: checked against (newest first; one read of its file checks them all).
MAX_WAITING_CHECKED = 200


def relink_moved(*, transcript: Transcript) -> None:
    """``transcript`` moved to another workspace, and links stay within one: it no longer
    continues a session of its old workspace nor is continued by one, and both sides replay
    without the other (its stored messages held its old workspace's history). In its new
    workspace it is linked to the session it continues and to the sessions continuing it."""
    moved = transcript.workspace_id
    later = list(transcript.continued_by.exclude(workspace_id=moved))
    Transcript.objects.filter(pk__in=[t.pk for t in later]).update(continues=None)
    for each in later:
        each.continues = None
        replay_with_new_history(each)
    before = transcript.continues
    if before is not None and before.workspace_id != moved:
        Transcript.objects.filter(pk=transcript.pk).update(continues=None)
        transcript.continues = None
    if transcript.continues is None and transcript.continues_uuid:
        parent = continued_session(
            moved,
            record_uuid=transcript.continues_uuid,
            project=transcript.project,
            session_id=transcript.session_id,
            continuing=transcript,
        )
        if parent is not None:
            Transcript.objects.filter(pk=transcript.pk).update(continues=parent)
            transcript.continues = parent
    if transcript.continues != before:
        replay_with_new_history(transcript)
    waiting: dict[str, list[int]] = {}
    for record_uuid, pk in (
        Transcript.objects.filter(workspace_id=moved, continues__isnull=True)
        .exclude(continues_uuid="")
        .exclude(pk__in=[transcript.pk, *(t.pk for t in transcript.earlier_sessions())])
        .order_by("-pk")
        .values_list("continues_uuid", "pk")[:MAX_WAITING_CHECKED]
    ):
        waiting.setdefault(record_uuid, []).append(pk)  # a session resumed twice from one point
    held = _records_held(Path(transcript.path), waiting)
    for child in Transcript.objects.filter(pk__in=[pk for u in held for pk in waiting[u]]):
        if Transcript.objects.filter(pk=child.pk, continues__isnull=True).update(
            continues=transcript
        ):
            child.continues = transcript
            replay_with_new_history(child)
