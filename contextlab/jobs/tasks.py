"""Celery adapters of the one queue every job goes through: pass ids, call a runner, own the
retry policy; and the only code that sends tasks (after commit), including the periodic
recovery of lost and abandoned runs, which Celery beat schedules.

Task names are the ones these tasks had before they moved here, so a message queued by an
older version is still understood after an upgrade.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import partial
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_init, worker_process_init
from django.db import InterfaceError, OperationalError, transaction

from contextlab import blobs, engine
from contextlab.celery import app, before_pool_restart
from contextlab.jobs import batches, cache_files, lifecycle, replay, summary_fetch, uploads
from contextlab.runs.models import Run
from contextlab.search import services as search
from contextlab.summaries import services as summaries

logger = logging.getLogger(__name__)

#: ``contextlab.transcripts.tasks.finish_upload``: a worker joins a resumable upload's pieces
FINISH_UPLOAD = "contextlab.transcripts.tasks.finish_upload"
#: sessions the recovery indexes for search per pass (a long session takes seconds)
SEARCH_INDEX_PER_PASS = 5

#: Every job task: acknowledged once done (a worker killed mid-task leaves the message for
#: another), and retried on transient database errors (the runner put its run back in the
#: queue); deterministic failures are stored on the run instead.
JOB_TASK: dict[str, Any] = {
    "acks_late": True,
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": True,
    "max_retries": 3,
}


@worker_init.connect
def _preload(**_: Any) -> None:
    """What a worker's first runs would otherwise pay for, loaded before its pool's processes
    fork (they inherit it): the summarizers' SDKs (importing them takes over a second), the
    engine's modules loaded on first use and the tokenizer's encoder."""
    engine.preload_sdks()
    engine.preload_lazy_modules()
    engine.preload_tokenizer()


@worker_process_init.connect
def _connect_storage(**_: Any) -> None:
    """In each process that runs tasks (a pool's process; the solo pool's worker itself),
    the object store's client, made after the fork (boto3's clients are not shared across
    one) and before the first run."""
    try:
        blobs.connect()
    except Exception:  # a bad storage setting: the first run that needs the store says so
        logger.warning("could not make the object store's client at start-up", exc_info=True)


# --- single runs ----------------------------------------------------------------------------


@app.task(name="contextlab.runs.tasks.run_replay", **JOB_TASK)
def run_replay(run_id: int) -> None:
    queue_fetch(replay.execute_run(run_id))


def queue_replay(run_id: int) -> None:
    """Send the run to a worker once the transaction that queued it commits."""
    transaction.on_commit(partial(send_replay, run_id))


def send_replay(run_id: int) -> None:
    """Publish the run's task now (``queue_replay`` calls this after commit)."""
    lifecycle.publish(partial(run_replay.delay, run_id), [run_id])


# --- summaries ------------------------------------------------------------------------------


@app.task(name="contextlab.summaries.tasks.fetch_summary", **JOB_TASK)
def fetch_summary(run_id: int, key: str = "") -> None:
    # a message without a key (queued by an older version) replays on and asks again
    summary = None
    if key:
        fetch = partial(summary_fetch.fetch_summary, only=key, on_stored=wake_runs_waiting_for)
        summary = replay.SummaryFetch(key, fetch)
    queue_fetch(replay.execute_run(run_id, summary))


def queue_fetch(outcome: lifecycle.Outcome | None) -> None:
    """Queue the fetch task of a run that parked for a summary (after commit); a run that
    finished, failed or was not replayed needs none."""
    if isinstance(outcome, lifecycle.WaitingForSummary):
        # retry_after: another run is writing this summary; look again later (it also wakes
        # this one when the summary is stored)
        send = partial(
            fetch_summary.apply_async,
            (outcome.run_id, outcome.key),
            countdown=outcome.retry_after,
        )
        # the broker down: the run stays parked, due for the recovery to send this again
        transaction.on_commit(partial(lifecycle.publish, send, [outcome.run_id]))


def queue_fetch_again(run_id: int, key: str) -> None:
    """Send the fetch task of a run parked for summary ``key`` whose task was lost (after
    commit). A second message for the same fetch is harmless: the summary's lease lets one
    caller reach the backend, and the run is resumed by whichever message claims it."""
    transaction.on_commit(
        partial(lifecycle.publish, partial(fetch_summary.delay, run_id, key), [run_id])
    )


def wake_runs_waiting_for(key: str, written_by: int) -> None:
    """Queue the fetch task of every other run waiting for summary ``key``, which is stored
    now (after commit)."""
    for run_id in summaries.runs_waiting_for(key, excluding=written_by):
        queue_fetch_again(run_id, key)


# --- comparison and sweep batches -----------------------------------------------------------


@app.task(name="contextlab.tuning.tasks.replay_batch", **JOB_TASK)
def replay_batch(run_ids: list[int]) -> None:
    try:
        batches.execute_batch(run_ids, on_outcome=queue_fetch)
    except (batches.BatchOutOfTime, SoftTimeLimitExceeded):
        # the batch ran out of time: each run it did not reach gets its own task
        for run_id in batches.unstarted(run_ids):
            send_replay(run_id)


def queue_batches(groups: Iterable[list[int]]) -> None:
    """Send each batch of run ids to a worker once the transaction that queued them commits."""
    for ids in groups:
        # a broker that is down keeps the runs queued (sent again by the recovery), no 500
        transaction.on_commit(partial(lifecycle.publish, partial(replay_batch.delay, ids), ids))


# --- recovery (Celery beat) -----------------------------------------------------------------


@app.task(name="contextlab.jobs.tasks.recover", ignore_result=True)
def recover() -> None:
    """The one periodic recovery pass (beat, every RUN_RECOVER_EVERY seconds): runs whose
    worker died, runs whose task was lost or could not be sent, temporary upload files that a
    killed web process left behind, resumable uploads given up, and complete ones whose task
    was lost; sessions not yet in the search index; provisional runs of live sessions that
    ended (no append for LIVE_FINAL_AFTER), replayed whole; session cache files unused for
    SESSION_CACHE_STALE_AFTER."""
    recover_runs()
    # live sessions that stopped growing: their provisional results are replaced by whole replays
    for run_id in lifecycle.finalize_ended_live():
        queue_replay(run_id)
    # sessions stored before the search index existed, or whose indexing failed
    search.index_missing(limit=SEARCH_INDEX_PER_PASS)
    uploads.remove_stale_temp_files()
    uploads.remove_stale_resumable()
    cache_files.remove_stale_session_cache()
    for upload_id in uploads.unfinished_uploads():
        # by name: the task lives with the uploads (transcripts), above this module
        app.send_task(FINISH_UPLOAD, (upload_id,))


def recover_runs() -> list[Run]:
    """Requeue (or fail, after RUN_MAX_ATTEMPTS) runs whose worker stopped heartbeating, and
    send the requeued ones to a worker; send again the runs queued so long that their task
    was probably lost (or marked due because the broker was down when they were sent).
    Returns the changed runs (the resent ones keep their status)."""
    changed = lifecycle.recover_stale()
    for run in changed:
        if run.status == Run.Status.QUEUED:
            queue_replay(run.pk)
    due = lifecycle.queued_too_long()
    parked = lifecycle.pending_summaries(due)
    for run_id in due:
        if run_id in parked:
            queue_fetch_again(run_id, parked[run_id])
        else:
            queue_replay(run_id)
    return changed


def _resend_queued_after_restart() -> None:
    """Every queued run due for sending at once: the worker restarting under a frozen pool
    may have taken their messages; a second message for a claimed run does nothing."""
    lifecycle.mark_unsent(lifecycle.queued_ids())


before_pool_restart.append(_resend_queued_after_restart)
