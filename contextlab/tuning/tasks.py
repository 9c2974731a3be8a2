"""Celery adapters: pass ids, call the runner, own the retry policy; and the only code that
sends batch tasks."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from celery.exceptions import SoftTimeLimitExceeded
from django.db import InterfaceError, OperationalError, transaction

from contextlab.celery import app
from contextlab.runs import lifecycle
from contextlab.runs import tasks as run_tasks
from contextlab.summaries import tasks as summary_tasks
from contextlab.tuning import runner


@app.task(
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def replay_batch(run_ids: list[int]) -> None:
    try:
        runner.execute_batch(run_ids, on_outcome=summary_tasks.queue_fetch)
    except (runner.BatchOutOfTime, SoftTimeLimitExceeded):
        # the batch ran out of time: each run it did not reach gets its own task
        for run_id in runner.unstarted(run_ids):
            run_tasks.send_replay(run_id)


def queue_batches(batches: Iterable[list[int]]) -> None:
    """Send each batch of run ids to a worker once the transaction that queued them commits."""
    for ids in batches:
        # a broker that is down keeps the runs queued (sent again by the recovery), no 500
        transaction.on_commit(partial(lifecycle.publish, partial(replay_batch.delay, ids), ids))
