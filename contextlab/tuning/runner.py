"""Worker-side: replay several runs of the same sessions, parsing each session once.

A sweep or comparison queues its new runs in batches; for each run this claims it (the same
claim as ``runs.runner``, so a run is replayed once whichever task gets it), replays it with
the already-loaded session and stores the result exactly as a single run does. The loaded
session keeps its token counts, so the second and later configs skip parsing and tokenizing.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from contextlab import engine
from contextlab.runs import runner as run_runner
from contextlab.runs.models import Run, RunResult
from contextlab.transcripts.models import Transcript, TranscriptMessages

logger = logging.getLogger(__name__)


def _progress_writer(run_id: int) -> Callable[[int, int], None]:
    last = 0.0

    def progress(done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < run_runner.PROGRESS_EVERY and done < total:
            return
        last = now
        Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
            progress_done=done, progress_total=total, heartbeat_at=timezone.now()
        )

    return progress


def _fail(run_id: int, message: str) -> None:
    Run.objects.filter(pk=run_id).update(
        status=Run.Status.FAILED, error=message[:4000], finished_at=timezone.now()
    )


def _store(run_id: int, data: dict[str, Any]) -> None:
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


def _load(transcript: Transcript) -> engine.Session:
    session = engine.load_session(transcript.path, name=transcript.name)
    if not TranscriptMessages.objects.filter(transcript=transcript).exists():
        TranscriptMessages.objects.update_or_create(
            transcript=transcript, defaults={"data": engine.messages_json(session)}
        )
    return session


def unstarted(run_ids: list[int]) -> list[int]:
    """The runs of a batch still queued (after the batch was stopped)."""
    return list(
        Run.objects.filter(pk__in=run_ids, status=Run.Status.QUEUED).values_list("pk", flat=True)
    )


def execute_batch(run_ids: list[int]) -> None:
    """Replay the runs in order, loading each session once. Safe to call twice.

    Failures are per run, as in ``runs.runner.execute_run``: a deterministic one is stored on
    that run and the batch goes on; a transient database error requeues the current run and
    propagates so the task retries (finished runs are then skipped). The soft time limit fails
    the current run and propagates, so the task can hand the rest to single-run tasks.
    """
    sessions: dict[int, engine.Session] = {}
    try:
        for run_id in run_ids:
            if not run_runner.claim_run(run_id):
                logger.info("run %s: not claimable (finished or running elsewhere)", run_id)
                continue
            run = Run.objects.select_related("transcript").get(pk=run_id)
            try:
                with run_runner.heartbeat(run_id):
                    session = sessions.get(run.transcript_id)
                    if session is None:
                        session = sessions[run.transcript_id] = _load(run.transcript)
                    result = engine.replay(
                        session,
                        engine.PipelineConfig.from_dict(run.config),
                        mode=run.mode,
                        preset_name=run.resolved_preset or run.preset,
                        progress=_progress_writer(run_id),
                    )
                    data: dict[str, Any] = result.to_json()
                _store(run_id, data)
                logger.info("run %s: done in a batch of %s", run_id, len(run_ids))
            except SoftTimeLimitExceeded:
                _fail(
                    run_id,
                    "The replay took longer than the time limit "
                    f"({settings.CELERY_TASK_SOFT_TIME_LIMIT} s) and was stopped.",
                )
                raise
            except engine.TranscriptError as exc:
                _fail(run_id, f"The transcript could not be read: {exc}")
            except run_runner.TRANSIENT_ERRORS:
                logger.exception("run %s: transient database error; will retry", run_id)
                with contextlib.suppress(DatabaseError):
                    Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
                        status=Run.Status.QUEUED, heartbeat_at=None
                    )
                raise
            except Exception as exc:
                logger.exception("run %s: replay failed", run_id)
                _fail(run_id, f"The replay failed: {type(exc).__name__}: {exc}")
    finally:
        for session in sessions.values():
            upload = getattr(session, "upload", None)
            if upload is not None:
                upload.close()
