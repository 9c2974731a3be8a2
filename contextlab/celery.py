"""The Celery app. Tasks bind to it explicitly (``from contextlab.celery import app``).

It is not imported from ``contextlab/__init__.py`` on purpose: importing ``contextlab.engine``
must never pull in Celery or Django. Nor does it import the apps: their tasks modules import
it (the worker's recovery of abandoned runs is ``runs.tasks``'s).
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextlab.settings")

app = Celery("contextlab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def _close_old_connections(**_: Any) -> None:
    """Around each task, what Django does around each request: close a connection that is
    broken or older than CONN_MAX_AGE, keep the others. A task then skips the ~6 ms of
    opening a PostgreSQL connection, which a run waiting on summaries pays once per summary."""
    from django.db import close_old_connections

    close_old_connections()


@worker_ready.connect
def _start_heartbeat(**_: Any) -> None:
    """Touch WORKER_HEARTBEAT_FILE periodically (docker-compose's worker health check)."""
    from contextlab import health

    health.start_worker_heartbeat(app)


@worker_shutdown.connect
def _stop_heartbeat(**_: Any) -> None:
    from contextlab import health

    health.stop_worker_heartbeat()
