"""Celery adapters for summaries: one task per summary call (it resumes the run's replay)."""

from __future__ import annotations

from typing import Any

from celery.signals import worker_init
from django.db import InterfaceError, OperationalError

from contextlab import engine
from contextlab.celery import app
from contextlab.runs import runner as run_runner


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
    run_runner.execute_run(run_id, fetch_key=key)
