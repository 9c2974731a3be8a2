"""Health checks: ``/healthz`` for the web service, a heartbeat file for each Celery worker.

``/healthz`` is answered by the first middleware, before host validation, sessions or the HTTPS
redirect, so a container probe on ``http://127.0.0.1:8000/healthz`` works whatever
``ALLOWED_HOSTS`` says. It runs one ``SELECT 1`` and needs no login; it reveals nothing but
"ok" or which dependency failed.

A worker's main process touches ``WORKER_HEARTBEAT_FILE`` every ``WORKER_HEARTBEAT_EVERY``
seconds while it can reach its broker; ``python -m contextlab.health worker`` exits non-zero
when the file is missing or older than ``WORKER_HEARTBEAT_STALE_AFTER`` (docker-compose's
worker health check). The file lives on the worker's own disk (``/tmp`` by default), never on
a volume shared with other workers, so one live worker cannot hide a dead one.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse

logger = logging.getLogger(__name__)

HEALTHZ_PATH = "/healthz"


def database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:
        logger.exception("health check: the database is unreachable")
        return False
    return True


def healthz(request: HttpRequest) -> HttpResponse:
    ok = database_ok()
    response = JsonResponse(
        {"status": "ok" if ok else "error", "database": "ok" if ok else "unreachable"},
        status=200 if ok else 503,
    )
    response["Cache-Control"] = "no-store"
    return response


class HealthCheckMiddleware:
    """Answers GET/HEAD ``/healthz`` itself; every other request passes through."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info.rstrip("/") == HEALTHZ_PATH and request.method in ("GET", "HEAD"):
            return healthz(request)
        return self.get_response(request)


# --- worker heartbeat ----------------------------------------------------------------------


def touch_heartbeat(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    now = time.time()
    os.utime(path, (now, now))


def heartbeat_age(path: Path, now: float | None = None) -> float | None:
    """Seconds since the heartbeat file was last touched, or None when there is none."""
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return None
    return max(0.0, (time.time() if now is None else now) - mtime)


def start_worker_heartbeat(app: Any) -> threading.Thread:
    """Touch the heartbeat file now and then every WORKER_HEARTBEAT_EVERY seconds, as long as
    the broker answers (a worker that lost its broker is not healthy)."""
    path: Path = settings.WORKER_HEARTBEAT_FILE
    every: int = settings.WORKER_HEARTBEAT_EVERY

    def beat() -> None:
        try:
            with app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1)
        except Exception as exc:
            logger.warning("worker heartbeat skipped: the broker is unreachable (%s)", exc)
            return
        touch_heartbeat(path)

    def loop() -> None:
        while True:
            try:
                beat()
            except Exception:
                logger.exception("worker heartbeat failed; will try again")
            time.sleep(every)

    thread = threading.Thread(target=loop, name="worker-heartbeat", daemon=True)
    thread.start()
    return thread


def stop_worker_heartbeat() -> None:
    """A stopped worker must not look alive: remove its heartbeat file."""
    path: Path = settings.WORKER_HEARTBEAT_FILE
    path.unlink(missing_ok=True)


def check_worker(path: Path, stale_after: float) -> tuple[bool, str]:
    age = heartbeat_age(path)
    if age is None:
        return False, f"no worker heartbeat at {path}"
    if age > stale_after:
        return False, f"worker heartbeat is {age:.0f}s old (limit {stale_after:.0f}s)"
    return True, f"worker heartbeat {age:.0f}s ago"


def main(argv: list[str] | None = None) -> int:
    """``python -m contextlab.health worker``: exit 0 when this host's worker beats, else 1."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["worker"]:
        print("usage: python -m contextlab.health worker", file=sys.stderr)
        return 2
    ok, message = check_worker(
        settings.WORKER_HEARTBEAT_FILE, float(settings.WORKER_HEARTBEAT_STALE_AFTER)
    )
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextlab.settings")
    sys.exit(main())
