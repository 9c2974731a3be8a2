"""The Celery app. Tasks bind to it explicitly (``from contextlab.celery import app``).

It is not imported from ``contextlab/__init__.py`` on purpose: importing ``contextlab.engine``
must never pull in Celery or Django.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextlab.settings")

logger = logging.getLogger(__name__)

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
def _recover_abandoned_runs(**_: Any) -> None:
    """Requeue what dead workers left "running": now, then every half RUN_STALE_AFTER.

    At start-up this picks up what a crashed worker left behind; the loop covers a pool
    process killed while this worker lives on (its run's heartbeat stops too), with no page
    open to notice. It runs in the worker's main process, beside the pool.
    """
    # Django must be set up before models are imported, hence the imports here.
    from django.conf import settings
    from django.db import close_old_connections

    from contextlab.runs import services

    services.recover_stale_runs()

    def loop() -> None:
        while True:
            time.sleep(max(1.0, settings.RUN_STALE_AFTER / 2))
            try:
                services.recover_stale_runs()
            except Exception:
                logger.exception("recovering abandoned runs failed; will try again")
            finally:
                close_old_connections()

    threading.Thread(target=loop, name="recover-abandoned-runs", daemon=True).start()


@worker_ready.connect
def _start_heartbeat(**_: Any) -> None:
    """Touch WORKER_HEARTBEAT_FILE periodically (docker-compose's worker health check)."""
    from contextlab import health

    health.start_worker_heartbeat(app)


@worker_shutdown.connect
def _stop_heartbeat(**_: Any) -> None:
    from contextlab import health

    health.stop_worker_heartbeat()
