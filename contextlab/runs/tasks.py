"""Celery adapters: pass ids, call the runner, own the retry policy."""

from __future__ import annotations

from django.db import InterfaceError, OperationalError

from contextlab.celery import app
from contextlab.runs import runner


@app.task(
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def run_replay(run_id: int) -> None:
    runner.execute_run(run_id)
