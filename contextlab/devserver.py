"""``python -m contextlab.devserver``: the one-command local start behind ``make run``.

Migrates, loads the demo sessions, then runs Django's development server and a real Celery
worker on the embedded broker (no Redis, no PostgreSQL), with Celery beat embedded in it for
the periodic recovery (``--beat``; production runs beat as its own service). Ctrl-C (SIGINT)
or SIGTERM stops both. A worker that dies is started again (a queued run waits seconds, not until someone notices),
unless it keeps dying (``RESTARTS_PER_MINUTE``); a web server that exits stops everything.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from contextlab.local_secret import ensure_secret_key_file, secret_key_file

ROOT = Path(__file__).resolve().parent.parent


def _spawn(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    # A process group of its own, so stopping it also stops the children it forks
    # (runserver's autoreloader, the worker's pool processes).
    return subprocess.Popen(argv, cwd=ROOT, env=env, start_new_session=True)


def _stop(
    proc: subprocess.Popen[bytes], name: str, timeout: float = 15, *, group: bool = True
) -> None:
    """SIGTERM (to the whole group, or to the leader only), then SIGKILL the group if needed."""
    if proc.poll() is not None:
        return
    try:
        if group:
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.terminate()
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"[devserver] {name} did not stop in {timeout:.0f}s; killing it", flush=True)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


#: a worker dying more often than this within a minute is broken, not unlucky: stop
RESTARTS_PER_MINUTE = 5


def _start_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return _spawn(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "contextlab.celery",
            "worker",
            "--beat",
            "--loglevel=INFO",
            "--pool=prefork",
            f"--concurrency={env.get('WORKER_CONCURRENCY', '1')}",
            "--without-gossip",
            "--without-mingle",
        ],
        env,
    )


def _stop_worker(worker: subprocess.Popen[bytes]) -> None:
    # Only the worker's main process gets SIGTERM: it finishes or hands back its task and then
    # stops its own pool (a group-wide signal would kill the pool children mid-task).
    _stop(worker, "worker", timeout=30, group=False)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)  # anything the worker left behind


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--no-demo", action="store_true", help="do not load the demo sessions")
    args = parser.parse_args(argv)

    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "contextlab.settings")
    env["PYTHONUNBUFFERED"] = "1"
    # DEBUG stays off unless asked for (DEBUG=true make run); static files come straight from
    # static/ (no collectstatic), and with no SECRET_KEY a random one is kept in var/secret_key.
    env.setdefault("STATIC_MANIFEST", "false")
    if not env.get("SECRET_KEY", "").strip():
        ensure_secret_key_file(secret_key_file(env, ROOT))
    python = sys.executable
    manage = [python, str(ROOT / "manage.py")]

    subprocess.run([*manage, "migrate", "--noinput"], cwd=ROOT, env=env, check=True)
    if not args.no_demo:
        subprocess.run([*manage, "load_demo"], cwd=ROOT, env=env, check=True)

    worker = _start_worker(env)
    web = _spawn([*manage, "runserver", f"{args.host}:{args.port}"], env)
    print(
        f"[devserver] ContextLab on http://{args.host}:{args.port}/  (worker pid {worker.pid}, "
        f"web pid {web.pid}); Ctrl-C stops both",
        flush=True,
    )

    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    code = 0
    restarts: list[float] = []
    while not stopping:
        if web.poll() is not None:
            print(f"[devserver] the web server exited with code {web.returncode}", flush=True)
            code = web.returncode or 1
            stopping = True
        elif worker.poll() is not None:
            now = time.monotonic()
            restarts = [t for t in restarts if now - t < 60] + [now]
            if len(restarts) > RESTARTS_PER_MINUTE:
                print(
                    f"[devserver] the worker exited with code {worker.returncode}, "
                    f"{len(restarts)} times within a minute; stopping",
                    flush=True,
                )
                code = worker.returncode or 1
                stopping = True
            else:
                print(
                    f"[devserver] the worker exited with code {worker.returncode}; "
                    "starting a new one",
                    flush=True,
                )
                _stop_worker(worker)  # its orphaned pool processes, if any
                worker = _start_worker(env)
                print(f"[devserver] worker pid {worker.pid}", flush=True)
        time.sleep(0.3)
    print("[devserver] stopping…", flush=True)
    _stop(web, "web server")
    _stop_worker(worker)
    print("[devserver] stopped", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
