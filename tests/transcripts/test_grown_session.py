"""A longer version of a session already uploaded updates that session (SessionEnd uploads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextlab.jobs import replay as runner
from contextlab.runs.models import Run, RunResult
from contextlab.transcripts import services
from contextlab.transcripts.models import Transcript, TranscriptMessages
from tests.conftest import DEMO

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

SHORT = DEMO / "marot__spotter__tool_heavy.jsonl"  # 4 requests; its first 12 lines hold 2


def first_lines(path: Path, count: int, target: Path) -> Path:
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) > count
    target.write_bytes(b"".join(lines[:count]))
    return target


def store(user, path: Path, name: str | None = None):
    with path.open("rb") as fh:
        return services.store_upload(owner=user, name=name or path.name, content=fh)


def test_a_longer_version_updates_the_session_and_replays_its_runs(
    user, tmp_path, django_capture_on_commit_callbacks
):
    start = first_lines(SHORT, 12, tmp_path / "session.jsonl")
    with django_capture_on_commit_callbacks(execute=False):
        first, stored = store(user, start)
    assert stored is services.Stored.CREATED
    run = first.runs.get()
    runner.execute_run(run.pk)
    assert Run.objects.get(pk=run.pk).status == Run.Status.DONE
    assert TranscriptMessages.objects.filter(transcript=first).exists()
    old_path = Path(first.path)
    old_requests = first.request_count

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        grown, stored = store(user, SHORT, name="session.jsonl")
    assert stored is services.Stored.GREW
    assert grown.pk == first.pk
    assert Transcript.objects.filter(owner=user).count() == 1
    grown.refresh_from_db()
    assert grown.request_count > old_requests
    assert grown.size == SHORT.stat().st_size
    # the old file's results and messages are gone, the run is queued again and sent
    again = Run.objects.get(pk=run.pk)
    assert again.status == Run.Status.QUEUED
    assert not RunResult.objects.filter(run=again).exists()
    assert not TranscriptMessages.objects.filter(transcript=grown).exists()
    assert callbacks, "the replay was not sent again"
    assert not old_path.exists()
    assert Path(grown.path).exists()
    runner.execute_run(run.pk)
    again.refresh_from_db()
    assert again.status == Run.Status.DONE
    assert again.progress_total == grown.request_count


def test_the_same_bytes_again_change_nothing(user, tmp_path):
    first, _ = store(user, SHORT)
    again, stored = store(user, SHORT)
    assert stored is services.Stored.DUPLICATE
    assert again.pk == first.pk


def test_an_upload_that_does_not_start_with_the_old_transcript_is_a_new_session(user, tmp_path):
    start = first_lines(SHORT, 12, tmp_path / "a.jsonl")
    first, _ = store(user, start)
    # the same session id, but one byte of the earlier part differs: another history
    data = bytearray(SHORT.read_bytes())
    data[data.index(b'"type"')] = ord(b" ")
    changed = tmp_path / "b.jsonl"
    changed.write_bytes(bytes(data))
    other, stored = store(user, changed)
    assert stored is services.Stored.CREATED
    assert other.pk != first.pk


def test_another_users_session_is_never_updated(user, other_user, tmp_path):
    start = first_lines(SHORT, 12, tmp_path / "a.jsonl")
    theirs, _ = store(other_user, start)
    _, stored = store(user, SHORT)
    assert stored is services.Stored.CREATED
    theirs.refresh_from_db()
    assert theirs.size == start.stat().st_size


def test_the_api_says_the_session_grew(client, auth_header, user, tmp_path):
    start = first_lines(SHORT, 12, tmp_path / "s.jsonl")
    with start.open("rb") as fh:
        first = client.post("/api/sessions", {"file": fh}, **auth_header)
    assert first.status_code == 201
    with SHORT.open("rb") as fh:
        second = client.post("/api/sessions", {"file": fh}, **auth_header)
    assert second.status_code == 200
    body = second.json()
    assert body["id"] == first.json()["id"]
    assert body["grew"] is True
    assert body["duplicate"] is False
