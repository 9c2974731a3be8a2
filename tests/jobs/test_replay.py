from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from contextlab import engine
from contextlab.jobs import lifecycle
from contextlab.jobs import replay as runner
from contextlab.runs.models import Run, RunResult
from contextlab.transcripts.models import TranscriptMessages

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


@pytest.fixture
def run(make_transcript, tool_heavy_jsonl):
    return make_transcript(tool_heavy_jsonl).runs.get()


def test_execute_run_replays_and_stores_the_result(run):
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE, run.error
    assert run.attempts == 1
    assert run.progress == 1.0
    assert run.summary["requests"] == run.progress_total > 0
    data = RunResult.objects.get(run=run).data
    assert data["session"]["mode"] == "recorded"
    assert len(data["requests"]) == run.summary["requests"]
    assert "main" in TranscriptMessages.objects.get(transcript=run.transcript).read()


def test_execute_run_twice_replays_once(run, monkeypatch):
    calls = []
    real = engine.replay

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "replay", counting)
    runner.execute_run(run.pk)
    runner.execute_run(run.pk)  # a redelivered message
    assert len(calls) == 1
    assert RunResult.objects.filter(run=run).count() == 1


def test_an_abandoned_run_is_taken_over(run):
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, heartbeat_at=timezone.now() - timedelta(hours=1), attempts=1
    )
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert (run.status, run.attempts) == (Run.Status.DONE, 2)


def test_engine_error_is_stored_with_its_reason(run, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("step 'snip' exploded on message 12")

    monkeypatch.setattr(engine, "replay", broken)
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "ValueError: step 'snip' exploded on message 12" in run.error
    assert not RunResult.objects.filter(run=run).exists()


def test_transcript_that_became_unreadable_fails_with_the_reason(run):
    with open(run.transcript.path, "w") as fh:
        fh.write("garbage\n")
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "could not be read" in run.error


def test_soft_time_limit_is_reported(run, monkeypatch, settings):
    from celery.exceptions import SoftTimeLimitExceeded

    def slow(*args, **kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(engine, "replay", slow)
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert f"time limit ({settings.CELERY_TASK_SOFT_TIME_LIMIT} s)" in run.error


def test_transient_database_error_requeues_and_propagates(run, monkeypatch):
    def flaky(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(engine, "replay", flaky)
    with pytest.raises(OperationalError):
        runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def test_progress_is_written_while_replaying(run, monkeypatch):
    monkeypatch.setattr(lifecycle, "PROGRESS_EVERY", 0.0)  # every call writes
    seen = []
    real = engine.replay

    def watching(session, config, **kwargs):
        def progress(done, total):
            kwargs_progress(done, total)
            seen.append(Run.objects.values_list("progress_done", "progress_total").get(pk=run.pk))

        kwargs_progress = kwargs.pop("progress")
        return real(session, config, progress=progress, **kwargs)

    monkeypatch.setattr(engine, "replay", watching)
    runner.execute_run(run.pk)
    assert seen
    assert seen[-1][0] == seen[-1][1] > 0


def _progress_writes(queries: CaptureQueriesContext) -> int:
    return sum(
        1
        for query in queries.captured_queries
        if query["sql"].startswith('UPDATE "runs_run"')
        and '"progress_stage" =' in query["sql"]
        and '"status" =' not in query["sql"].split("WHERE")[0]
    )


def test_a_replay_shorter_than_the_progress_period_writes_no_progress(run, monkeypatch):
    """Its claim stored progress 0 and its finish stores the whole: a write between them is
    a transaction on the shared database that no page could show."""
    monkeypatch.setattr(lifecycle, "PROGRESS_EVERY", 3600.0)
    with CaptureQueriesContext(connection) as queries:
        runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE, run.error
    assert run.progress_done == run.progress_total > 0
    assert _progress_writes(queries) == 0


def test_counting_and_replaying_share_one_progress_period(run, monkeypatch):
    """A long run's progress is written (its pages move) but at most once a period, whatever
    stage it is in: the count's writes and the replay's share one clock."""
    period = 0.1
    monkeypatch.setattr(lifecycle, "PROGRESS_EVERY", period)
    steps = 10
    real = engine.replay
    seen = []

    def slow(session, config, **kwargs):
        progress = kwargs["progress"]
        for step in range(1, steps + 1):
            time.sleep(0.03)
            progress(step, steps)
            seen.append(Run.objects.values_list("progress_stage", "progress_done").get(pk=run.pk))
        return real(session, config, **kwargs)

    monkeypatch.setattr(engine, "replay", slow)
    started = time.monotonic()
    with CaptureQueriesContext(connection) as queries:
        runner.execute_run(run.pk)
    elapsed = time.monotonic() - started
    writes = _progress_writes(queries)
    assert 1 <= writes <= elapsed / period + 1, (writes, elapsed)
    # a page polling meanwhile saw the replay's progress move
    assert any(stage == Run.Stage.REPLAYING and done > 0 for stage, done in seen), seen


def test_only_a_sessions_first_read_looks_for_the_upload_checks_parse_first(
    make_transcript, tool_heavy_jsonl, monkeypatch
):
    # no stored messages: no replay read the file yet, so the web's parse is there and a
    # prepared copy is not (a worker host: the missing copy's request saved)
    transcript = make_transcript(tool_heavy_jsonl)
    asked = []
    real = engine.load_session_cached

    def noting(*args, **kwargs):
        asked.append(kwargs["parsed_first"])
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "load_session_cached", noting)
    runner.load_session(transcript).upload.close()
    assert TranscriptMessages.objects.filter(transcript=transcript).exists()
    runner.load_session(transcript).upload.close()
    runner.load_session(transcript, store_messages=False).upload.close()  # a resumed run
    assert asked == [True, False, False]


def test_messages_streamed_to_the_database_are_the_engine_rows(make_transcript, tmp_path):
    from tests.engine.builders import TranscriptBuilder

    tricky = 'a tab\t, a newline\n, backslashes \\ \\\\ \\n, "quotes", → 🎉 日本語'
    b = TranscriptBuilder()
    b.prompt(tricky)
    b.tool_call("Read", {"file_path": "/src/a.py"}, "\n".join(f"{n:6}→{tricky}" for n in range(50)))
    b.assistant([{"type": "text", "text": tricky}])
    transcript = make_transcript(b.write(tmp_path / "tricky.jsonl"))
    session = engine.load_session(transcript.path)
    runner.store_messages_of(transcript, session)
    stored = TranscriptMessages.objects.get(transcript=transcript).read()
    assert stored == engine.messages_json(session)
    assert tricky in {b["text"] for row in stored["main"] for b in row["blocks"]}
    runner.store_messages_of(transcript, session)  # a row there already: kept, no error
    assert TranscriptMessages.objects.get(transcript=transcript).read() == stored


def test_messages_are_stored_in_parts_of_bounded_size(
    make_transcript, tool_heavy_jsonl, monkeypatch
):
    # PostgreSQL keeps at most 256 MB in one jsonb value: a session's messages past that
    # (sessions above ~550 MB) are stored in parts of PART_CHARS; here parts of 2,000 characters
    from contextlab.engine.results import message_store

    monkeypatch.setattr(message_store, "PART_CHARS", 2000)
    transcript = make_transcript(tool_heavy_jsonl)
    session = engine.load_session(transcript.path)
    runner.store_messages_of(transcript, session)
    stored = TranscriptMessages.objects.get(transcript=transcript)
    sizes = [
        (len(json.dumps(data["rows"])), len(data["rows"]))
        for data in stored.parts.order_by("seq").values_list("data", flat=True)
    ]
    assert len(sizes) > 5
    assert all(chars <= 2000 + 2 or rows == 1 for chars, rows in sizes)
    assert stored.read() == engine.messages_json(session)
    pieces = list(stored.pieces())
    assert [rows for _, rows in pieces] == [
        data["rows"] for data in stored.parts.order_by("seq").values_list("data", flat=True)
    ]
    assert len(str(stored.data)) < 200  # the row itself holds no message


def test_a_result_streamed_to_the_database_replaces_the_last_one(run):
    from contextlab.jobs import lifecycle

    first = {"requests": [{"text": 'tab\t newline\n backslash \\ "q" → 🎉'}], "summary": {}}
    lifecycle.finish(run.pk, first)
    assert RunResult.objects.get(run=run).data == first
    second = {"requests": [{"n": 1}, {"n": 2}], "summary": {"requests": 2}}
    lifecycle.finish(run.pk, second)  # a run done again: its new result replaces the old one
    assert RunResult.objects.get(run=run).data == second
