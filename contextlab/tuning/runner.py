"""Worker-side: replay several runs of the same sessions, parsing each session once.

A sweep or comparison queues its new runs in batches; for each run this claims it (the same
claim as ``runs.runner``, so a run is replayed once whichever task gets it), replays it with
the already-loaded session and stores the result exactly as a single run does. The loaded
session keeps its token counts, so the second and later configs skip parsing and tokenizing.
"""

from __future__ import annotations

import contextlib
import logging

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError

from contextlab import engine
from contextlab.runs import runner as run_runner
from contextlab.runs.models import Run

logger = logging.getLogger(__name__)


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
                        session = sessions[run.transcript_id] = run_runner.load_session(
                            run.transcript
                        )
                    data = run_runner.replay_run(run, session)
                run_runner.store_result(run_id, data)
                logger.info("run %s: done in a batch of %s", run_id, len(run_ids))
            except SoftTimeLimitExceeded:
                run_runner.fail(
                    run_id,
                    "The replay took longer than the time limit "
                    f"({settings.CELERY_TASK_SOFT_TIME_LIMIT} s) and was stopped.",
                )
                raise
            except engine.TranscriptError as exc:
                run_runner.fail(run_id, f"The transcript could not be read: {exc}")
            except run_runner.TRANSIENT_ERRORS:
                logger.exception("run %s: transient database error; will retry", run_id)
                with contextlib.suppress(DatabaseError):
                    Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
                        status=Run.Status.QUEUED, heartbeat_at=None
                    )
                raise
            except Exception as exc:
                logger.exception("run %s: replay failed", run_id)
                run_runner.fail(run_id, f"The replay failed: {type(exc).__name__}: {exc}")
    finally:
        for session in sessions.values():
            run_runner.close_session(session)
