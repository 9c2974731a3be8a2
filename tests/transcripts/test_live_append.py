"""``POST /api/sessions/{id}/append``: a live session grows by the bytes ``contextlab watch``
sends, whole lines at a time, at the offset the server holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from contextlab import engine
from contextlab.jobs import replay as runner
from contextlab.runs.models import Run, RunResult
from contextlab.transcripts.models import AppendedMessages, Transcript, TranscriptMessages
from tests.conftest import DEMO

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

FULL = DEMO / "marot__spotter__tool_heavy.jsonl"  # 4 requests; its first 12 lines hold 2
LINES = FULL.read_bytes().splitlines(keepends=True)
START = b"".join(LINES[:12])
REST = b"".join(LINES[12:])


def create(client, headers, data: bytes = START) -> dict:
    response = client.post(
        "/api/sessions", {"file": SimpleUploadedFile("live.jsonl", data)}, **headers
    )
    assert response.status_code == 201, response.content
    return response.json()


def append(client, headers, session_id: int, offset, data: bytes, **extra):
    query = "" if offset is None else f"?offset={offset}"
    return client.generic(
        "POST",
        f"/api/sessions/{session_id}/append{query}",
        data,
        content_type="application/octet-stream",
        **headers,
        **extra,
    )


@pytest.mark.slow  # replays the session twice
def test_appended_lines_grow_the_session_and_replay_its_run(
    client, auth_header, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        first = create(client, auth_header)
    run = Run.objects.get(transcript_id=first["id"])
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    before = RunResult.objects.get(run=run).read()
    assert len(before["requests"]) == 2

    with django_capture_on_commit_callbacks(execute=False):
        response = append(client, auth_header, first["id"], len(START), REST)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["offset"] == len(FULL.read_bytes())
    assert body["taken"] == len(REST)
    assert body["pending"] == 0
    assert body["requests"] == 4
    assert body["replays"] == [run.pk]
    transcript = Transcript.objects.get(pk=first["id"])
    assert transcript.size == len(FULL.read_bytes())
    assert transcript.sha256 != first["sha256"]
    assert transcript.is_live
    assert Path(transcript.path).read_bytes() == FULL.read_bytes()
    # the stored messages are the shorter file's: no page reads them, and the replay stores
    # only the rows the append changed or added after them
    assert TranscriptMessages.objects.get(transcript=transcript).sha256 == first["sha256"]
    assert TranscriptMessages.current_data(transcript) is None
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    runner.execute_run(run.pk)
    after = RunResult.objects.get(run=run).read()
    assert len(after["requests"]) == 4
    stored = TranscriptMessages.objects.get(transcript=transcript)
    assert stored.sha256 == transcript.sha256
    assert AppendedMessages.objects.filter(messages=stored).count() == 1
    whole = engine.messages_json(engine.load_session(transcript.path, name=transcript.name))
    assert TranscriptMessages.current_data(transcript) == json.loads(json.dumps(whole))


def test_a_partial_last_line_waits_for_the_append_that_ends_it(client, auth_header):
    first = create(client, auth_header)
    line = LINES[12]
    head, rest = line[:40], line[40:]
    response = append(client, auth_header, first["id"], len(START), head)
    assert response.status_code == 200, response.content
    assert response.json()["taken"] == 0
    assert response.json()["pending"] == 40
    assert response.json()["offset"] == len(START) + 40  # the pending bytes count
    transcript = Transcript.objects.get(pk=first["id"])
    assert transcript.size == len(START)  # the file holds whole lines only
    response = append(client, auth_header, first["id"], len(START) + 40, rest)
    assert response.status_code == 200, response.content
    assert response.json()["taken"] == len(line)
    assert response.json()["pending"] == 0
    transcript.refresh_from_db()
    assert Path(transcript.path).read_bytes() == START + line


def test_an_offset_other_than_the_servers_is_a_409_with_the_servers_offset(client, auth_header):
    first = create(client, auth_header)
    for wrong in (0, len(START) - 1, len(START) + 5):
        response = append(client, auth_header, first["id"], wrong, REST)
        assert response.status_code == 409, response.content
        assert response.json()["offset"] == len(START)
        assert "offset" in response.json()["detail"]
    assert Transcript.objects.get(pk=first["id"]).size == len(START)


@pytest.mark.parametrize("offset", [None, "-1", "abc", "9" * 40])
def test_a_missing_or_malformed_offset_is_refused_clearly(client, auth_header, offset):
    first = create(client, auth_header)
    response = append(client, auth_header, first["id"], offset, REST)
    assert response.status_code in (400, 422), response.content
    assert Transcript.objects.get(pk=first["id"]).size == len(START)


def test_an_append_over_the_size_limits_is_a_413(client, auth_header, settings):
    first = create(client, auth_header)
    settings.LIVE_APPEND_MAX_BYTES = 1024
    response = append(client, auth_header, first["id"], len(START), REST)
    assert response.status_code == 413
    assert "LIVE_APPEND_MAX_BYTES" in response.json()["detail"]
    settings.LIVE_APPEND_MAX_BYTES = 16 * 1024**2
    settings.UPLOAD_MAX_BYTES = len(START) + 10
    response = append(client, auth_header, first["id"], len(START), REST)
    assert response.status_code == 413
    assert "upload limit" in response.json()["detail"]
    assert Transcript.objects.get(pk=first["id"]).size == len(START)


def test_hostile_lines_are_stored_as_problems_not_errors(client, auth_header):
    first = create(client, auth_header)
    response = append(client, auth_header, first["id"], len(START), b"<script>x</script>\n\x00\n")
    assert response.status_code == 200, response.content
    transcript = Transcript.objects.get(pk=first["id"])
    assert transcript.problems  # the reader listed the lines it could not use
    assert transcript.request_count == 2


def test_only_owner_and_editors_append(client, auth_header, other_auth_header):
    first = create(client, auth_header)
    response = append(client, other_auth_header, first["id"], len(START), REST)
    assert response.status_code == 404
    assert Transcript.objects.get(pk=first["id"]).size == len(START)


def test_an_archive_session_does_not_grow_by_appending(client, auth_header, tmp_path):
    import gzip

    response = client.post(
        "/api/sessions",
        {"file": SimpleUploadedFile("live.jsonl.gz", gzip.compress(START))},
        **auth_header,
    )
    assert response.status_code == 201, response.content
    session = response.json()
    response = append(client, auth_header, session["id"], session["size"], REST)
    assert response.status_code == 422
    assert "plain .jsonl" in response.json()["detail"]


def test_an_append_larger_than_a_form_body_is_taken(client, auth_header, settings):
    """A live append is held to LIVE_APPEND_MAX_BYTES, not to DATA_UPLOAD_MAX_MEMORY_SIZE."""
    first = create(client, auth_header)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    assert len(REST) > 1024
    response = append(client, auth_header, first["id"], len(START), REST)
    assert response.status_code == 200, response.content
    assert response.json()["taken"] == len(REST)


@pytest.mark.slow  # replays the session twice
def test_a_session_that_grows_while_its_run_replays_is_replayed_again(
    client, auth_header, monkeypatch, django_capture_on_commit_callbacks
):
    """An append leaves a running run alone (``replay_again`` requeues finished ones): the run
    sees, when it stores its result, that the file changed, and replays the grown one."""
    with django_capture_on_commit_callbacks(execute=False):
        first = create(client, auth_header)
    run = Run.objects.get(transcript_id=first["id"])
    real = runner.replay_run
    replayed: list[int] = []

    def replay_while_claude_writes(run, session, summary=None, **kwargs):
        data = real(run, session, summary, **kwargs)
        if not replayed:  # Claude Code wrote on while the worker replayed: an append lands
            with django_capture_on_commit_callbacks(execute=False):
                response = append(client, auth_header, first["id"], len(START), REST)
            assert response.status_code == 200, response.content
            assert response.json()["replays"] == []  # the run is running: not requeued
        replayed.append(len(data["requests"]))
        return data

    monkeypatch.setattr(runner, "replay_run", replay_while_claude_writes)
    runner.execute_run(run.pk)
    assert replayed == [2, 4]
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert len(RunResult.objects.get(run=run).read()["requests"]) == 4
    transcript = Transcript.objects.get(pk=first["id"])
    stored = TranscriptMessages.objects.get(transcript=transcript).read()
    main = next(t for t in transcript.threads if t["kind"] == "main")
    assert len(stored[main["id"]]) == main["messages"]  # the grown file's messages


@pytest.mark.slow  # replays the session twice
def test_the_explorer_of_a_live_session_polls_and_follows_the_last_request(
    client, auth_header, user, django_capture_on_commit_callbacks
):
    from contextlab.runs import live as live_pages

    with django_capture_on_commit_callbacks(execute=False):
        first = create(client, auth_header)
    run = Run.objects.get(transcript_id=first["id"])
    runner.execute_run(run.pk)
    client.force_login(user)
    page = f"/sessions/{first['id']}/requests/0/?run={run.pk}"
    assert 'id="live-badge"' not in client.get(page).content.decode()  # not appended to yet
    with django_capture_on_commit_callbacks(execute=False):
        append(client, auth_header, first["id"], len(START), LINES[12])
    # the run replays the grown file: a poll meanwhile changes nothing
    poll = {"HTTP_HX_REQUEST": "true"}
    assert client.get(page + "&live=1&follow=1", **poll).status_code == 204
    runner.execute_run(run.pk)
    run.refresh_from_db()
    html = client.get(page).content.decode()
    assert 'id="live-badge"' in html
    assert "live=1" in html
    assert "follow=1" not in html  # request 1 of 2 is not the last
    seen = live_pages.result_version(run)
    assert client.get(page + f"&live=1&seen={seen}", **poll).status_code == 204
    followed = client.get(page + "&live=1&follow=1&seen=old", **poll)
    assert followed.status_code == 200
    count = len(RunResult.objects.get(run=run).read()["requests"])
    assert f'data-index="{count - 1}"' in followed.content.decode()
    # the report's session card polls too
    report = client.get(f"/sessions/{first['id']}/").content.decode()
    assert 'hx-select="#session-card"' in report


def test_each_append_reads_on_from_the_last_ones_read(
    client, auth_header, settings, tmp_path, caplog
):
    """The first append reads the file whole and leaves its read's state; every later one
    parses only its own lines (``engine.load_growing``) and leaves the columns a whole read
    gives."""
    from contextlab import engine
    from contextlab.engine.input.sources.claude_code.growing import STATE_VERSION
    from contextlab.transcripts.services import session_fields

    settings.SESSION_CACHE_DIR = tmp_path / "cache"
    created = create(client, auth_header)
    pieces = [b"".join(LINES[12:18]), b"".join(LINES[18:26]), b"".join(LINES[26:])]
    offset = len(START)
    cache = Path(settings.SESSION_CACHE_DIR)
    caplog.set_level("INFO", logger="contextlab.transcripts.live")
    for piece in pieces:
        response = append(client, auth_header, created["id"], offset, piece)
        assert response.status_code == 200, response.content
        offset = response.json()["offset"]
        transcript = Transcript.objects.get(pk=created["id"])
        states = sorted(p.name for p in cache.glob("*.reading-v*.pickle"))
        # only the state of the version the server holds: the next append reads on from it
        assert states == [f"{transcript.sha256}.reading-v{STATE_VERSION}.pickle"]
    reads = [
        r.getMessage().rsplit(": ", 1)[1] for r in caplog.records if "grew by" in r.getMessage()
    ]
    # the upload left no state (a file may never grow): the first append reads it whole
    assert reads == [
        "read whole",
        "read on from the last append's read",
        "read on from the last append's read",
    ]
    whole = engine.load_session(transcript.path, name=transcript.name)
    expected = session_fields(
        whole,
        stored_name=transcript.file,
        name=transcript.name,
        size=transcript.size,
        sha256=transcript.sha256,
    )
    for field in ("request_count", "max_prompt_tokens", "threads", "problems", "title"):
        assert getattr(transcript, field) == expected[field], field


@pytest.mark.slow  # replays the session after each of three appends, and once more whole
def test_a_run_replayed_after_each_append_equals_a_replay_of_the_whole_file(
    client, auth_header, django_capture_on_commit_callbacks, settings, tmp_path
):
    """What the worker stores once the session ended, after appends (the web's read-on parse,
    the earlier version's carried token counts, updates that went on from the last replay's
    state), is what a fresh replay of the grown file gives: identical JSON."""
    from datetime import timedelta

    from django.utils import timezone

    from contextlab import engine
    from contextlab.jobs import lifecycle

    settings.SESSION_CACHE_DIR = tmp_path / "cache"
    settings.LIVE_REFIT_PERCENT = 100_000  # each append goes on from the last replay
    with django_capture_on_commit_callbacks(execute=False):
        created = create(client, auth_header)
    run = Run.objects.get(transcript_id=created["id"])
    runner.execute_run(run.pk)
    offset = len(START)
    for piece in (b"".join(LINES[12:18]), b"".join(LINES[18:26]), b"".join(LINES[26:])):
        with django_capture_on_commit_callbacks(execute=False):
            response = append(client, auth_header, created["id"], offset, piece)
        assert response.status_code == 200, response.content
        offset = response.json()["offset"]
        runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    # the last update went on from the state of the one before (provisional): the session
    # ends (no append for LIVE_FINAL_AFTER) and its run is replayed whole
    assert run.provisional
    Transcript.objects.filter(pk=created["id"]).update(
        appended_at=timezone.now() - timedelta(seconds=settings.LIVE_FINAL_AFTER + 1)
    )
    assert lifecycle.finalize_ended_live() == [run.pk]
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert not run.provisional
    stored = RunResult.objects.get(run=run).read()
    transcript = Transcript.objects.get(pk=created["id"])
    fresh = engine.load_session_cached(transcript.path, cache_dir=tmp_path / "fresh")
    try:
        whole = runner.replay_run(run, fresh)
    finally:
        fresh.close()
    assert len(stored["requests"]) == 4
    assert json.dumps(stored["requests"], sort_keys=True) == json.dumps(
        whole["requests"], sort_keys=True
    )
