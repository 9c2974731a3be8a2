"""``kill -9`` of a prefork pool process, as production runs the worker (``--pool prefork -c 2``)
on Redis and ``make run`` on the embedded filesystem broker: an idle child killed must not
freeze the worker (the audit saw runs queued forever); a child killed mid-replay or during a
summary call leaves a run that completes (requeued by the live worker's recovery), once."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from contextlab import local_broker
from contextlab.celery import app
from contextlab.jobs import tasks as run_tasks
from contextlab.runs import services
from contextlab.runs.models import Run, RunResult
from contextlab.summaries.models import SummaryEntry
from tests.conftest import (
    WorkerProcess,
    flush_broker,
    require_services,
    start_beat,
    wait_for_run,
    worker_env,
)
from tests.engine.conftest import ANTHROPIC_TEST_KEY
from tests.llm_stub import LLMStub
from tests.summaries.test_runner import SUMMARY, whatif_run

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]

#: recovery settings short enough for a test (production: RUN_STALE_AFTER 120 s)
FAST = {"RUN_STALE_AFTER": "4", "RUN_HEARTBEAT_EVERY": "1"}
SLOW_WORKER = Path(__file__).resolve().parent.parent / "runs" / "slow_worker.py"


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.extend(int(child) for child in (task / "children").read_text().split())
    return found


def _prefork_worker(tmp: Path, name: str, *, slow: bool = False, **env: str) -> WorkerProcess:
    celery = [sys.executable, str(SLOW_WORKER)] if slow else [sys.executable, "-m", "celery"]
    argv = [
        *celery,
        "-A",
        "contextlab.celery",
        "worker",
        "--pool=prefork",
        "--concurrency=2",
        "--loglevel=INFO",
        "--without-mingle",
        "--without-gossip",
        f"--hostname={name}@%h",
    ]
    worker = WorkerProcess(tmp / f"{name}.log", worker_env(**{**FAST, **env}), argv)
    try:
        worker.wait_ready()
        deadline = time.monotonic() + 20
        while len(_children(worker.proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    except Exception:
        worker.stop()
        raise
    return worker


@pytest.fixture
def prefork(tmp_path: Path) -> Any:
    require_services()
    flush_broker()
    workers: list[WorkerProcess] = []

    def start(name: str = "prefork", *, slow: bool = False, **env: Any) -> WorkerProcess:
        worker = _prefork_worker(tmp_path, name, slow=slow, **env)
        workers.append(worker)
        # the periodic recovery, from beat in its own process as docker-compose runs it (a
        # beat embedded with -B would be one of the children these tests kill)
        workers.append(start_beat(tmp_path, name, **{**FAST, **env}))
        return worker

    yield start
    for worker in workers:
        worker.stop()


def _send(run_id: int, broker: str, var_dir: Path) -> None:
    """Publish a run's task on ``broker`` (the test process's own app publishes to Redis).
    The filesystem broker's messages are written as ``make run``'s web writes them
    (``local_broker``, whole files renamed into place): kombu's own filesystem transport, which
    the URL alone picks, creates the file before it writes it, and a worker that lists the
    folder between the two reads an empty message, which is lost (the run stayed queued)."""
    if broker == "redis":
        run_tasks.run_replay.delay(run_id)
        return
    folder = str(var_dir / "broker" / "queue")
    control = str(var_dir / "broker" / "control")
    options = {"data_folder_in": folder, "data_folder_out": folder, "control_folder": control}
    with app.connection_for_write(
        "filesystem://", transport=local_broker.Transport, transport_options=options
    ) as conn:
        run_tasks.run_replay.apply_async((run_id,), connection=conn)


@pytest.mark.parametrize("broker", ["redis", "filesystem"])
def test_idle_pool_processes_killed_do_not_freeze_the_worker(
    broker: str,
    prefork: Any,
    make_transcript: Any,
    short_jsonl: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    var_dir = tmp_path / "var"
    env = {"VAR_DIR": str(var_dir), "CELERY_BROKER_URL": "filesystem://"}
    worker = prefork(**(env if broker == "filesystem" else {}))
    # runs are sent where this worker listens
    monkeypatch.setattr(run_tasks, "send_replay", lambda run_id: _send(run_id, broker, var_dir))
    transcript = make_transcript(short_jsonl)
    try:
        first = wait_for_run(transcript.runs.get().pk, timeout=60)
    except AssertionError as timed_out:  # the worker's log says why (wait_for_run cannot)
        raise AssertionError(f"{timed_out}\n{worker.output()}") from timed_out
    assert first.status == "done", worker.output()
    before = _children(worker.proc.pid)
    for child in before:  # both idle now
        os.kill(child, signal.SIGKILL)
    killed = time.monotonic()
    runs = [
        services.start_run(owner=transcript.owner, transcript=transcript, mode="whatif", preset=p)
        for p in ("aggressive", "budget-on", "snip-on")
    ]
    for run in runs:
        try:
            finished = wait_for_run(run.pk, timeout=90)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{worker.output()}") from None
        assert finished.status == "done", (finished.error, worker.output())
        assert finished.attempts == 1
    elapsed = time.monotonic() - killed
    assert RunResult.objects.filter(run__in=runs).count() == len(runs)
    if broker == "filesystem":
        assert "the worker restarts" in worker.full_log()
    print(f"{broker}: 3 runs done {elapsed:.1f} s after both idle pool processes were killed")


def test_a_pool_process_killed_mid_replay_leaves_a_run_that_completes_once(
    prefork: Any, make_transcript: Any, tool_heavy_jsonl: Path
) -> None:
    worker = prefork(slow=True)  # 0.3 s per request: killable mid-way
    transcript = make_transcript(tool_heavy_jsonl)
    run = wait_for_run(transcript.runs.get().pk, timeout=60, statuses=("running",))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # mid-replay: past the token count
        current = Run.objects.get(pk=run.pk)
        if current.progress_stage == Run.Stage.REPLAYING and current.progress_done > 0:
            break
        time.sleep(0.05)
    children = _children(worker.proc.pid)
    for child in children:  # the busy one among them; the worker itself lives on
        os.kill(child, signal.SIGKILL)
    killed = time.monotonic()
    finished = wait_for_run(run.pk, timeout=180)
    elapsed = time.monotonic() - killed
    assert (finished.status, finished.attempts) == ("done", 2), (finished.error, worker.output())
    assert RunResult.objects.filter(run=finished).count() == 1
    assert "requeued" in worker.full_log()
    print(f"run killed mid-replay done {elapsed:.1f} s later")


def test_a_pool_process_killed_during_a_summary_call_leaves_a_run_that_completes_once(
    prefork: Any, make_transcript: Any, tmp_path: Path, settings: Any
) -> None:
    from tests.engine.test_pipeline import long_session

    stub = LLMStub().start()
    stub.slow(60, SUMMARY)  # the first call never comes back before the kill
    for _ in range(10):
        stub.ok(SUMMARY, input_tokens=20_000, output_tokens=800)
    try:
        worker = prefork(
            ANTHROPIC_BASE_URL=stub.url,
            ANTHROPIC_API_KEY=ANTHROPIC_TEST_KEY,
            NO_PROXY="127.0.0.1,localhost",
        )
        transcript = make_transcript(long_session(30).write(tmp_path / "long.jsonl"))
        wait_for_run(transcript.runs.get().pk)
        run = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
        run_tasks.run_replay.delay(run.pk)
        deadline = time.monotonic() + 60
        while not stub.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stub.requests, worker.output()
        for child in _children(worker.proc.pid):
            os.kill(child, signal.SIGKILL)
        killed = time.monotonic()
        finished = wait_for_run(run.pk, timeout=180)
        elapsed = time.monotonic() - killed
        assert finished.status == Run.Status.DONE, (finished.error, worker.output())
        data = RunResult.objects.get(run=finished).data
        summaries = [s for s in data["views"]["synthetic"] if s["kind"] == "summary"]
        assert summaries
        # the lost call was made again, every other once: no duplicate summaries stored
        assert len(stub.requests) == len(summaries) + 1 == SummaryEntry.objects.count() + 1
        print(f"run killed during a summary call done {elapsed:.1f} s later")
    finally:
        stub.stop()
