"""A run's result is stored with its requests in parts of bounded size (``RunResultPart``:
PostgreSQL holds at most 256 MB in one ``jsonb`` value) and read back whole by every reader;
a result stored whole before parts still reads.

These run on PostgreSQL (the suite's database) and, through ``test_sqlite_backend_passes``, on
SQLite (the same file in a child pytest with ``DATABASE_URL=sqlite://``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection, transaction

from contextlab import engine
from contextlab.jobs import lifecycle
from contextlab.jobs import replay as runner
from contextlab.runs import services as run_services
from contextlab.runs.models import (
    LIVE_PARTS_KEY,
    REQUESTS_IN_PARTS,
    Run,
    RunResult,
    RunResultPart,
    RunResultViewPart,
)
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


def _store_live(run_id: int, data: dict, capture) -> None:
    with capture(execute=True), transaction.atomic():
        lifecycle._store_result(run_id, data, live=True)


def _parts(run_id: int) -> list[tuple[int, int]]:
    return list(
        RunResultPart.objects.filter(result_id=run_id).order_by("seq").values_list("seq", "pk")
    )


def test_a_live_result_keeps_its_unchanged_parts_across_an_append(
    make_transcript, tool_heavy_jsonl, settings, django_capture_on_commit_callbacks
):
    """A live session's provisional result is stored in parts of a fixed number of requests;
    the next append's store keeps the full parts whose requests did not change (the same
    rows), rewrites the rest and the head, and reads back as the result it was given."""
    settings.RUN_RESULT_LIVE_PART_REQUESTS = 1
    run = make_transcript(tool_heavy_jsonl).runs.get()
    whole = fresh_result(tool_heavy_jsonl)
    requests = whole["requests"]
    assert len(requests) >= 4
    before = {**whole, "requests": requests[:-2], "summary": {"requests": len(requests) - 2}}
    _store_live(run.pk, before, django_capture_on_commit_callbacks)
    stored = RunResult.objects.get(run=run)
    assert stored.read() == before
    assert LIVE_PARTS_KEY in stored.data  # not in what it reads as
    first = _parts(run.pk)
    assert len(first) == len(requests) - 2
    _store_live(run.pk, whole, django_capture_on_commit_callbacks)
    assert RunResult.objects.get(run=run).read() == whole
    after = _parts(run.pk)
    # the earlier result's parts kept, as stored; the appended requests' parts added
    assert after[: len(first)] == first
    assert [seq for seq, _ in after] == list(range(len(requests)))
    # an earlier row changed (a whole replay's): its part and those after it are rewritten
    changed = json.loads(json.dumps(whole))
    changed["requests"][1]["model_tokens"] = -1
    _store_live(run.pk, changed, django_capture_on_commit_callbacks)
    assert RunResult.objects.get(run=run).read() == changed
    again = _parts(run.pk)
    assert again[:1] == after[:1]
    assert not {pk for _, pk in again[1:]} & {pk for _, pk in after}
    # parts of several requests: a part the append filled is written again
    settings.RUN_RESULT_LIVE_PART_REQUESTS = 3
    _store_live(run.pk, before, django_capture_on_commit_callbacks)
    _store_live(run.pk, whole, django_capture_on_commit_callbacks)
    assert RunResult.objects.get(run=run).read() == whole


def test_a_live_result_another_store_wrote_is_written_whole(
    make_transcript, tool_heavy_jsonl, settings, django_capture_on_commit_callbacks
):
    """Parts are kept only when the database holds the ones this worker stored last: after a
    store by another worker (or a whole replay's), or in a worker that stored none, every part
    is written."""
    settings.RUN_RESULT_LIVE_PART_REQUESTS = 4
    run = make_transcript(tool_heavy_jsonl).runs.get()
    whole = fresh_result(tool_heavy_jsonl)
    _store_live(run.pk, whole, django_capture_on_commit_callbacks)
    first = _parts(run.pk)
    # another worker's store of the same rows: this one's memory is not what is stored
    lifecycle._LIVE_PARTS.clear()
    _store_live(run.pk, whole, django_capture_on_commit_callbacks)
    second = _parts(run.pk)
    assert not {pk for _, pk in second} & {pk for _, pk in first}
    lifecycle._LIVE_PARTS[run.pk] = (lifecycle._LIVE_PARTS[run.pk][0] + "x", [])
    _store_live(run.pk, whole, django_capture_on_commit_callbacks)
    assert not {pk for _, pk in _parts(run.pk)} & {pk for _, pk in second}
    # a whole replay's result (not provisional) replaces it, its parts too
    lifecycle._store_result(run.pk, whole)
    assert not RunResultPart.objects.filter(result_id=run.pk).exists()
    assert RunResult.objects.get(run=run).read() == whole
    assert run.pk not in lifecycle._LIVE_PARTS


def _view_parts(run_id: int) -> dict[tuple[str, int], int]:
    rows = RunResultViewPart.objects.filter(result_id=run_id).values_list("kind", "seq", "pk")
    return {(kind, seq): pk for kind, seq, pk in rows}


def test_a_live_result_keeps_its_unchanged_view_parts_across_an_append(
    make_transcript, tool_heavy_jsonl, settings, django_capture_on_commit_callbacks, monkeypatch
):
    """A live result's ``views`` (the transform log and synthetic messages, about 1 MB of
    JSON at 64 MB) are stored in parts of a fixed number of entries, not in the head: the
    next append's store writes only the parts that changed (entries appended, an earlier
    transform closed), and every reader reads the result it was given."""
    settings.RUN_RESULT_LIVE_PART_REQUESTS = 2
    monkeypatch.setattr(lifecycle, "LIVE_VIEW_PART_ENTRIES", 2)
    run = make_transcript(tool_heavy_jsonl).runs.get()
    whole = fresh_result(tool_heavy_jsonl)
    whole["views"]["transforms"] = [
        {"thread": "main", "message": n, "block": 0, "kind": "cleared", "first": n, "last": None}
        for n in range(7)
    ]
    whole["views"]["synthetic"] = [{"id": f"s:{n}", "text": "x" * n} for n in range(3)]
    before = json.loads(json.dumps(whole))
    del before["views"]["transforms"][5:]
    _store_live(run.pk, before, django_capture_on_commit_callbacks)
    stored = RunResult.objects.get(run=run)
    assert "views" not in stored.data  # in parts
    assert stored.read() == before
    first = _view_parts(run.pk)
    assert sorted(first) == [("synthetic", 0), ("synthetic", 1)] + [
        ("transforms", seq) for seq in range(3)
    ]
    # entries appended: the full parts kept as stored, the last one and the new written
    _store_live(run.pk, whole, django_capture_on_commit_callbacks)
    assert RunResult.objects.get(run=run).read() == whole
    after = _view_parts(run.pk)
    kept = [("synthetic", 0), ("synthetic", 1), ("transforms", 0), ("transforms", 1)]
    assert {key: after[key] for key in kept} == {key: first[key] for key in kept}
    assert after[("transforms", 2)] != first[("transforms", 2)]
    assert ("transforms", 3) in after
    # an earlier transform closed (the engine's own entry changed in place): its part alone
    whole["views"]["transforms"][3]["last"] = 6
    _store_live(run.pk, whole, django_capture_on_commit_callbacks)
    assert RunResult.objects.get(run=run).read() == whole
    closed = _view_parts(run.pk)
    assert closed[("transforms", 0)] == after[("transforms", 0)]
    assert closed[("transforms", 1)] != after[("transforms", 1)]
    assert closed[("transforms", 2)] == after[("transforms", 2)]
    # fewer entries (a whole replay's live result): the parts past them go
    _store_live(run.pk, before, django_capture_on_commit_callbacks)
    assert RunResult.objects.get(run=run).read() == before
    assert max(seq for kind, seq in _view_parts(run.pk) if kind == "transforms") == 2
    # another worker's store: every part written again
    lifecycle._LIVE_PARTS.clear()
    _store_live(run.pk, whole, django_capture_on_commit_callbacks)
    assert not set(_view_parts(run.pk).values()) & set(closed.values())
    assert RunResult.objects.get(run=run).read() == whole
    # the findings stored after the result keep the views in parts
    finished = Run.objects.filter(pk=run.pk)
    finished.update(status=Run.Status.DONE, finished_at=lifecycle.timezone.now())
    at = finished.values_list("finished_at", flat=True).get()
    assert lifecycle.store_findings(run.pk, at, {"waste_report": {"waste": []}})
    assert RunResult.objects.get(run=run).read() == {**whole, "waste_report": {"waste": []}}
    # a finished (not live) result holds its views in its head, and no part
    lifecycle._store_result(run.pk, whole)
    assert not RunResultViewPart.objects.filter(result_id=run.pk).exists()
    assert RunResult.objects.get(run=run).data["views"] == whole["views"]
    assert RunResult.objects.get(run=run).read() == whole


def test_an_append_keeps_a_live_runs_result_for_its_update(
    make_transcript, tool_heavy_jsonl, settings, django_capture_on_commit_callbacks
):
    """An append requeues a live session's runs without deleting their results (the update
    keeps their unchanged parts); no reader reads one until the run is done again."""
    run = make_transcript(tool_heavy_jsonl).runs.get()
    runner.execute_run(run.pk)
    assert lifecycle.replay_again([run.pk], live=True) == [run.pk]
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert RunResult.objects.filter(run=run).exists()
    assert run_services.result_data(run) is None
    # a whole replay's requeue deletes it
    Run.objects.filter(pk=run.pk).update(status=Run.Status.DONE)
    assert lifecycle.replay_again([run.pk]) == [run.pk]
    assert not RunResult.objects.filter(run=run).exists()


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="runs the SQLite pass from the PostgreSQL one"
)
@pytest.mark.slow
def test_sqlite_backend_passes():
    """The same tests on SQLite (``make run``'s database)."""
    assert_passes_on_sqlite(__file__)
