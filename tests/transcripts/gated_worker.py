"""A Celery worker whose first replay stops after it read its run's row and before it opens the
session's file, until the test lets it go: the test appends to the live session in between.

Test-only: production code has no such hook. ``CONTEXTLAB_TEST_GATE`` names a folder: the
worker creates ``reached`` in it when its first replay is at the gate, and goes on once the
test creates ``go`` (or after 120 s). This wraps ``jobs.replay.load_session`` before the
worker starts, then hands over to Celery's own command line.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import django
from celery.__main__ import main

django.setup()  # the worker's settings (DJANGO_SETTINGS_MODULE): the jobs import models

from contextlab.jobs import replay  # noqa: E402

_real_load_session = replay.load_session
_gated = False


def _load_session_after_the_gate(*args: Any, **kwargs: Any) -> Any:
    global _gated
    if not _gated:
        _gated = True
        gate = Path(os.environ["CONTEXTLAB_TEST_GATE"])
        (gate / "reached").touch()
        deadline = time.monotonic() + 120
        while not (gate / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    return _real_load_session(*args, **kwargs)


replay.load_session = _load_session_after_the_gate  # type: ignore[assignment]

if __name__ == "__main__":
    sys.argv[0] = "celery"
    sys.exit(main())
