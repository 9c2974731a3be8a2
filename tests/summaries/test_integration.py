"""A what-if run whose summaries come from an LLM, through a real worker, Redis and PostgreSQL.

The worker's Anthropic SDK talks over real HTTP to the stub server on loopback.
"""

from __future__ import annotations

import time

import pytest

from contextlab.jobs import tasks as run_tasks
from contextlab.runs.models import Run, RunResult
from contextlab.summaries.models import RunSummarizer, SummaryEntry
from tests.conftest import flush_broker, require_services, start_beat, start_worker, wait_for_run
from tests.engine.conftest import ANTHROPIC_TEST_KEY
from tests.llm_stub import LLMStub
from tests.summaries.test_runner import SUMMARY, whatif_run

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]


def test_summaries_are_fetched_by_their_own_tasks_on_a_real_worker(make_transcript, tmp_path):
    from tests.engine.test_pipeline import long_session

    require_services()
    flush_broker()
    stub = LLMStub().start()
    for _ in range(10):
        stub.ok(SUMMARY, input_tokens=20_000, output_tokens=800)
    worker = start_worker(
        tmp_path,
        "summaries",
        ANTHROPIC_BASE_URL=stub.url,
        ANTHROPIC_API_KEY=ANTHROPIC_TEST_KEY,
        NO_PROXY="127.0.0.1,localhost",
    )
    try:
        transcript = make_transcript(long_session(30).write(tmp_path / "long.jsonl"))
        wait_for_run(transcript.runs.get().pk)  # the recorded run queued by the upload
        run = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
        run_tasks.run_replay.delay(run.pk)
        run = wait_for_run(run.pk, timeout=180)
        assert run.status == Run.Status.DONE, run.error + worker.output()
        data = RunResult.objects.get(run=run).data
        summaries = [s for s in data["views"]["synthetic"] if s["kind"] == "summary"]
        assert summaries
        assert all(s["backend"] == "anthropic" and not s.get("fallback_reason") for s in summaries)
        assert len(stub.requests) == len(summaries) == SummaryEntry.objects.count()
        assert RunSummarizer.objects.get(run=run).calls == len(summaries)
        assert ANTHROPIC_TEST_KEY not in worker.output()
    finally:
        worker.stop()
        stub.stop()


def test_a_worker_killed_during_a_summary_call_leaves_a_run_the_next_worker_finishes(
    make_transcript, tmp_path, settings
):
    """The fetch task holds its run "running" with a heartbeat while it waits on the backend:
    killed there, the run goes stale, is requeued, resumes from its checkpoint and asks again."""
    from tests.engine.test_pipeline import long_session

    require_services()
    flush_broker()
    settings.RUN_STALE_AFTER = 2
    stub = LLMStub().start()
    stub.slow(60, SUMMARY)  # the first call never comes back before the kill
    for _ in range(10):
        stub.ok(SUMMARY, input_tokens=20_000, output_tokens=800)
    env = {
        "ANTHROPIC_BASE_URL": stub.url,
        "ANTHROPIC_API_KEY": ANTHROPIC_TEST_KEY,
        "NO_PROXY": "127.0.0.1,localhost",
        "RUN_STALE_AFTER": "2",
        "RUN_HEARTBEAT_EVERY": "1",
    }
    try:
        doomed = start_worker(tmp_path, "doomed", **env)
        try:
            transcript = make_transcript(long_session(30).write(tmp_path / "long.jsonl"))
            wait_for_run(transcript.runs.get().pk)
            run = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
            run_tasks.run_replay.delay(run.pk)
            deadline = time.monotonic() + 60
            while not stub.requests and time.monotonic() < deadline:
                time.sleep(0.05)
            assert stub.requests, doomed.output()
            assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
            doomed.kill()  # mid-call, no chance to clean up
        finally:
            doomed.stop()
        time.sleep(2.5)  # its heartbeat is now stale
        fresh = start_worker(tmp_path, "fresh", **env)
        beat = start_beat(tmp_path, "fresh", **env)  # sends the recovery as it starts
        try:
            run = wait_for_run(run.pk, timeout=120)
            assert run.status == Run.Status.DONE, run.error + fresh.output()
            assert run.attempts >= 2
        finally:
            beat.stop()
            fresh.stop()
        data = RunResult.objects.get(run=run).data
        summaries = [s for s in data["views"]["synthetic"] if s["kind"] == "summary"]
        assert summaries
        assert all(s["backend"] == "anthropic" and not s.get("fallback_reason") for s in summaries)
        # the lost call was made again: one more request than summaries
        assert len(stub.requests) == len(summaries) + 1 == SummaryEntry.objects.count() + 1
    finally:
        stub.stop()


def test_an_ab_pair_on_two_workers_pays_for_each_summary_once(make_transcript, tmp_path):
    """Two runs that need the same summaries at the same moment, on two real workers: each
    summary is one backend call; the other run waits for it and reads it."""
    from tests.engine.test_pipeline import long_session

    require_services()
    flush_broker()
    stub = LLMStub().start()
    for _ in range(20):
        stub.slow(1.0, SUMMARY)  # long enough for the two fetches to overlap
    env = {
        "ANTHROPIC_BASE_URL": stub.url,
        "ANTHROPIC_API_KEY": ANTHROPIC_TEST_KEY,
        "NO_PROXY": "127.0.0.1,localhost",
    }
    workers = [start_worker(tmp_path, f"ab{n}", **env) for n in range(2)]
    try:
        transcript = make_transcript(long_session(30).write(tmp_path / "long.jsonl"))
        wait_for_run(transcript.runs.get().pk)
        runs = [
            whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6") for _ in "ab"
        ]
        for run in runs:
            run_tasks.run_replay.delay(run.pk)
        runs = [wait_for_run(run.pk, timeout=180) for run in runs]
        output = "".join(w.output() for w in workers)
        assert all(r.status == Run.Status.DONE for r in runs), [r.error for r in runs] + [output]
    finally:
        for worker in workers:
            worker.stop()
        stub.stop()
    texts = [
        [
            s["text"]
            for s in RunResult.objects.get(run=r).data["views"]["synthetic"]
            if s["kind"] == "summary"
        ]
        for r in runs
    ]
    assert texts[0]
    assert texts[0] == texts[1]
    assert len(stub.requests) == SummaryEntry.objects.count() == len(texts[0])
    assert sum(RunSummarizer.objects.get(run=r).calls for r in runs) == len(texts[0])
