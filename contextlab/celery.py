"""The Celery app. Tasks bind to it explicitly (``from contextlab.celery import app``).

It is not imported from ``contextlab/__init__.py`` on purpose: importing ``contextlab.engine``
must never pull in Celery or Django.
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextlab.settings")

app = Celery("contextlab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _recover_abandoned_runs(**_: Any) -> None:
    """A worker that starts after a crash picks up what the crashed one left "running"."""
    from contextlab.runs import services  # Django must be set up before models are imported

    services.recover_stale_runs()
