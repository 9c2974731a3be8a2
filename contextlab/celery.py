"""The Celery app. Tasks bind to it explicitly (``from contextlab.celery import app``).

It is not imported from ``contextlab/__init__.py`` on purpose: importing ``contextlab.engine``
must never pull in Celery or Django. Nor does it import the apps: ``contextlab.jobs.tasks``
imports it, and Celery beat sends its periodic recovery (``CELERY_BEAT_SCHEDULE``) by name.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from celery import Celery
from celery.signals import beat_init, task_postrun, task_prerun, worker_ready, worker_shutdown
from celery.worker import state

logger = logging.getLogger(__name__)

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


@beat_init.connect
def _recover_at_start(**_: Any) -> None:
    """Send the recovery once as beat starts, then on its schedule: a stack starting again
    after a crash finds what the crash left behind without waiting a whole period."""
    for name, entry in app.conf.beat_schedule.items():
        try:
            app.send_task(entry["task"])
        except Exception:
            # the broker not up yet: the schedule sends it again soon
            logger.warning("beat could not send %s at start-up", name, exc_info=True)


@worker_ready.connect
def _start_heartbeat(**_: Any) -> None:
    """Touch WORKER_HEARTBEAT_FILE periodically (docker-compose's worker health check)."""
    from contextlab import health

    health.start_worker_heartbeat(app)


@worker_ready.connect
def _watch_pool(sender: Any = None, **_: Any) -> None:
    """Brokers without an event loop: a pool process killed would freeze the worker for good
    (``watch_shared_queue_pool`` says why); restart it instead."""
    controller = getattr(sender, "controller", None)
    pool = getattr(getattr(controller, "pool", None), "_pool", None)
    if controller is None or controller.use_eventloop or not hasattr(pool, "_pool"):
        return  # an event loop (Redis): a queue per process; solo/threads: no pool processes
    watch_shared_queue_pool(pool)


@worker_shutdown.connect
def _stop_heartbeat(**_: Any) -> None:
    from contextlab import health

    health.stop_worker_heartbeat()


# --- pool watchdog (brokers without an event loop) ----------------------------------------

#: called before a frozen worker restarts itself (``jobs.tasks`` marks queued runs due, so the
#: next recovery pass sends again any message this one had taken and may not hand back)
before_pool_restart: list[Callable[[], None]] = []
#: seconds between looks at the pool's processes
POOL_WATCH_EVERY = 1.0
#: seconds a restarting worker may take to stop before its remaining pool processes are killed
POOL_RESTART_GRACE = 5.0


def watch_shared_queue_pool(pool: Any) -> threading.Thread:
    """Restart the worker in place when one of its prefork pool processes dies.

    With a broker that has no event loop (the embedded filesystem broker of ``make run``)
    Celery's prefork pool feeds its processes through one shared pipe guarded by one lock,
    which an idle process holds while it waits for work. ``kill -9`` of that process leaves
    the lock taken forever: the replacement and every other process wait on it and the
    worker never runs another task (Redis workers give each process a pipe of its own and
    are not affected). Nothing can release the lock safely, so the worker restarts itself,
    as Celery's own SIGHUP restart does (same pid, so a supervisor sees no exit): a warm
    stop, the remaining processes killed if they cannot stop in POOL_RESTART_GRACE seconds,
    then ``exec`` of the same command. The periodic recovery then sends the queued runs
    again (a restart hook marks them due) and requeues the ones left running.
    """
    known = {proc.pid for proc in list(pool._pool)}

    def restart(gone: set[int]) -> None:
        logger.error(
            "pool process(es) %s died; with this broker the pool cannot take work any more "
            "(its shared queue lock died with them): the worker restarts",
            sorted(gone),
        )
        for hook in before_pool_restart:
            try:
                hook()
            except Exception:
                logger.exception("pool watchdog: a restart hook failed")
        atexit.register(os.execv, sys.executable, [sys.executable, *sys.orig_argv[1:]])
        state.should_stop = 0  # type: ignore[assignment]  # Celery's warm stop; exec at exit
        time.sleep(POOL_RESTART_GRACE)
        for proc in list(pool._pool):  # stuck on the lock: they cannot stop by themselves
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGKILL)

    def loop() -> None:
        nonlocal known
        while True:
            time.sleep(POOL_WATCH_EVERY)
            try:
                procs = list(pool._pool)
                now = {proc.pid for proc in procs}
                gone = known - now
                gone |= {proc.pid for proc in procs if (proc.exitcode or 0) < 0}
            except Exception:
                logger.exception("pool watchdog: could not list the pool's processes")
                continue
            if gone and state.should_stop is None and state.should_terminate is None:
                restart(gone)
                return
            known = now

    thread = threading.Thread(target=loop, name="pool-watchdog", daemon=True)
    thread.start()
    return thread
