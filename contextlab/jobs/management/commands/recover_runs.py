"""``manage.py recover_runs``: the periodic recovery pass (``jobs.tasks.recover_runs``) run once,
by hand: runs left "running" by a dead worker requeued or failed, lost tasks sent again."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from contextlab.jobs import tasks


class Command(BaseCommand):
    help = "Requeue or fail runs whose worker stopped heartbeating."

    def handle(self, *args: Any, **options: Any) -> None:
        for run in tasks.recover_runs():
            self.stdout.write(f"run {run.pk}: {run.status}")
