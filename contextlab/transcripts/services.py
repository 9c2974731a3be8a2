"""Request-side writes for sessions: store an upload, validate it with the engine, delete."""

from __future__ import annotations

import enum
import hashlib
import logging
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from contextlab import blobs, engine
from contextlab.runs import services as run_services
from contextlab.search import services as search
from contextlab.transcripts import continuations, quotas
from contextlab.transcripts.checking import CONTROL_CHARS, Checked, CheckRequest, check_here

# kept here for the pages, the API and live sessions: an upload's refusal and its columns
from contextlab.transcripts.checking import UploadRejected as UploadRejected
from contextlab.transcripts.checking import session_fields as session_fields
from contextlab.transcripts.models import Transcript, TranscriptMessages
from contextlab.workspaces.models import Workspace
from contextlab.workspaces.services import personal_workspace

logger = logging.getLogger(__name__)

#: accepted upload names, longest suffix first
ACCEPTED_SUFFIXES = (".jsonl.gz", ".jsonl.zst", ".tar.gz", ".jsonl", ".tgz", ".zip")


def format_bytes(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def too_large_message(name: str) -> str:
    return (
        f"{name or 'The file'} is larger than the upload limit of "
        f"{format_bytes(settings.UPLOAD_MAX_BYTES)} ({settings.UPLOAD_MAX_BYTES} bytes)."
    )


def interrupted_message(name: str) -> str:
    return (
        f"The upload of {name or 'the file'} stopped before the end (connection interrupted?); "
        "nothing was stored. Please upload it again."
    )


def accepted_suffix(name: str) -> str | None:
    lowered = name.lower()
    for suffix in ACCEPTED_SUFFIXES:
        if lowered.endswith(suffix) and len(lowered) > len(suffix):
            return suffix
    return None


def _copy_hashing(source: IO[bytes] | Iterable[bytes], target: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with target.open("wb") as out:
        chunks: Iterable[bytes] = (
            source if not hasattr(source, "read") else iter(lambda: source.read(1 << 20), b"")  # type: ignore[union-attr]
        )
        for chunk in chunks:
            digest.update(chunk)
            size += len(chunk)
            if size > settings.UPLOAD_MAX_BYTES:
                raise UploadRejected(too_large_message(""), status=413)
            out.write(chunk)
    return digest.hexdigest(), size


#: Bytes compared at a time when checking that an earlier upload is the start of a new one.
_COMPARE_CHUNK = 1 << 20


def _grown_from(workspace: Workspace, session_id: str, new_path: Path) -> Transcript | None:
    """The session of ``workspace`` that this upload continues: the same ``sessionId``, and its
    transcript is where the new one starts (Claude Code appends to a session's file, so a
    SessionEnd hook uploads ever longer versions of it). None for anything else."""
    if not session_id:
        return None
    candidates = Transcript.objects.filter(
        workspace=workspace, session_id=session_id[:100]
    ).order_by("-pk")
    for candidate in candidates[:5]:
        if candidate.size > new_path.stat().st_size and not candidate.file.endswith(
            (".gz", ".zst", ".zip", ".tgz")
        ):
            continue  # a plain file larger than the new one cannot be its start
        if _transcript_starts(Path(candidate.path), new_path):
            return candidate
    return None


def _transcript_starts(old_path: Path, new_path: Path) -> bool:
    """Whether the session transcript in ``old_path`` (a file or the main file of an archive)
    is a byte prefix of the one in ``new_path``, read in chunks (never whole)."""
    try:
        with engine.open_upload(old_path) as old, engine.open_upload(new_path) as new:
            if old.main is None or new.main is None:
                return False
            with old.main.opener() as a, new.main.opener() as b:
                while chunk := a.read(_COMPARE_CHUNK):
                    if _read_exactly(b, len(chunk)) != chunk:
                        return False
                return True
    except (OSError, EOFError, ValueError, engine.TranscriptError):
        return False  # an old file gone or unreadable is no longer a session to update


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    parts: list[bytes] = []
    while size > 0 and (part := stream.read(size)):
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


def replace_with_longer(
    transcript: Transcript, fields: dict[str, Any], *, live: bool = False
) -> Transcript:
    """Point ``transcript`` at its longer file and replay its finished runs again (``live``:
    an append; each run goes on from its last replay's state where it can)."""
    old_file = transcript.file
    with transaction.atomic():
        for key, value in fields.items():
            setattr(transcript, key, value)
        transcript.save()
        if live:
            # the stored messages are the old file's (their ``sha256`` says so: no page shows
            # them now): the first replay stores the rows the append changed or added after
            # them (``jobs.replay.store_messages_of``). The search index keeps the rows of the
            # blocks the append leaves where they were
            search.forget(transcript.pk, appended=True)
            # messages stored before the file's digest was kept with them: deleted as before
            legacy = TranscriptMessages.objects.filter(transcript=transcript, sha256="")
            for stored in legacy.only("pk"):
                stored.grown_by_append = True
                stored.delete()
        else:
            # the first replay stores the new ones. Deleted one by one (not their large JSON
            # read), which drops the search index's rows (search.signals)
            for stored in TranscriptMessages.objects.filter(transcript=transcript).only("pk"):
                stored.delete()
        if not run_services.replay_again(transcript, live=live) and not transcript.runs.exists():
            run_services.start_run(owner=transcript.owner, transcript=transcript, mode="recorded")
        shared = Transcript.objects.filter(file=old_file).exclude(pk=transcript.pk).exists()
        if not shared and old_file != transcript.file:
            transaction.on_commit(lambda: blobs.delete(old_file))
    logger.info("session %s grew: now %s bytes", transcript.pk, transcript.size)
    return transcript


def clean_upload_name(name: str) -> str:
    """The upload's file name as stored and shown (no folders, no control characters), or
    ``UploadRejected`` for none or a kind of file ContextLab cannot read."""
    name = CONTROL_CHARS.sub("", os.path.basename(name.replace("\\", "/"))).strip()[:200]
    if not name:
        raise UploadRejected("The upload has no file name.")
    if accepted_suffix(name) is None:
        raise UploadRejected(
            f"{name}: unsupported file type. Upload a .jsonl, .jsonl.gz or .jsonl.zst transcript, "
            "or a .zip / .tar.gz of a session folder."
        )
    return name


def quota_refusal(*, owner: User, workspace: Workspace, name: str, size: int) -> str | None:
    """Why ``size`` more bytes would pass the owner's or the workspace's quota, else None."""
    return quotas.refusal(owner=owner, workspace=workspace, name=name, size=size)


#: the session a new user is offered to try, bundled with the app (``demo/README.md``)
DEMO_SESSION = Path(__file__).resolve().parent.parent / "demo" / "marot__spotter__tool_heavy.jsonl"


def load_demo_session(owner: User) -> Transcript:
    """The bundled demo session in ``owner``'s personal workspace, replayed like an upload
    (loading it twice gives the same session back)."""
    with DEMO_SESSION.open("rb") as fh:
        transcript, _ = store_upload(owner=owner, name=DEMO_SESSION.name, content=fh)
    return transcript


class Stored(enum.Enum):
    """What an upload did: a new session, the bytes of one already there, or a longer version
    of one already there (the same ``sessionId``, the old transcript its start)."""

    CREATED = "created"
    DUPLICATE = "duplicate"
    GREW = "grew"


def create_transcript(
    *,
    owner: User,
    name: str,
    content: IO[bytes] | Iterable[bytes],
    workspace: Workspace | None = None,
) -> tuple[Transcript, bool]:
    """``store_upload``; ``created`` is True only for a new session."""
    transcript, stored = store_upload(owner=owner, name=name, content=content, workspace=workspace)
    return transcript, stored is Stored.CREATED


def store_upload(
    *,
    owner: User,
    name: str,
    content: IO[bytes] | Iterable[bytes],
    workspace: Workspace | None = None,
) -> tuple[Transcript, Stored]:
    """Store an upload of ``owner`` as a session of ``workspace`` (default: the owner's personal
    one; the caller checked the owner may upload there) and queue its recorded replay.

    Returns the session and what the upload did (``Stored``): a longer version of a session the
    workspace holds updates that session and replays its runs again, instead of making a second
    one. Raises ``UploadRejected`` with a readable reason; nothing is left behind then.
    """
    if workspace is None:
        workspace = personal_workspace(owner)
    name = clean_upload_name(name)
    suffix = accepted_suffix(name) or ""
    stored_folder = f"uploads/{owner.pk}"
    # spooled beside its final place (or, with an object store, among this host's copies)
    partial = blobs.new_spool_name(blobs.spool_dir(f"{stored_folder}/upload"), suffix)
    final: Path | None = None
    stored_name = ""
    handed: Path | None = None
    try:
        try:
            sha256, size = _copy_hashing(content, partial)
        except UploadRejected as exc:
            exc.message = too_large_message(name)
            raise
        except OSError as exc:
            # disk full, quota, a read-only volume: the partial file goes (finally below)
            logger.error("could not store upload %s: %s", name, exc)
            raise UploadRejected(
                f"The server could not store {name} ({exc.strerror or exc}); nothing was "
                "kept. Try again later, or tell the administrator the disk may be full.",
                status=507,
            ) from None
        if size == 0:
            raise UploadRejected(f"{name} is empty.")
        existing = Transcript.objects.filter(workspace=workspace, sha256=sha256).first()
        if existing is not None:
            return existing, Stored.DUPLICATE
        over = quotas.refusal(owner=owner, workspace=workspace, name=name, size=size)
        if over is not None:
            raise UploadRejected(over, status=413)
        stored_name = f"{stored_folder}/{sha256}{suffix}"
        try:
            final = blobs.store_file(partial, stored_name)
        except Exception as exc:
            logger.exception("could not store upload %s", name)
            raise UploadRejected(
                f"The server could not store {name} ({exc}); nothing was kept. Try again "
                "later, or tell the administrator the storage may be full or unreachable.",
                status=507,
            ) from None
        # parsed once, here or in a child process (a large file: its parse's memory goes
        # back to the system before the replay); the parse is left for the first replay
        checked = check_upload(final, name=name, stored_name=stored_name, size=size, sha256=sha256)
        handed = checked.parsed
        fields = checked.fields
        scanned: set[int] = set()
        try:
            grown = _grown_from(workspace, fields["session_id"], final)
            # looked for before the row exists, so that its first replay is already stitched
            # (a longer version of a linked session starts as it did: the same link)
            continued = (
                grown.continues
                if grown is not None and grown.continues is not None
                else continuations.continued_session(
                    workspace.pk,
                    record_uuid=fields["continues_uuid"],
                    project=fields["project"],
                    session_id=fields["session_id"],
                    continuing=grown,
                    scanned=scanned,
                )
            )
            if continued is not None:
                fields["continues"] = continued
                # a stitched replay reads every file of the conversation: this parse is no use
                if handed is not None:
                    handed.unlink(missing_ok=True)
                    handed = None
            elif handed is not None:
                # before the run is queued: its worker, on any host, must find it
                mirror = blobs.session_cache_mirror()
                if mirror is not None:
                    mirror.store(handed.name, handed)
            if grown is not None:
                transcript = replace_with_longer(grown, fields)
                final = None  # the grown session's row now owns the file
                stored = Stored.GREW
                # the sessions continuing it read its file as their earlier history
                continuations.replay_with_new_history(transcript, itself=False)
            else:
                with transaction.atomic():
                    transcript = Transcript.objects.create(
                        owner=owner, workspace=workspace, **fields
                    )
                    run_services.start_run(owner=owner, transcript=transcript, mode="recorded")
                final = None  # committed: the file now belongs to the row
                stored = Stored.CREATED
        except IntegrityError:
            # Two uploads of the same bytes raced; the other one won and owns the file.
            final = None
            return Transcript.objects.get(workspace=workspace, sha256=sha256), Stored.DUPLICATE
        try:
            continuations.link_after_upload(transcript, checked.record_uuids, scanned)
        except Exception:  # the upload is stored and replayed: a failed link must not undo it
            logger.exception(
                "could not link session %s to the sessions it continues", transcript.pk
            )
        return transcript, stored
    finally:
        partial.unlink(missing_ok=True)
        if final is not None:
            blobs.delete(stored_name)
            if handed is not None:
                handed.unlink(missing_ok=True)
                mirror = blobs.session_cache_mirror()
                if mirror is not None:
                    mirror.discard(handed.name)


# --- an upload's check -------------------------------------------------------------------------
# The engine parses the stored file once, for the session's columns and to leave the parse for
# its first replay (the session cache); the parse is let go before that replay runs. A file of
# at least UPLOAD_CHECK_CHILD_MIN_BYTES is checked in a child process (``upload_check``, run
# as ``python -m``): the parse of a multi-gigabyte session takes about as much memory as its
# replay (1.4 GB at 2 GB), and a worker process that parsed it keeps much of that heap after
# freeing it (the allocator's arenas), which the replay it runs next adds to; a child's memory
# all goes back to the system when it exits. A smaller file is checked here (a child's start,
# about a second, would dominate). A child that dies (out of memory, killed) rejects the
# upload with that reason; ``store_upload`` then keeps nothing of it. The check itself is
# ``checking.check_here``, which the child runs without setting Django up; the request and
# answer cross as pickles of ``checking``'s classes between the parent and its child: never a
# user's bytes (the transcript's content is only ever parsed by the engine).

#: the child's module (``python -m``); named, not imported
CHECK_MODULE = "contextlab.transcripts.upload_check"


def check_upload(request_path: Path, **columns: Any) -> Checked:
    """``check_here`` of the stored file ``request_path``, in a child process when the file is
    at least ``UPLOAD_CHECK_CHILD_MIN_BYTES`` (0: never). ``columns``: ``CheckRequest``'s
    ``name``, ``stored_name``, ``size`` and ``sha256``."""
    threshold = settings.UPLOAD_CHECK_CHILD_MIN_BYTES
    size = request_path.stat().st_size
    with tempfile.TemporaryDirectory(prefix="contextlab-check-") as folder:
        request = CheckRequest(
            path=request_path,
            cache_dir=Path(settings.SESSION_CACHE_DIR),
            out=Path(folder) / "checked.pickle",
            **columns,
        )
        if not threshold or size < threshold:
            return check_here(request)
        return _check_in_child(request)


def child_command() -> list[str]:
    """The child's command line (a function: a test replaces it with one that dies)."""
    return [sys.executable, "-m", CHECK_MODULE]


def _check_in_child(request: CheckRequest) -> Checked:
    # the settings this process runs with (a worker's, a test run's; under
    # ``override_settings`` SETTINGS_MODULE is None, the environment still names them)
    module = os.environ.get("DJANGO_SETTINGS_MODULE") or settings.SETTINGS_MODULE
    env = dict(os.environ, DJANGO_SETTINGS_MODULE=module or "contextlab.settings")
    completed = subprocess.run(
        child_command(),
        input=pickle.dumps(request),
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        check=False,
    )
    answer: object = None
    if completed.returncode == 0 and request.out.exists():
        with request.out.open("rb") as fh:
            answer = pickle.load(fh)  # written by this module's child, not by a user
    if isinstance(answer, UploadRejected):
        raise answer
    if isinstance(answer, Checked):
        return answer
    # the child died (out of memory, killed) or crashed: the caller's cleanup, which the
    # rejection below triggers, removes the stored file
    stderr = completed.stderr.decode("utf-8", "replace")[-4000:]
    logger.error(
        "the check of upload %s stopped (exit status %s): %s",
        request.name,
        completed.returncode,
        stderr,
    )
    raise UploadRejected(
        f"{request.name}: the check of this file stopped before it finished "
        f"({_how_it_ended(completed.returncode)}); nothing was kept. Upload it again; if it "
        "fails again, the server may be short of memory for a file this large (the "
        "administrator's log has the details).",
        status=503,
    )


def _how_it_ended(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}" + (", out of memory?" if -returncode == signal.SIGKILL else "")
    return f"exit status {returncode}"


#: Longest session title, characters (the column's size).
MAX_TITLE = 200


def rename_transcript(*, transcript: Transcript, title: str) -> Transcript:
    """Set the session's title; an empty one falls back to the transcript's own (or its first
    prompt). Control characters become spaces; longer than ``MAX_TITLE`` is refused."""
    cleaned = CONTROL_CHARS.sub(" ", title).strip()
    if len(cleaned) > MAX_TITLE:
        raise UploadRejected(f"A title has at most {MAX_TITLE} characters ({len(cleaned)} given).")
    transcript.title = cleaned
    transcript.save(update_fields=["title"])
    return transcript


def delete_transcript(*, transcript: Transcript) -> None:
    """Delete a session, its runs and results, and (after commit) its stored file. The sessions
    that continued it start outside their files again, and replay so."""
    stored_name = transcript.file
    shared = Transcript.objects.filter(file=transcript.file).exclude(pk=transcript.pk).exists()
    later = list(transcript.continued_by.all())
    run_ids = list(transcript.runs.values_list("pk", flat=True))
    transcript.delete()  # their ``continues`` is set to null
    if not shared:
        transaction.on_commit(lambda: blobs.delete(stored_name))
    # the live replay states of its runs hold some of its text too
    transaction.on_commit(lambda: run_services.forget_live_states(run_ids))
    for each in later:
        each.continues = None
        continuations.replay_with_new_history(each)
        logger.info("session %s no longer continues a session (deleted)", each.pk)
