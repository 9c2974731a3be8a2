"""``manage.py recover_runs``: requeue or fail runs left "running" by a dead worker (cron-able)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from contextlab.runs import tasks


class Command(BaseCommand):
    help = "Requeue or fail runs whose worker stopped heartbeating."

    def handle(self, *args: Any, **options: Any) -> None:
        for run in tasks.recover_stale_runs():
            self.stdout.write(f"run {run.pk}: {run.status}")
