"""A run's result is stored with its requests in parts of bounded size (``RunResultPart``:
PostgreSQL holds at most 256 MB in one ``jsonb`` value) and read back whole by every reader;
a result stored whole before parts still reads.

These run on PostgreSQL (the suite's database) and, through ``test_sqlite_backend_passes``, on
SQLite (the same file in a child pytest with ``DATABASE_URL=sqlite://``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection

from contextlab import engine
from contextlab.jobs import lifecycle
from contextlab.jobs import replay as runner
from contextlab.runs import services as run_services
from contextlab.runs.models import REQUESTS_IN_PARTS, Run, RunResult, RunResultPart
from contextlab.search import services as search
from contextlab.search.models import Entry
from tests.conftest import assert_passes_on_sqlite

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

#: characters of JSON a part holds at most in these tests: a few requests each
SMALL_PART = 3000


def fresh_result(path: Path) -> dict:
    """The engine's recorded replay of ``path``, as JSON values (what a store gives back)."""
    session = engine.load_session(str(path))
    config, preset = engine.resolve_config("auto", version=session.version)
    return json.loads(json.dumps(engine.replay(session, config, preset_name=preset).to_json()))


def test_a_replay_past_the_part_size_is_stored_in_parts_and_reads_whole(
    make_transcript, tool_heavy_jsonl, settings
):
    settings.RUN_RESULT_PART_CHARS = SMALL_PART
    run = make_transcript(tool_heavy_jsonl).runs.get()
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE, run.error
    stored = RunResult.objects.get(run=run)
    requests = stored.read()["requests"]
    assert len(requests) == run.progress_total > 0
    # the row itself holds no request: they are in parts, each of at most the part size
    assert "requests" not in stored.data
    assert stored.data[REQUESTS_IN_PARTS] == len(requests)
    parts = list(RunResultPart.objects.filter(result=stored).order_by("seq"))
    assert len(parts) > 1
    assert [p.seq for p in parts] == list(range(len(parts)))
    for part in parts:
        text = ", ".join(json.dumps(r) for r in part.data)
        assert len(text) <= SMALL_PART or len(part.data) == 1
    assert [r for p in parts for r in p.data] == requests
    # the same result the engine gives, and the same as when it fits one part: then stored
    # in the row, as before parts
    fresh = fresh_result(tool_heavy_jsonl)
    assert [r["model_tokens"] for r in requests] == [r["model_tokens"] for r in fresh["requests"]]
    whole = stored.read()
    settings.RUN_RESULT_PART_CHARS = 10**9
    lifecycle._store_result(run.pk, whole)
    again = RunResult.objects.get(run=run)
    assert not RunResultPart.objects.filter(result=again).exists()
    assert again.data == whole
    assert again.read() == whole
    # the key order as the engine wrote it (the worker adds its own keys after the engine's)
    # where the database keeps it (SQLite's JSON text)
    if connection.vendor != "postgresql":
        assert [key for key in whole if key in fresh] == list(fresh)


def test_every_reader_reads_the_requests_of_a_result_in_parts(
    make_transcript, tool_heavy_jsonl, settings
):
    settings.RUN_RESULT_PART_CHARS = SMALL_PART
    run = make_transcript(tool_heavy_jsonl).runs.get()
    runner.execute_run(run.pk)
    run.refresh_from_db()
    stored = RunResult.objects.get(run=run)
    assert RunResultPart.objects.filter(result=stored).count() > 1
    whole = stored.read()
    # the report's reader
    assert run_services.result_data(run) == whole
    # the search index, rebuilt from the stored result (not the requests the worker held)
    transcript = run.transcript
    indexed = list(Entry.objects.filter(transcript=transcript).values_list("pk", "request"))
    assert indexed
    Entry.objects.filter(transcript=transcript).delete()
    assert search.index_session(transcript, run=run) is not None
    again = list(Entry.objects.filter(transcript=transcript).values_list("request", flat=True))
    assert sorted(again) == sorted(request for _, request in indexed)


def test_a_result_stored_whole_before_parts_still_reads(
    make_transcript, tool_heavy_jsonl, settings
):
    run = make_transcript(tool_heavy_jsonl).runs.get()
    runner.execute_run(run.pk)
    run.refresh_from_db()
    whole = RunResult.objects.get(run=run).read()
    # the row as the worker wrote it before parts: one value, the requests in it
    RunResult.objects.filter(run=run).delete()
    RunResult.objects.create(run=run, data=whole)
    assert not RunResultPart.objects.exists()
    old = RunResult.objects.get(run=run)
    assert old.read() == whole
    assert old.requests() == whole["requests"]
    assert run_services.result_data(Run.objects.get(pk=run.pk)) == whole
    transcript = run.transcript
    Entry.objects.filter(transcript=transcript).delete()
    assert search.index_session(transcript, run=run) is not None
    assert Entry.objects.filter(transcript=transcript).exists()
    # replayed again, it is stored in parts; the old row's value goes
    settings.RUN_RESULT_PART_CHARS = SMALL_PART
    lifecycle._store_result(run.pk, whole)
    new = RunResult.objects.get(run=run)
    assert "requests" not in new.data
    assert new.read() == whole


def test_a_result_without_requests_has_no_part(make_transcript, short_jsonl):
    run = make_transcript(short_jsonl).runs.get()
    lifecycle._store_result(run.pk, {"summary": {"requests": 0}, "requests": []})
    stored = RunResult.objects.get(run=run)
    assert not RunResultPart.objects.filter(result=stored).exists()
    assert stored.read() == {"summary": {"requests": 0}, "requests": []}


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="runs the SQLite pass from the PostgreSQL one"
)
@pytest.mark.slow
def test_sqlite_backend_passes():
    """The same tests on SQLite (``make run``'s database)."""
    assert_passes_on_sqlite(__file__)
