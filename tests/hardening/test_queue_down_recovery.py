"""Redis down while work is created, then back: an upload, a what-if run, a comparison and a
sweep made while nothing listens on the broker's port all succeed with a notice saying their
runs are queued; once a real redis-server starts on that port, a real worker replays every
run exactly once (no duplicate results), within the documented time."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from contextlab.runs.models import Run, RunResult
from tests.conftest import DEMO, ROOT, require_services, start_beat, start_worker, worker_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

#: the web side, in its own process so its Celery app publishes to the dead port
WEB = textwrap.dedent(
    """
    import json, logging, django
    django.setup()
    from django.contrib.auth.models import User
    from django.test import Client
    logging.basicConfig(level=logging.WARNING)
    user = User.objects.create_user("q", password="pw-q-123456")
    client = Client()
    client.force_login(user)
    out = {{}}
    with open({path!r}, "rb") as fh:
        r = client.post("/sessions/upload/", {{"file": fh}}, HTTP_ACCEPT="application/json")
    out["upload"] = [r.status_code, r.json(), r.headers.get("X-Task-Queue")]
    session = r.json()["results"][0]["id"]
    def post(url, body):
        r = client.post(url, json.dumps(body), content_type="application/json")
        return [r.status_code, r.json(), r.headers.get("X-Task-Queue")]
    out["run"] = post("/api/runs", {{"session_id": session, "mode": "whatif", "preset": "aggressive"}})
    out["comparison"] = post(
        "/api/comparisons",
        {{"session_ids": [session], "a": {{"preset": "aggressive"}}, "b": {{"preset": "budget-on"}}}},
    )
    out["sweep"] = post(
        "/api/sweeps",
        {{"session_ids": [session], "field": "context_window", "values": [150000, 250000]}},
    )
    print(json.dumps(out))
    """
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"redis-server did not listen on {port}")


def test_work_created_with_redis_down_is_kept_and_replayed_once_when_it_is_back(
    tmp_path: Path,
) -> None:
    require_services()
    port = _free_port()  # nothing listens there until the redis-server below starts
    broker = f"redis://127.0.0.1:{port}/0"
    queue = f"queue-down-{port}"
    env = worker_env(CELERY_BROKER_URL=broker, CELERY_TASK_DEFAULT_QUEUE=queue)
    env.update(PYTHONPATH=str(ROOT), ALLOWED_HOSTS="testserver", CACHE_URL="locmem://")
    web = subprocess.run(
        [sys.executable, "-c", WEB.format(path=str(DEMO / "marot__spotter__short.jsonl"))],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert web.returncode == 0, web.stderr[:6000]
    out = json.loads(web.stdout.strip().splitlines()[-1])
    for name, expected in [("upload", 201), ("run", 201), ("comparison", 201), ("sweep", 201)]:
        status, body, header = out[name]
        assert status == expected, (name, body)
        assert header == "unreachable", name
        assert "task queue is unreachable" in body["notice"], name
        assert "queued" in body["notice"]
    assert "the task queue is unreachable" in web.stderr
    runs = list(Run.objects.all())
    # the upload's recorded run, the what-if, the comparison's second side (its first is the
    # what-if, reused) and the sweep's two
    assert len(runs) == 5
    assert {run.status for run in runs} == {"queued"}

    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = beat = None
    try:
        _wait_listening(port)
        back = time.monotonic()
        # beat sends the recovery pass as it starts and every RUN_RECOVER_EVERY (= half
        # RUN_STALE_AFTER) seconds; the worker runs it
        stack = {"CELERY_BROKER_URL": broker, "CELERY_TASK_DEFAULT_QUEUE": queue}
        worker = start_worker(tmp_path, "queue-down", RUN_STALE_AFTER="6", **stack)
        beat = start_beat(tmp_path, "queue-down", RUN_STALE_AFTER="6", **stack)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if not Run.objects.exclude(status__in=["done", "failed"]).exists():
                break
            time.sleep(0.3)
        elapsed = time.monotonic() - back
        runs = list(Run.objects.all())
        assert {run.status for run in runs} == {"done"}, (
            [(run.pk, run.status, run.error) for run in runs],
            worker.output(),
        )
        # each replayed once: one result each, no restart counted
        assert RunResult.objects.count() == len(runs)
        assert {run.attempts for run in runs} == {1}
        print(f"all {len(runs)} runs done {elapsed:.1f} s after Redis came back")
    finally:
        if beat is not None:
            beat.stop()
        if worker is not None:
            worker.stop()
        redis.terminate()
        redis.wait(timeout=10)
