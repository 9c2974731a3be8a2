"""Worker-side: execute one run (load the session, replay it, store the result and status)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import partial
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from contextlab import engine
from contextlab.runs.models import Run, RunResult
from contextlab.summaries import runner as summary_fetch
from contextlab.summaries import services as summaries
from contextlab.transcripts.models import Transcript, TranscriptMessages

logger = logging.getLogger(__name__)

#: database errors worth retrying: the next attempt may well succeed
TRANSIENT_ERRORS = (OperationalError, InterfaceError)
#: at most one progress write per this many seconds
PROGRESS_EVERY = 0.5


def claim_run(run_id: int, *, resuming: bool = False) -> bool:
    """Mark the run running if it is queued (or abandoned); False if another worker owns it.

    This is what makes the task idempotent under acks_late: a redelivered message for a run
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
        fields.update(attempts=F("attempts") + 1, started_at=now, progress_done=0)
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


def progress_writer(run_id: int, *, write_first: bool = True) -> Callable[[int, int], None]:
    """Store replay progress on the run, at most every PROGRESS_EVERY seconds.

    ``write_first=False`` (a run going on after a summary, whose progress is stored already)
    waits PROGRESS_EVERY before the first write too.
    """
    last = 0.0 if write_first else time.monotonic()

    def progress(done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < PROGRESS_EVERY and done < total:
            return
        last = now
        Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
            progress_done=done, progress_total=total, heartbeat_at=timezone.now()
        )

    return progress


def fail(run_id: int, message: str) -> None:
    """Mark the run failed with a reason the user can read."""
    Run.objects.filter(pk=run_id).update(
        status=Run.Status.FAILED, error=message[:4000], finished_at=timezone.now()
    )


def load_session(transcript: Transcript, *, store_messages: bool = True) -> engine.Session:
    """The parsed, tokenized session (shared through the session cache) with its messages
    stored once for the explorer (``store_messages=False``: a resumed run, which stored them
    when it started). The caller closes ``session.upload``."""
    session = engine.load_session_cached(
        transcript.path,
        cache_dir=settings.SESSION_CACHE_DIR,
        name=transcript.name,
        sha256=transcript.sha256,
    )
    if store_messages and not TranscriptMessages.objects.filter(transcript=transcript).exists():
        TranscriptMessages.objects.update_or_create(
            transcript=transcript, defaults={"data": engine.messages_json(session)}
        )
    return session


def replay_run(run: Run, session: engine.Session, fetch_key: str = "") -> dict[str, Any]:
    """The engine's result JSON for ``run`` on an already-loaded session.

    A run with an LLM summarizer checkpoints where it waits for a summary and resumes from
    there; a checkpoint another engine version wrote is ignored (the replay starts over).
    With ``fetch_key`` (a fetch task), the backend is called for that one missing summary.
    """
    summarizer = summaries.summarizer_for(
        run, fetch=partial(summary_fetch.fetch_summary, only=fetch_key) if fetch_key else None
    )
    progress = progress_writer(run.pk, write_first=not fetch_key)
    saved = summaries.load_checkpoint(run) if summarizer is not None else None
    result = None
    if saved is not None and summarizer is not None:
        try:
            result = engine.resume(saved, session, summarizer=summarizer, progress=progress)
        except ValueError:
            logger.warning("run %s: checkpoint unusable; replaying from the start", run.pk)
    if result is None:
        result = engine.replay(
            session,
            engine.PipelineConfig.from_dict(run.config),
            mode=run.mode,
            preset_name=run.resolved_preset or run.preset,
            progress=progress,
            summarizer=summarizer,
            checkpoint=summarizer is not None,
        )
    data: dict[str, Any] = result.to_json()
    summaries.drop_checkpoint(run)
    return data


def store_result(run_id: int, data: dict[str, Any]) -> None:
    """Save the result and mark the run done, atomically."""
    total = len(data.get("requests") or [])
    with transaction.atomic():
        RunResult.objects.update_or_create(run_id=run_id, defaults={"data": data})
        Run.objects.filter(pk=run_id).update(
            status=Run.Status.DONE,
            summary=data.get("summary") or {},
            progress_done=total,
            progress_total=total,
            error="",
            finished_at=timezone.now(),
        )


def close_session(session: engine.Session) -> None:
    upload = getattr(session, "upload", None)
    if upload is not None:
        upload.close()


def _replay(run: Run, fetch_key: str) -> dict[str, Any]:
    session = load_session(run.transcript, store_messages=not fetch_key)
    try:
        return replay_run(run, session, fetch_key)
    finally:
        close_session(session)


def execute_run(run_id: int, fetch_key: str = "") -> None:
    """Replay run ``run_id`` and store the outcome. Safe to call twice.

    With ``fetch_key`` (a fetch task's), the backend is called for that missing summary when
    the replay reaches it; a message for a summary the run no longer waits for does nothing.
    Deterministic failures (a transcript the engine rejects, an engine error, the soft time
    limit, a stop such as the spend cap) are stored on the run with their reason; transient
    database errors propagate so the task can retry, after putting the run back in the queue.
    """
    if fetch_key and summaries.waits_for_another_summary(run_id, fetch_key):
        logger.info("run %s: waits for another summary than %s; skipping", run_id, fetch_key[:40])
        return
    if not claim_run(run_id, resuming=bool(fetch_key)):
        logger.info("run %s: not claimable (finished or running elsewhere); skipping", run_id)
        return
    run = Run.objects.select_related("transcript").get(pk=run_id)
    try:
        with heartbeat(run_id):
            data = _replay(run, fetch_key)
        store_result(run_id, data)
        logger.info("run %s: done (%s requests)", run_id, len(data.get("requests") or []))
    except engine.SummaryPending as pending:
        # the LLM call gets its own task, which resumes this replay from its checkpoint
        summaries.request_summary(run, pending)
        logger.info("run %s: waiting for summary %s", run_id, pending.key[:40])
    except engine.ReplayStopped as stop:
        fail(run_id, str(stop))
    except SoftTimeLimitExceeded:
        fail(
            run_id,
            f"The replay took longer than the time limit ({settings.CELERY_TASK_SOFT_TIME_LIMIT} s) "
            "and was stopped.",
        )
    except engine.TranscriptError as exc:
        fail(run_id, f"The transcript could not be read: {exc}")
    except TRANSIENT_ERRORS:
        logger.exception("run %s: transient database error; will retry", run_id)
        # if this fails too, the stale-run recovery requeues it later
        with contextlib.suppress(DatabaseError):
            Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
                status=Run.Status.QUEUED, heartbeat_at=None
            )
        raise
    except Exception as exc:
        logger.exception("run %s: replay failed", run_id)
        fail(run_id, f"The replay failed: {type(exc).__name__}: {exc}")
