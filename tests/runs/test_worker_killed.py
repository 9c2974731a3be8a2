"""A worker killed (SIGKILL) mid-replay must not leave its run "running" forever."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from contextlab.runs.models import Run
from tests.conftest import flush_broker, require_services, start_beat, start_worker, wait_for_run

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]

SLOW_WORKER = Path(__file__).resolve().parent / "slow_worker.py"


def test_killed_worker_run_is_requeued_and_finished_by_the_next_worker(
    make_transcript, tool_heavy_jsonl, tmp_path, settings
):
    require_services()
    flush_broker()
    settings.RUN_STALE_AFTER = 2
    fast_beats = {"RUN_STALE_AFTER": "2", "RUN_HEARTBEAT_EVERY": "1"}
    slow = start_worker(tmp_path, "slow", script=SLOW_WORKER, **fast_beats)
    try:
        transcript = make_transcript(tool_heavy_jsonl)
        run = wait_for_run(transcript.runs.get().pk, timeout=60, statuses=("running",))
        deadline = time.monotonic() + 30
        # mid-replay: past the token count (whose progress counts characters)
        while time.monotonic() < deadline:
            current = Run.objects.get(pk=run.pk)
            if current.progress_stage == Run.Stage.REPLAYING and current.progress_done > 0:
                break
            time.sleep(0.05)
        slow.kill()  # mid-run, no chance to clean up
    finally:
        slow.stop()
    run.refresh_from_db()
    assert run.status == "running"
    assert run.progress_stage == Run.Stage.REPLAYING
    assert 0 < run.progress_done < run.progress_total

    time.sleep(2.5)  # its heartbeat is now stale
    fresh = start_worker(tmp_path, "fresh", **fast_beats)
    beat = start_beat(tmp_path, "fresh", **fast_beats)  # sends the recovery as it starts
    try:
        run = wait_for_run(run.pk, timeout=60)
        assert (run.status, run.attempts) == ("done", 2), run.error + fresh.output()
        assert "requeued" in fresh.full_log()
    finally:
        beat.stop()
        fresh.stop()


def test_a_run_that_keeps_killing_workers_is_failed_with_a_message(
    make_transcript, short_jsonl, settings
):
    require_services()
    from datetime import timedelta

    from django.utils import timezone

    from contextlab.jobs import tasks

    settings.RUN_MAX_ATTEMPTS = 2
    transcript = make_transcript(short_jsonl)
    run = transcript.runs.get()
    Run.objects.filter(pk=run.pk).update(
        status="running", attempts=2, heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    tasks.recover_runs()
    run.refresh_from_db()
    assert run.status == "failed"
    assert "stopped responding" in run.error


def test_a_live_worker_recovers_runs_abandoned_while_it_runs(
    make_transcript, short_jsonl, tmp_path, settings
):
    """A pool process killed under a live worker: nobody polls, beat's periodic recovery
    requeues it."""
    require_services()
    flush_broker()
    from datetime import timedelta

    from django.utils import timezone

    settings.RUN_STALE_AFTER = 2
    worker = start_worker(tmp_path, "watchful", RUN_STALE_AFTER="2", RUN_HEARTBEAT_EVERY="1")
    beat = start_beat(tmp_path, "watchful", RUN_STALE_AFTER="2")
    try:
        transcript = make_transcript(short_jsonl)
        run = wait_for_run(transcript.runs.get().pk, timeout=60)
        assert run.status == "done"
        Run.objects.filter(pk=run.pk).update(
            status="running", attempts=1, heartbeat_at=timezone.now() - timedelta(minutes=5)
        )
        run = wait_for_run(run.pk, timeout=60)
        assert (run.status, run.attempts) == ("done", 2), run.error + worker.output()
    finally:
        beat.stop()
        worker.stop()
