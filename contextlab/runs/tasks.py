"""Celery adapters: pass ids, call the runner, own the retry policy; and the only code that
sends run tasks (after commit), including the worker's recovery of abandoned runs."""

from __future__ import annotations

import logging
import threading
import time
from functools import partial
from typing import Any

from celery.signals import worker_ready
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, transaction

from contextlab.celery import app, before_pool_restart
from contextlab.runs import lifecycle, runner
from contextlab.runs.models import Run
from contextlab.summaries import tasks as summary_tasks

logger = logging.getLogger(__name__)


@app.task(
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def run_replay(run_id: int) -> None:
    summary_tasks.queue_fetch(runner.execute_run(run_id))


def queue_replay(run_id: int) -> None:
    """Send the run to a worker once the transaction that queued it commits."""
    transaction.on_commit(partial(send_replay, run_id))


def send_replay(run_id: int) -> None:
    """Publish the run's task now (``queue_replay`` calls this after commit)."""
    lifecycle.publish(partial(run_replay.delay, run_id), [run_id])


def recover_stale_runs(*, run_ids: list[int] | None = None) -> list[Run]:
    """Requeue (or fail, after RUN_MAX_ATTEMPTS) runs whose worker stopped heartbeating, and
    send the requeued ones to a worker; send again the runs queued so long that their task
    was probably lost. Returns the changed runs (the resent ones keep their status)."""
    changed = lifecycle.recover_stale(run_ids=run_ids)
    for run in changed:
        if run.status == Run.Status.QUEUED:
            queue_replay(run.pk)
    due = lifecycle.queued_too_long(run_ids=run_ids)
    parked = lifecycle.pending_summaries(due)
    for run_id in due:
        if run_id in parked:
            summary_tasks.queue_fetch_again(run_id, parked[run_id])
        else:
            queue_replay(run_id)
    return changed


def _resend_queued_after_restart() -> None:
    """Every queued run due for sending at once: the worker restarting under a frozen pool
    may have taken their messages; a second message for a claimed run does nothing."""
    lifecycle.mark_unsent(lifecycle.queued_ids())


before_pool_restart.append(_resend_queued_after_restart)


@worker_ready.connect
def _recover_abandoned_runs(**_: Any) -> None:
    """Requeue what dead workers left "running": now, then every half RUN_STALE_AFTER.

    At start-up this picks up what a crashed worker left behind; the loop covers a pool
    process killed while this worker lives on (its run's heartbeat stops too), with no page
    open to notice. It runs in the worker's main process, beside the pool.
    """
    recover_stale_runs()

    def loop() -> None:
        while True:
            time.sleep(max(1.0, settings.RUN_STALE_AFTER / 2))
            try:
                recover_stale_runs()
            except Exception:
                logger.exception("recovering abandoned runs failed; will try again")
            finally:
                close_old_connections()

    threading.Thread(target=loop, name="recover-abandoned-runs", daemon=True).start()
