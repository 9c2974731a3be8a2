"""A what-if run whose summaries come from an LLM, through a real worker, Redis and PostgreSQL.

The worker's Anthropic SDK talks over real HTTP to the stub server on loopback.
"""

from __future__ import annotations

import pytest

from contextlab.runs import tasks as run_tasks
from contextlab.runs.models import Run, RunResult
from contextlab.summaries.models import RunSummarizer, SummaryEntry
from tests.conftest import flush_broker, require_services, start_worker, wait_for_run
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
