"""Workers on other hosts: web, two Celery workers, beat and the object store each in a network
namespace of its own (separate hosts on one machine), every one with its own empty folders;
PostgreSQL and Redis reached over the bridge. 20 uploaded sessions are each replayed once,
and when one worker host is killed mid-replay its run finishes on the other.
Real gunicorn, Celery, moto_server, PostgreSQL and Redis; needs root (CI runs as root)."""

from __future__ import annotations

import importlib.util
import re
import time
from pathlib import Path
from types import ModuleType

import pytest
from django.conf import settings

from contextlab import upload_client
from contextlab.runs.models import Run, RunResult
from tests.conftest import REDIS_URL, ROOT, flush_broker, require_services, settle_runs, worker_env
from tests.multihost import hosts
from tests.multihost.hosts import Network
from tests.storage.s3 import start_s3

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SESSIONS = 20
#: bytes per synthetic session: a replay of a second or more in a worker, so a host dies
#: mid-replay
SESSION_BYTES = 3 * 1024**2
#: a worker's heartbeat goes stale after this many seconds (production: 120)
STALE_AFTER = 10
DONE_LINE = re.compile(r"run (\d+): done \(")
CLAIM_LINE = re.compile(r"run (\d+): replaying \(attempt")


def synthetic_sessions(folder: Path) -> list[Path]:
    spec = importlib.util.spec_from_file_location(
        "gen_synthetic", ROOT / "bench" / "gen_synthetic.py"
    )
    assert spec
    assert spec.loader
    gen: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    paths = [folder / f"session-{seed:02d}.jsonl" for seed in range(1, SESSIONS + 1)]
    for seed, path in enumerate(paths, start=1):
        gen.generate(path, SESSION_BYTES, seed)
    return paths


def done_by(log: str) -> list[int]:
    return [int(run_id) for run_id in DONE_LINE.findall(log)]


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def wait_until(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what}: not after {timeout}s")


def test_two_worker_hosts_replay_every_upload_once_and_survive_losing_one(
    network: Network, api_token, tmp_path
):
    require_services()
    flush_broker()
    sessions = synthetic_sessions(tmp_path / "sessions")
    store, web, first, second = (
        network.add_host(n) for n in ("store", "web", "worker-a", "worker-b")
    )
    s3 = start_s3(tmp_path, host=store.address, argv_prefix=["ip", "netns", "exec", store.netns])
    db = settings.DATABASES["default"]
    database_url = (
        f"postgres://{db['USER']}:{db.get('PASSWORD') or ''}@127.0.0.1:{db.get('PORT') or 5432}"
        f"/{db['NAME']}"
    )
    stack = worker_env(
        **s3.env(),
        DATABASE_URL=network.remote_url(database_url),
        CELERY_BROKER_URL=network.remote_url(REDIS_URL),
        DEBUG="false",
        SECRET_KEY="multihost-test-secret-key-not-for-production-0123456789",
        RUN_STALE_AFTER=str(STALE_AFTER),
        RUN_HEARTBEAT_EVERY="1",
        RUN_RECOVER_EVERY="2",
        # a message the killed host had taken but not started is sent again this soon
        RUN_QUEUED_RESEND_AFTER="10",
    )
    stack.pop("CACHE_URL", None)
    for host in (web, first, second):
        assert files_under(host.folder) == [], f"{host.name} starts with an empty disk"
    try:
        url = hosts.start_web(web, stack)
        hosts.start_beat(web, stack)
        hosts.start_worker(first, stack)
        hosts.start_worker(second, stack)

        ids = [upload_client.upload(path, url=url, token=api_token).session_id for path in sessions]
        assert len(set(ids)) == SESSIONS
        runs = list(Run.objects.filter(transcript_id__in=ids).values_list("pk", flat=True))
        assert len(runs) == SESSIONS  # one recorded replay per upload

        # both hosts replaying (each worker runs one at a time), and the second has finished
        # some already: now pull its plug
        def both_mid_replay() -> bool:
            busy = Run.objects.filter(pk__in=runs, status=Run.Status.RUNNING).count()
            return busy == 2 and bool(done_by(second.log("worker")))

        def second_holds_a_run() -> bool:
            """Freeze the second host and keep it frozen only if it holds a claimed run it has
            not finished (it could finish one between a look at the database and the kill)."""
            wait_until(both_mid_replay, 180, "both worker hosts replaying")
            second.pause()
            log = second.log("worker")
            claimed = set(map(int, CLAIM_LINE.findall(log))) - set(done_by(log))
            # frozen, the host cannot change its runs: one still running in the database is
            # mid-replay (a run stored whose "done" line was not yet written is not)
            running = Run.objects.filter(pk__in=claimed, status=Run.Status.RUNNING).count()
            if claimed and running == len(claimed):
                return True
            second.resume()
            return False

        wait_until(second_holds_a_run, 240, "the second host frozen mid-replay")
        held = set(map(int, CLAIM_LINE.findall(second.log("worker")))) - set(
            done_by(second.log("worker"))
        )
        second.kill()
        done_on_second = done_by(second.log("worker"))

        def all_finished() -> bool:
            active = Run.objects.filter(pk__in=runs).exclude(
                status__in=[Run.Status.DONE, Run.Status.FAILED]
            )
            return not active.exists()

        wait_until(all_finished, 300, "every run finished after a host was killed")
        failed = dict(
            Run.objects.filter(pk__in=runs, status=Run.Status.FAILED).values_list("pk", "error")
        )
        assert failed == {}, f"{failed}\n{first.log('worker')[-3000:]}"

        # a run is stored done a moment before its worker writes its "done" line
        def every_done_line_written() -> bool:
            return set(done_by(first.log("worker")) + done_on_second) >= set(runs)

        wait_until(every_done_line_written, 30, "the 'done' line of every finished run")
        done_on_first = done_by(first.log("worker"))
        # every replay done exactly once, across the two hosts
        assert sorted(done_on_first + done_on_second) == sorted(runs)
        assert done_on_first
        assert done_on_second
        assert RunResult.objects.filter(run_id__in=runs).count() == SESSIONS
        # the run the killed host was replaying started again on the other one and finished there
        restarted = list(Run.objects.filter(pk__in=runs, attempts=2).values_list("pk", flat=True))
        assert restarted, "the killed host left no run behind"
        assert held <= set(restarted), "the run the killed host held was replayed again"
        assert set(restarted) <= set(done_on_first)
        assert "requeued" in first.log("worker") + web.log("beat")
        assert Run.objects.filter(pk__in=runs, attempts__gt=2).count() == 0

        # nothing shared but the network: the uploads are in the object store, not on a disk
        assert len(s3.keys("uploads/")) == SESSIONS
        # (the web keeps a copy of what it stored in its own WORKER_DIR; no other host sees it)
        assert files_under(web.folder / "media") == []
        copies = {p.name for p in files_under(first.folder / "worker" / "objects" / "uploads")}
        assert len(copies) == len(set(done_on_first))
    finally:
        settle_runs()
        for host in (first, second, web):
            host.stop()
        s3.stop()
