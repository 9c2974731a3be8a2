"""Celery adapters for summaries: one task per summary call (it resumes the run's replay), and
the only code that queues one."""

from __future__ import annotations

from functools import partial
from typing import Any

from celery.signals import worker_init
from django.db import InterfaceError, OperationalError, transaction

from contextlab import engine
from contextlab.celery import app
from contextlab.runs import lifecycle
from contextlab.runs import runner as run_runner
from contextlab.summaries import runner
from contextlab.summaries import services as summaries


@worker_init.connect
def _preload_sdks(**_: Any) -> None:
    engine.preload_sdks()


@app.task(
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def fetch_summary(run_id: int, key: str = "") -> None:
    # a message without a key (queued by an older version) replays on and asks again
    summary = None
    if key:
        fetch = partial(runner.fetch_summary, only=key, on_stored=wake_runs_waiting_for)
        summary = run_runner.SummaryFetch(key, fetch)
    queue_fetch(run_runner.execute_run(run_id, summary))


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
