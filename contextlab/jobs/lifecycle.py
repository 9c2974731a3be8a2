"""A run's life, in one module: every change of its status happens here.

A run is created queued, a worker claims it (running, with a heartbeat and progress), and it
ends done or failed. It goes back to queued when it parks to wait for an LLM summary (the
summary's fetch task resumes it from its checkpoint), when a transient database error hands
it back for a retry, or when its worker stopped heartbeating and it is recovered (failed
instead after ``RUN_MAX_ATTEMPTS``). Each move is one conditional ``UPDATE`` of the row, so two
workers never both own a run (a redelivered message, a recovery racing a slow worker).

Nothing here sends a task. The worker side gets one ``Outcome`` per replay from ``conclude``
(done, waiting for summary K, failed), and recovery returns the runs it changed; the tasks
module (``jobs.tasks``) queues what follows (a fetch task, a replay).
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import json
import logging
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypeAlias

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.models import User
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    connection,
    models,
    transaction,
)
from django.db.models import F, Q
from django.db.models.expressions import RawSQL
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError

from contextlab import blobs, engine
from contextlab.runs.models import (
    LIVE_PARTS_KEY,
    REQUESTS_IN_PARTS,
    VIEWS_IN_PARTS,
    Run,
    RunResult,
    RunResultPart,
    RunResultViewPart,
)
from contextlab.search import services as search
from contextlab.summaries import services as summaries
from contextlab.transcripts.models import Transcript

logger = logging.getLogger(__name__)

#: database errors worth retrying: the next attempt may well succeed
TRANSIENT_ERRORS = (OperationalError, InterfaceError)
#: at most one progress write per this many seconds
PROGRESS_EVERY = 0.5


@dataclass(frozen=True)
class Done:
    run_id: int
    requests: int


@dataclass(frozen=True)
class WaitingForSummary:
    """The run is queued again until summary ``key`` is fetched (by the task that follows)."""

    run_id: int
    key: str
    #: seconds before the fetch should look: another run is writing this summary
    retry_after: float = 0.0


@dataclass(frozen=True)
class Failed:
    run_id: int
    reason: str
    #: the task's soft time limit stopped the replay: a batch must not start another run
    out_of_time: bool = False


Outcome: TypeAlias = Done | WaitingForSummary | Failed


def create(
    *,
    owner: User,
    transcript: Transcript,
    mode: str,
    preset: str,
    overrides: dict[str, Any],
    config: dict[str, Any],
    resolved_preset: str,
    summarizer: str = "extractive",
    summary_model: str = "",
    spend_cap_usd: float | None = None,
) -> Run:
    """A new queued run of an already-resolved config, with its summarizer settings.

    The one way runs come to exist (single runs, comparisons and sweeps alike); the caller
    validated the request and queues the run's task after commit. A what-if run past the
    owner's RUN_MAX_ACTIVE_PER_USER raises ``engine.FieldError`` on ``runs`` (inside the
    caller's transaction, so a comparison or sweep is created whole or not at all); an
    upload's recorded run is never refused, so no upload is lost to the cap.
    """
    if mode != Run.Mode.RECORDED:
        check_active_cap(owner)
    with transaction.atomic():
        run = Run.objects.create(
            owner=owner,
            transcript=transcript,
            mode=mode,
            preset=preset,
            overrides=overrides,
            config=config,
            resolved_preset=resolved_preset,
            status=Run.Status.QUEUED,
        )
        summaries.configure_run(
            run=run, backend=summarizer, model=summary_model, spend_cap_usd=spend_cap_usd
        )
    return run


def check_active_cap(owner: User, adding: int = 1) -> None:
    """``engine.FieldError`` on ``runs`` when ``owner`` would have more than
    RUN_MAX_ACTIVE_PER_USER runs queued or running: one person cannot fill the queue for
    everyone (the sweep cap bounds one request; this bounds many)."""
    cap: int = settings.RUN_MAX_ACTIVE_PER_USER
    active = Run.objects.filter(
        owner=owner, status__in=(Run.Status.QUEUED, Run.Status.RUNNING)
    ).count()
    if active + adding > cap:
        raise engine.FieldError(
            "runs",
            f"you have {active} runs queued or running, and at most {cap} may be at a time; "
            "wait for some to finish or cancel some, then try again",
        )


def claim(run_id: int, *, resuming: bool = False) -> bool:
    """Mark the run running if it is queued (or abandoned); False if another worker owns it.

    This is what makes the tasks idempotent under acks_late: a redelivered message for a run
    that is done, failed or running elsewhere does nothing. ``resuming`` (a run going on after
    a summary it waited for) keeps the start time, progress and attempt count: ``attempts``
    counts starts and restarts after a crash, which is what RUN_MAX_ATTEMPTS limits.
    """
    now = timezone.now()
    stale = now - timedelta(seconds=settings.RUN_STALE_AFTER)
    claimable = Q(status=Run.Status.QUEUED) | Q(status=Run.Status.RUNNING, heartbeat_at__lt=stale)
    fields: dict[str, Any] = {
        "status": Run.Status.RUNNING,
        "heartbeat_at": now,
        "error": "",
        "updated_at": now,
    }
    if not resuming:
        fields.update(
            attempts=F("attempts") + 1,
            started_at=now,
            progress_done=0,
            progress_stage=Run.Stage.NONE,
        )
    updated = Run.objects.filter(claimable, pk=run_id).update(**fields)
    return updated == 1


@contextmanager
def heartbeat(run_id: int) -> Iterator[None]:
    """Refresh ``heartbeat_at`` from a side thread while the replay runs."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(settings.RUN_HEARTBEAT_EVERY):
                Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
                    heartbeat_at=timezone.now()
                )
        except DatabaseError:
            logger.exception("run %s: heartbeat failed", run_id)
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=beat, name=f"heartbeat-{run_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


class ProgressClock:
    """When a run's progress was last written, shared by the stages of one replay (counting
    tokens, then replaying): a run writes its progress at most every PROGRESS_EVERY seconds
    whatever its stage, the first time PROGRESS_EVERY after it started. A run shorter than
    that writes none: its claim stored progress 0 and its ``finish`` the whole, which is all
    its pages could show (each write is a transaction on the database every worker shares:
    a 0.2 s run wrote four, as many as the rest of its work)."""

    def __init__(self) -> None:
        self.last = time.monotonic()


def progress_writer(
    run_id: int, *, stage: str = Run.Stage.REPLAYING, clock: ProgressClock | None = None
) -> Callable[[int, int], None]:
    """Store progress of ``stage`` on the run, at most every PROGRESS_EVERY seconds of
    ``clock`` (default: one started now); a run cancelled meanwhile stops the work
    (``engine.ReplayStopped``) at the next write."""
    clock = clock or ProgressClock()

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - clock.last < PROGRESS_EVERY:
            return
        clock.last = now
        updated = Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
            progress_done=done,
            progress_total=total,
            progress_stage=stage,
            heartbeat_at=timezone.now(),
        )
        if not updated:
            stopped = Run.objects.filter(pk=run_id, status=Run.Status.FAILED).first()
            if stopped is not None:
                # cancelled while it ran: stop here rather than replay on for nobody
                raise engine.ReplayStopped(stopped.error or "The run was cancelled.")

    return progress


#: Replays of a run whose session grew while it replayed, before its result is stored anyway
#: (a live session appended to faster than it replays; the next append replays it again).
MAX_REPLAYS_OF_GROWN = 5


class SessionGrew(Exception):
    """The session's file changed while the run replayed it: the result is of the old one."""


def conclude(
    run: Run,
    replay: Callable[[], dict[str, Any]],
    current: Callable[[], bool] | None = None,
    provisional: Callable[[], bool] | None = None,
) -> Outcome:
    """Replay a claimed run under its heartbeat and record how it ended: the one path from
    a replay to a stored outcome, for single runs and batches alike.

    Deterministic failures (a transcript the engine rejects, an engine error, the soft time
    limit, a stop such as the spend cap) are stored on the run with their reason; a missing
    LLM summary parks it. Transient database errors put the run back in the queue and
    propagate, so the task can retry.

    ``current`` (called inside the transaction that stores the result, after locking what it
    reads) says whether the session is still the one replayed: a live session that grew
    meanwhile is replayed again (an append's ``replay_again`` leaves running runs alone), up
    to ``MAX_REPLAYS_OF_GROWN`` times. ``replay`` may raise ``SessionGrew`` too (the file it
    was to read was replaced by the grown one before it read it): it is called again, within
    the same count. ``provisional`` (asked once the replay returned) says whether the result
    went on from an earlier replay's state (``Run.provisional``).
    """
    run_id = run.pk
    try:
        with heartbeat(run_id):
            for attempt in range(MAX_REPLAYS_OF_GROWN):
                last = attempt == MAX_REPLAYS_OF_GROWN - 1
                try:
                    data = replay()
                    return finish(
                        run_id,
                        data,
                        current=None if last else current,
                        provisional=provisional() if provisional is not None else False,
                    )
                except SessionGrew:
                    logger.info("run %s: the session grew while it replayed; again", run_id)
            # only a replay that never got to read its file ends here (``finish`` stores the
            # last attempt's result whatever the session became)
            return fail(
                run_id,
                f"The session grew {MAX_REPLAYS_OF_GROWN} times before its replay could read "
                "it; its next append replays it again.",
            )
    except engine.SummaryPending as pending:
        # the LLM call gets its own task, which resumes this replay from its checkpoint
        return park(run, pending)
    except engine.ReplayStopped as stop:
        return fail(run_id, str(stop))
    except SoftTimeLimitExceeded:
        return fail(
            run_id,
            f"The replay took longer than the time limit ({settings.CELERY_TASK_SOFT_TIME_LIMIT} s) "
            "and was stopped.",
            out_of_time=True,
        )
    except engine.TranscriptError as exc:
        return fail(run_id, f"The transcript could not be read: {exc}")
    except TRANSIENT_ERRORS:
        logger.exception("run %s: transient database error; will retry", run_id)
        requeue(run_id)
        raise
    except DatabaseError:
        # its text quotes SQL and data: the log has it, the user gets what happened
        logger.exception("run %s: the database refused the result", run_id)
        return fail(
            run_id,
            "The replay finished but its result could not be stored (a database error; "
            "the server log has the details).",
        )
    except Exception as exc:
        logger.exception("run %s: replay failed", run_id)
        return fail(run_id, f"The replay failed: {type(exc).__name__}: {exc}")


#: The parts of the live results this worker stored last, by run (``_store_live_result``):
#: the head's ``LIVE_PARTS_KEY`` value, each part's requests, as stored, and each view
#: list's parts (``_store_live_views``: their entries copied, as stored).
_LIVE_PARTS: OrderedDict[int, tuple[str, list[list[Any]], dict[str, list[list[Any]]]]] = (
    OrderedDict()
)
#: entries of a live result's view list (``views["transforms"]``, ``views["synthetic"]``) per
#: ``RunResultViewPart``: an append closes few earlier transforms (their ``last``), so most
#: parts stay as stored. Synthetic messages hold texts (a 64 MB session's 340 are 1 MB of
#: JSON): 64 of them are about 200 KB, what an append that adds one writes again
LIVE_VIEW_PART_ENTRIES = 64
#: live runs whose parts a worker keeps in memory at most (a 64 MB session's: about 20 MB)
LIVE_PARTS_KEPT = 4


def _store_result(run_id: int, data: dict[str, Any], *, live: bool = False) -> None:
    """``RunResult`` of ``run_id`` is ``data`` (replaced when there is one). Requests of more
    than ``RUN_RESULT_PART_CHARS`` characters of JSON are stored in parts of at most that
    (``RunResultPart``: one value of every request would not fit PostgreSQL's ``jsonb`` past
    sessions of about 4.5 GB); fewer, in the row as they always were. On PostgreSQL streamed
    (``copy_json_row``, ``copy_json_parts``), elsewhere stored part by part: never held as one
    JSON string. ``live`` (a live session's provisional result, ``_store_live_result``):
    stored in parts of ``RUN_RESULT_LIVE_PART_REQUESTS`` requests, and the parts the last
    store of this run left unchanged are kept."""
    requests = data.get("requests")
    if live and isinstance(requests, list) and requests:
        _store_live_result(run_id, data, requests)
        return
    _LIVE_PARTS.pop(run_id, None)
    head = data
    parts: Iterator[str] = iter(())
    if isinstance(requests, list):
        texts = engine.json_list_parts(requests, settings.RUN_RESULT_PART_CHARS)
        first = list(itertools.islice(texts, 2))
        if len(first) > 1:
            head = {
                (REQUESTS_IN_PARTS if key == "requests" else key): (
                    len(requests) if key == "requests" else value
                )
                for key, value in data.items()
            }
            parts = itertools.chain(first, texts)
        elif first:  # one part: its text is the requests' JSON, not encoded again
            head = {**data, "requests": engine.JsonText(first[0])}
    write = partial(engine.write_json, head)
    if connection.vendor != "postgresql":
        RunResult.objects.update_or_create(run_id=run_id, defaults={"data": json_text(write)})
        RunResultPart.objects.filter(result_id=run_id).delete()
        RunResultViewPart.objects.filter(result_id=run_id).delete()
        for seq, text in enumerate(parts):
            RunResultPart.objects.create(result_id=run_id, seq=seq, data=json_value(text))
        return
    RunResult.objects.filter(run_id=run_id).delete()  # and its parts
    copy_json_row(RunResult, run_id, write)
    copy_json_parts(RunResultPart, run_id, parts, owner_field="result")


def _store_live_result(run_id: int, data: dict[str, Any], requests: list[Any]) -> None:
    """Store a live session's provisional result in parts of a fixed number of requests: an
    append changes none of its earlier rows (``engine.continue_live``), so the parts this
    worker stored at the last append, when the database still holds them (the head's
    ``LIVE_PARTS_KEY``: no other worker stored the run since) and their requests are equal,
    are kept; only the head, the last of them and the new ones are written. Encoding and
    writing a 64 MB session's 2.5 MB of requests at each append grew with the session."""
    size = settings.RUN_RESULT_LIVE_PART_REQUESTS
    parts = [requests[at : at + size] for at in range(0, len(requests), size)]
    marker = f"live-{uuid.uuid4().hex}"  # a JSON string, never taken for a number
    kept = 0
    remembered = _LIVE_PARTS.get(run_id)
    stored = (
        RunResult.objects.filter(run_id=run_id)
        .values_list(f"data__{LIVE_PARTS_KEY}", flat=True)
        .first()
    )
    if remembered is not None and stored == remembered[0]:
        # full parts equal to the ones stored (each a few hundred requests: a C compare)
        for old, new in zip(remembered[1], parts, strict=False):
            if len(old) != size or len(new) != size or old != new:
                break
            kept += 1
    head = {
        (REQUESTS_IN_PARTS if key == "requests" else key): (
            len(requests) if key == "requests" else value
        )
        for key, value in data.items()
    }
    head[LIVE_PARTS_KEY] = marker
    views = _view_lists(data.get("views"))
    if views is not None:
        head = {
            (VIEWS_IN_PARTS if key == "views" else key): (
                {name: len(entries) for name, entries in views.items()} if key == "views" else value
            )
            for key, value in head.items()
        }
    write = partial(engine.write_json, head)
    texts = (json.dumps(part) for part in parts[kept:])
    RunResultPart.objects.filter(result_id=run_id, seq__gte=kept).delete()
    if kept:
        RunResult.objects.filter(run_id=run_id).update(data=json_text(write))
    elif connection.vendor == "postgresql":
        RunResult.objects.filter(run_id=run_id).delete()  # and its parts
        copy_json_row(RunResult, run_id, write)
    else:
        RunResult.objects.update_or_create(run_id=run_id, defaults={"data": json_text(write)})
    # the view parts this worker stored last, when the database still holds them as stored
    stored_views = remembered[2] if remembered is not None and stored == remembered[0] else None
    if stored_views is not None and not kept and connection.vendor == "postgresql":
        stored_views = None  # the head row was written anew: its parts went with it
    view_parts = _store_live_views(run_id, views or {}, stored_views)
    if connection.vendor == "postgresql":
        copy_json_parts(RunResultPart, run_id, texts, kept, owner_field="result")
    else:
        for seq, text in enumerate(texts, start=kept):
            RunResultPart.objects.create(result_id=run_id, seq=seq, data=json_value(text))
    # remembered once the transaction that stores them commits (a rollback leaves the marker
    # stored before, which then is not this one)
    transaction.on_commit(partial(_remember_live_parts, run_id, marker, parts, view_parts))


def _view_lists(views: Any) -> dict[str, list[Any]] | None:
    """A result's ``views`` when every value is a list of entries (stored in parts)."""
    if not isinstance(views, dict) or not views:
        return None
    if not all(isinstance(entries, list) for entries in views.values()):
        return None
    return views


def _store_live_views(
    run_id: int, views: dict[str, list[Any]], stored: dict[str, list[list[Any]]] | None
) -> dict[str, list[list[Any]]]:
    """Store each list of a live result's ``views`` in ``RunResultViewPart`` rows of
    ``LIVE_VIEW_PART_ENTRIES`` entries, writing only the parts that differ from ``stored``
    (the parts this worker stored last, as the database holds them; None: unknown, every
    part written). An append adds entries at the end and closes a few earlier transforms;
    writing the whole log in the head (about 1 MB of JSON at 64 MB) grew with the session.
    Returns the parts as stored: their entries copied, as a later replay may change the
    engine's (a transform's ``last``)."""
    size = LIVE_VIEW_PART_ENTRIES
    if stored is None:
        RunResultViewPart.objects.filter(result_id=run_id).delete()
        stored = {}
    out: dict[str, list[list[Any]]] = {}
    for kind, entries in views.items():
        old = stored.get(kind) or []
        new = [entries[at : at + size] for at in range(0, len(entries), size)]
        changed = [seq for seq, part in enumerate(new) if seq >= len(old) or old[seq] != part]
        if changed or len(old) > len(new):
            RunResultViewPart.objects.filter(result_id=run_id, kind=kind).filter(
                Q(seq__in=changed) | Q(seq__gte=len(new))
            ).delete()
        as_stored = dict(enumerate(old))
        for seq in changed:
            RunResultViewPart.objects.create(
                result_id=run_id, kind=kind, seq=seq, data=json_value(json.dumps(new[seq]))
            )
            as_stored[seq] = [
                dict(entry) if isinstance(entry, dict) else entry for entry in new[seq]
            ]
        out[kind] = [as_stored[seq] for seq in range(len(new))]
    gone = set(stored) - set(views)
    if gone:
        RunResultViewPart.objects.filter(result_id=run_id, kind__in=gone).delete()
    return out


def _remember_live_parts(
    run_id: int, marker: str, parts: list[list[Any]], view_parts: dict[str, list[list[Any]]]
) -> None:
    _LIVE_PARTS[run_id] = (marker, parts, view_parts)
    _LIVE_PARTS.move_to_end(run_id)
    while len(_LIVE_PARTS) > LIVE_PARTS_KEPT:
        _LIVE_PARTS.popitem(last=False)


def json_text(write: Callable[[engine.TextSink], object]) -> Any:
    """A JSON field's value given as the JSON text ``write`` writes, for a database without
    ``COPY`` (SQLite): written to a spool file, then read back as one string, so the value is
    held once as text, not as Python objects as well as the text ``json.dumps`` makes."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        write(spool)
        spool.seek(0)
        return json_value(spool.read())


def json_value(text: str) -> Any:
    """A JSON field's value given as its JSON text (not parsed into Python objects)."""
    return RawSQL("%s", (text,), output_field=models.JSONField())


def copy_json_row(
    model: type[models.Model], pk: object, write: Callable[[engine.TextSink], object]
) -> None:
    """Insert the row of ``model`` (a primary key and a JSON field ``data``) whose JSON text
    ``write`` writes, streamed to PostgreSQL piece by piece (``COPY``): a worker never holds a
    large session's stored JSON as one string (nor the copies a query's parameters make of
    it). ``IntegrityError`` when the row exists."""
    meta = model._meta
    data = meta.get_field("data")
    assert isinstance(data, models.JSONField)
    columns = f"{meta.pk.column}, {data.column}"
    statement = f"COPY {meta.db_table} ({columns}) FROM STDIN"
    # psycopg's own cursor (Django's has no COPY), its errors made Django's; in the caller's
    # transaction without a savepoint of its own (two round trips, and every caller lets a
    # failed COPY end its whole transaction)
    with (
        transaction.atomic(savepoint=False),
        connection.cursor() as cursor,
        connection.wrap_database_errors,
        cursor.cursor.copy(statement) as copy,
    ):
        copy.write(f"{pk}\t")
        write(_CopyField(copy))
        copy.write("\n")


def copy_json_parts(
    model: type[models.Model],
    owner: object,
    parts: Iterable[str],
    start: int = 0,
    *,
    owner_field: str = "messages",
) -> None:
    """Insert a row of ``model`` (a foreign key ``owner_field``, a ``seq`` and a JSON field
    ``data``) for each JSON text of ``parts``, numbered from ``start``, streamed to
    PostgreSQL in one ``COPY``: one part's text is held at a time. No parts, no ``COPY``
    (a result in one part has none: a round trip saved)."""
    texts = iter(parts)
    first = next(texts, None)
    if first is None:
        return
    meta = model._meta
    columns = []
    for name in (owner_field, "seq", "data"):
        field = meta.get_field(name)
        assert isinstance(field, models.Field)
        columns.append(str(field.column))
    with (
        transaction.atomic(savepoint=False),  # as copy_json_row's
        connection.cursor() as cursor,
        connection.wrap_database_errors,
        cursor.cursor.copy(f"COPY {meta.db_table} ({', '.join(columns)}) FROM STDIN") as copy,
    ):
        sink = _CopyField(copy)
        for seq, text in enumerate(itertools.chain((first,), texts), start=start):
            copy.write(f"{owner}\t{seq}\t")
            sink.write(text)
            copy.write("\n")


class _CopyField:
    """A text file over one field of a ``COPY … FROM STDIN`` row in text format. The JSON is
    ASCII (``json.dumps``' escapes), so its backslashes are all there is to escape."""

    def __init__(self, copy: Any) -> None:
        self._copy = copy

    def write(self, text: str) -> None:
        self._copy.write(text.replace("\\", "\\\\"))


def finish(
    run_id: int,
    data: dict[str, Any],
    *,
    current: Callable[[], bool] | None = None,
    provisional: bool = False,
) -> Done:
    """Save the result and mark the run done, atomically; its checkpoint is no longer needed.
    ``SessionGrew`` (nothing stored) when ``current`` says the session changed.
    ``provisional``: the result went on from a live session's earlier replay."""
    total = len(data.get("requests") or [])
    with transaction.atomic():
        if current is not None and not current():
            raise SessionGrew(run_id)
        _store_result(run_id, data, live=provisional)
        Run.objects.filter(pk=run_id).update(
            status=Run.Status.DONE,
            summary=data.get("summary") or {},
            progress_done=total,
            progress_total=total,
            progress_stage=Run.Stage.REPLAYING,
            error="",
            finished_at=timezone.now(),
            provisional=provisional,
            live_continue=False,
            engine_version=engine.ENGINE_VERSION,
        )
    if summaries.may_checkpoint(run_id):
        # asked first: a query on the open connection, where a delete of a checkpoint that
        # never was is a request to the object store on every run
        blobs.delete(checkpoint_name(run_id))
    logger.info("run %s: done (%s requests)", run_id, total)
    try:
        # the session's first stored replay numbers its blocks for search
        search.index_after_run(run_id, data.get("requests") or [])
    except Exception:
        # the run is done all the same; the periodic recovery indexes the session later
        logger.exception("run %s: its session could not be indexed for search", run_id)
    return Done(run_id, total)


def store_findings(run_id: int, finished_at: datetime, found: dict[str, Any]) -> bool:
    """Put ``found`` (keys of the result JSON) in the run's stored result, if it still is
    the result stored at ``finished_at`` (no newer version stored meanwhile; the run's row
    locked, as ``finish`` locks it). The run is marked finished again now, so the pages and
    caches named by its result's version (``runs.live.result_version``) are made again with
    them. False when the result was not that one."""
    with transaction.atomic():
        if not (
            Run.objects.select_for_update()
            .filter(pk=run_id, status=Run.Status.DONE, finished_at=finished_at)
            .exists()
        ):
            return False
        row = RunResult.objects.select_for_update().filter(run_id=run_id).first()
        if row is None:
            return False
        row.data = {**row.data, **found}
        row.save(update_fields=["data"])
        Run.objects.filter(pk=run_id).update(finished_at=timezone.now())
    return True


def fail(run_id: int, message: str, *, out_of_time: bool = False) -> Failed:
    """Mark the run failed with a reason the user can read."""
    Run.objects.filter(pk=run_id).update(
        status=Run.Status.FAILED, error=message[:4000], finished_at=timezone.now()
    )
    return Failed(run_id, message, out_of_time=out_of_time)


def park(run: Run, pending: engine.SummaryPending) -> WaitingForSummary:
    """Put the run back in the queue until the summary it needs is fetched.

    The replay's state at that point is kept in the storage, so the fetch task (on any worker
    host) resumes there (and rebuilds the summary's input) instead of replaying the session
    from the start.
    """
    if pending.checkpoint is not None:
        # a checkpoint that cannot be written only costs the resume: the replay starts over
        blobs.write_bytes(checkpoint_name(run.pk), _checkpoint_owner(run) + pending.checkpoint)
    with transaction.atomic():
        summaries.mark_waiting(run.pk, pending.key)
        # update() skips auto_now: the resend period (queued_too_long) counts from parking
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.QUEUED, heartbeat_at=None, updated_at=timezone.now()
        )
    logger.info("run %s: waiting for summary %s", run.pk, pending.key[:40])
    return WaitingForSummary(run.pk, pending.key, pending.retry_after)


def requeue(run_id: int) -> None:
    """Hand a running run back to the queue (its task retries after a transient error)."""
    # if this fails too, the stale-run recovery requeues it later
    with contextlib.suppress(DatabaseError):
        Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
            status=Run.Status.QUEUED, heartbeat_at=None
        )


def recover_stale(*, now: datetime | None = None) -> list[Run]:
    """Requeue (or fail, after RUN_MAX_ATTEMPTS) runs whose worker stopped heartbeating.

    A worker killed mid-run leaves its row "running" with a heartbeat that no longer moves;
    this puts such rows back in the queue or records why they failed. Returns the changed
    runs; the caller sends the requeued ones (status queued) to a worker.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.RUN_STALE_AFTER)
    stale = Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=cutoff)
    changed: list[Run] = []
    for run in stale:
        still_stale = Run.objects.filter(
            pk=run.pk, status=Run.Status.RUNNING, heartbeat_at__lt=cutoff
        )
        if run.attempts < settings.RUN_MAX_ATTEMPTS:
            updated = still_stale.update(
                status=Run.Status.QUEUED,
                progress_done=0,
                progress_stage=Run.Stage.NONE,
                error="",
                heartbeat_at=None,
                updated_at=now,
            )
            if updated:
                logger.warning("run %s: worker stopped heartbeating; requeued", run.pk)
        else:
            message = (
                f"The worker stopped responding (killed or crashed) {run.attempts} time(s) "
                "while replaying this session; the run was abandoned."
            )
            updated = still_stale.update(
                status=Run.Status.FAILED, error=message, finished_at=now, updated_at=now
            )
            if updated:
                logger.warning("run %s: abandoned after %s attempts", run.pk, run.attempts)
        if updated:
            run.refresh_from_db()
            changed.append(run)
    return changed


def queued_too_long(*, now: datetime | None = None) -> list[int]:
    """Queued runs whose task may have been lost, to send again: queued for longer than
    RUN_QUEUED_RESEND_AFTER. A run parked for a summary counts too: its fetch task can be lost
    the same ways (the broker down when it was sent, a frozen pool); ``pending_summaries``
    says which of them to send their fetch task rather than a replay.

    A task is lost when the broker drops it or the worker that took it froze (a prefork pool
    whose child was killed while idle stops taking work); the run then stays queued forever,
    since heartbeat recovery only sees running runs. Sending it again is safe: ``claim`` lets
    one message replay it and makes every other one a no-op. The status does not change; the
    runs' ``updated_at`` moves to now, so each is sent again at most once per period.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.RUN_QUEUED_RESEND_AFTER)
    due = Run.objects.filter(status=Run.Status.QUEUED, updated_at__lt=cutoff)
    ids = list(due.values_list("pk", flat=True)[:1000])
    # conditional: a run claimed meanwhile is not sent again
    Run.objects.filter(pk__in=ids, status=Run.Status.QUEUED, updated_at__lt=cutoff).update(
        updated_at=now
    )
    if ids:
        logger.warning(
            "%s run(s) queued longer than %s s; sending them again",
            len(ids),
            settings.RUN_QUEUED_RESEND_AFTER,
        )
    return ids


def queued_ids() -> list[int]:
    """Every queued run, those parked for a summary included."""
    return list(Run.objects.filter(status=Run.Status.QUEUED).values_list("pk", flat=True))


def pending_summaries(run_ids: list[int]) -> dict[int, str]:
    """{run id: summary key} of those runs that are parked for a summary: what they need sent
    is the fetch task of that summary (it resumes the run from its checkpoint)."""
    parked = Run.objects.filter(pk__in=run_ids, summarizer_settings__pending_key__gt="")
    return dict(parked.values_list("pk", "summarizer_settings__pending_key"))


def mark_unsent(run_ids: list[int]) -> None:
    """Queued runs whose task could not be published (the broker was down): due for sending
    again at once, rather than after RUN_QUEUED_RESEND_AFTER (``queued_too_long`` picks them
    up at the next recovery pass)."""
    due = timezone.now() - timedelta(seconds=settings.RUN_QUEUED_RESEND_AFTER + 1)
    # a database down too: the run is still queued, and sent after the normal period
    with contextlib.suppress(DatabaseError):
        Run.objects.filter(pk__in=run_ids, status=Run.Status.QUEUED).update(updated_at=due)


#: What publishing raises when the broker cannot be reached (connection refused, DNS, timeout).
BROKER_DOWN = (KombuOperationalError, ConnectionError, OSError)

#: Set when a publish failed in this request (or task): the middleware tells the person that
#: their work is saved and queued, and will start once the task queue is back.
queue_unreachable: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "queue_unreachable", default=False
)


def publish(send: Callable[[], object], run_ids: list[int]) -> bool:
    """Call ``send`` (a task's ``delay``); False, logged, if the broker is unreachable.

    The broker being down must not lose what was just committed, nor turn the request that
    committed it into a 500: the runs stay queued, marked due for sending again, and the
    periodic recovery (Celery beat, every RUN_RECOVER_EVERY seconds) sends them once the
    broker answers.
    """
    try:
        send()
    except BROKER_DOWN as exc:
        queue_unreachable.set(True)
        mark_unsent(run_ids)
        logger.warning(
            "run(s) %s: the task queue is unreachable (%s); they stay queued and are sent "
            "again within %s s of the queue coming back",
            ",".join(map(str, run_ids[:20])),
            exc,
            settings.RUN_RECOVER_EVERY,
        )
        return False
    return True


def cancel(run_ids: list[int], reason: str) -> list[int]:
    """Stop runs that are queued (or parked for a summary) or running: they end failed with
    ``reason``. Returns the ids stopped.

    A queued run's task then finds nothing to claim and does nothing (so no message needs
    revoking); a running replay notices at its next progress write (within PROGRESS_EVERY
    seconds) and stops.
    """
    now = timezone.now()
    active = (Run.Status.QUEUED, Run.Status.RUNNING)
    ids = list(Run.objects.filter(pk__in=run_ids, status__in=active).values_list("pk", flat=True))
    Run.objects.filter(pk__in=ids, status__in=active).update(
        status=Run.Status.FAILED,
        error=reason[:4000],
        finished_at=now,
        updated_at=now,
        heartbeat_at=None,
    )
    if ids:
        logger.info("cancelled %s run(s): %s", len(ids), reason[:80])
    return ids


def replay_again(run_ids: list[int], *, live: bool = False) -> list[int]:
    """Put finished runs (done or failed) back in the queue, to replay from the start: their
    session's file grew. Their results go; queued and running runs are left as they are (a
    queued one reads the new file when a worker claims it). Returns the ids requeued.
    ``live`` (a live session's append): each goes on from its last replay's state where it
    has one (``Run.live_continue``); else each is replayed whole."""
    finished = (Run.Status.DONE, Run.Status.FAILED)
    now = timezone.now()
    with transaction.atomic():
        ids = list(
            Run.objects.select_for_update()
            .filter(pk__in=run_ids, status__in=finished)
            .values_list("pk", flat=True)
        )
        # a live append keeps the results (no reader reads a run's result until it is done
        # again): the update that goes on from the last state keeps their unchanged parts
        if not live:
            RunResult.objects.filter(run_id__in=ids).delete()
        Run.objects.filter(pk__in=ids).update(
            status=Run.Status.QUEUED,
            live_continue=live,
            provisional=False,
            error="",
            summary={},
            progress_done=0,
            progress_total=0,
            progress_stage=Run.Stage.NONE,
            attempts=0,
            started_at=None,
            finished_at=None,
            heartbeat_at=None,
            updated_at=now,
        )
    for run_id in ids:
        blobs.delete(checkpoint_name(run_id))
    return ids


def finalize_ended_live(*, now: datetime | None = None) -> list[int]:
    """Runs whose result went on from an earlier state (provisional) on a session with no
    append for ``LIVE_FINAL_AFTER`` seconds: the session ended, so they are queued to replay
    whole (``replay_again``), which replaces the provisional result. The ids queued."""
    now = now or timezone.now()
    ended = now - timedelta(seconds=settings.LIVE_FINAL_AFTER)
    ids = list(
        Run.objects.filter(
            status=Run.Status.DONE, provisional=True, transcript__appended_at__lt=ended
        ).values_list("pk", flat=True)[:1000]
    )
    if ids:
        logger.info("%s provisional run(s) of ended live sessions: replayed whole", len(ids))
    return replay_again(ids) if ids else []


def live_state_name(run_id: int) -> str:
    """The stored name of a live session's run's last replay state (``engine.replay_live``):
    its next append's replay goes on from it."""
    return f"checkpoints/run-{run_id}.live.pickle"


def save_live_state(run: Run, state: bytes) -> None:
    # the owner's line written before the state, not joined to it (megabytes at each append)
    blobs.write_bytes(live_state_name(run.pk), state, head=_checkpoint_owner(run))


def load_live_state(run: Run) -> bytes | None:
    """The state ``save_live_state`` kept for this very run, else None (as ``load_checkpoint``)."""
    return blobs.read_bytes_after(live_state_name(run.pk), _checkpoint_owner(run))


def live_findings_name(run_id: int) -> str:
    """The stored name of a live session's run's last findings (``LaterFindings``): an
    append deletes the run's result, and its next version carries these until it stores its
    own."""
    return f"checkpoints/run-{run_id}.live-findings.json"


def save_live_findings(run: Run, found: dict[str, Any]) -> None:
    owner = _checkpoint_owner(run)
    blobs.write_bytes(live_findings_name(run.pk), owner + json.dumps(found).encode())


def load_live_findings(run: Run) -> dict[str, Any]:
    """The findings ``save_live_findings`` kept for this very run, else none."""
    data = blobs.read_bytes(live_findings_name(run.pk))
    owner = _checkpoint_owner(run)
    if data is None or not data.startswith(owner):
        return {}
    found: dict[str, Any] = json.loads(data[len(owner) :])
    return found


def checkpoint_name(run_id: int) -> str:
    """The stored name under which a run waiting for a summary keeps its replay state (in the
    storage every worker host reads: its fetch task may run on another host)."""
    return f"checkpoints/run-{run_id}.pickle"


def load_checkpoint(run: Run) -> bytes | None:
    """The replay state ``park`` kept for this very run, else None.

    The file is named by the run's id, and SQLite hands out the id of a deleted newest row
    again: a checkpoint left by a deleted run must never resume another run's replay. So each
    checkpoint starts with its run's identity, and one written for another run is ignored.
    """
    data = blobs.read_bytes(checkpoint_name(run.pk))
    owner = _checkpoint_owner(run)
    if data is None or not data.startswith(owner):
        return None
    return data[len(owner) :]


def _checkpoint_owner(run: Run) -> bytes:
    return f"contextlab-checkpoint run={run.pk} created={run.created_at.isoformat()}\n".encode()
