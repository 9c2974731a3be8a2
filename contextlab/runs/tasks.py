"""Celery adapters: pass ids, call the runner, own the retry policy; and the only code that
sends run tasks (after commit), including the worker's recovery of abandoned runs."""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from celery.signals import worker_ready
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, transaction
from kombu.exceptions import OperationalError as KombuOperationalError

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
    recovery loop (every RUN_STALE_AFTER / 2 seconds) or a page polling a run sends them
    once the broker answers.
    """
    try:
        send()
    except BROKER_DOWN as exc:
        queue_unreachable.set(True)
        lifecycle.mark_unsent(run_ids)
        logger.warning(
            "run(s) %s: the task queue is unreachable (%s); they stay queued and are sent "
            "again within %s s of the queue coming back",
            ",".join(map(str, run_ids[:20])),
            exc,
            max(1, settings.RUN_STALE_AFTER // 2),
        )
        return False
    return True


def send_replay(run_id: int) -> None:
    """Publish the run's task now (``queue_replay`` calls this after commit)."""
    publish(partial(run_replay.delay, run_id), [run_id])


def recover_stale_runs(*, run_ids: list[int] | None = None) -> list[Run]:
    """Requeue (or fail, after RUN_MAX_ATTEMPTS) runs whose worker stopped heartbeating, and
    send the requeued ones to a worker; send again the runs queued so long that their task
    was probably lost. Returns the changed runs (the resent ones keep their status)."""
    changed = lifecycle.recover_stale(run_ids=run_ids)
    for run in changed:
        if run.status == Run.Status.QUEUED:
            queue_replay(run.pk)
    for run_id in lifecycle.queued_too_long(run_ids=run_ids):
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
