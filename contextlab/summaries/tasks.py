"""Celery adapters for summaries: one task per summary call."""

from __future__ import annotations

from django.db import InterfaceError, OperationalError

from contextlab.celery import app
from contextlab.summaries import runner


@app.task(
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def fetch_summary(run_id: int) -> None:
    runner.fetch_summary(run_id)
