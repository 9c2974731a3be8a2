"""Celery adapters: pass ids, call the runner, own the retry policy."""

from __future__ import annotations

from celery.exceptions import SoftTimeLimitExceeded
from django.db import InterfaceError, OperationalError

from contextlab.celery import app
from contextlab.runs import tasks as run_tasks
from contextlab.tuning import runner


@app.task(
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def replay_batch(run_ids: list[int]) -> None:
    try:
        runner.execute_batch(run_ids)
    except SoftTimeLimitExceeded:
        # the batch ran out of time: each run it did not reach gets its own task
        for run_id in runner.unstarted(run_ids):
            run_tasks.run_replay.delay(run_id)
