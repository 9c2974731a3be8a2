"""An upload's check in a child process (``transcripts.upload_check``, ``services.check_upload``, files of at least
``UPLOAD_CHECK_CHILD_MIN_BYTES``): the same session as the check in the storing process, the
parse left for the replay, and a child that dies rejects the upload with its reason and keeps
nothing."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from contextlab import blobs
from contextlab.engine import session_cache
from contextlab.jobs import replay as runner
from contextlab.runs.models import Run
from contextlab.transcripts import checking, resumable, services
from contextlab.transcripts.models import ResumableUpload, Transcript
from tests.transcripts.test_resumable import create, patch, upload_id

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

#: fields that differ between two uploads of the same bytes by two users
PER_UPLOAD = {"id", "owner_id", "workspace_id", "file", "created_at", "updated_at", "_state"}


def parsed_copies() -> list[Path]:
    folder = Path(django_settings.SESSION_CACHE_DIR)
    return sorted(folder.glob(f"*{session_cache.PARSED_SUFFIX}")) if folder.exists() else []


@pytest.fixture
def empty_session_cache():
    folder = Path(django_settings.SESSION_CACHE_DIR)
    for path in folder.glob("*.pickle") if folder.exists() else []:
        path.unlink()
    session_cache._RECENT.clear()
    yield
    session_cache._RECENT.clear()


@pytest.fixture
def in_child(settings, monkeypatch):
    """Every upload checked in a child; the check in this process refused (so a pass proves
    the child did it)."""
    settings.UPLOAD_CHECK_CHILD_MIN_BYTES = 1

    def not_here(request):
        raise AssertionError("the upload was checked in the storing process")

    monkeypatch.setattr(services, "check_here", not_here)


def dying_child(monkeypatch) -> None:
    """The child kills itself with SIGKILL (as the kernel's out-of-memory killer would) after
    reading its request."""
    code = "import os, signal, sys; sys.stdin.buffer.read(); os.kill(os.getpid(), signal.SIGKILL)"
    monkeypatch.setattr(services, "child_command", lambda: [sys.executable, "-c", code])


def row_fields(transcript: Transcript) -> dict[str, object]:
    return {k: v for k, v in vars(transcript).items() if k not in PER_UPLOAD}


@pytest.mark.usefixtures("empty_session_cache")
def test_a_child_checks_the_upload_as_the_storing_process_does(
    user, other_user, short_jsonl, settings, monkeypatch
):
    data = short_jsonl.read_bytes()
    here, created = services.create_transcript(
        owner=user, name="short.jsonl", content=io.BytesIO(data)
    )
    assert created
    for path in parsed_copies():
        path.unlink()
    settings.UPLOAD_CHECK_CHILD_MIN_BYTES = len(data)  # this file is at the threshold
    monkeypatch.setattr(services, "check_here", None)  # not callable here: the child's
    child, created = services.create_transcript(
        owner=other_user, name="short.jsonl", content=io.BytesIO(data)
    )
    monkeypatch.undo()
    assert created
    assert row_fields(child) == row_fields(here)
    assert Path(child.file).name == Path(here.file).name
    # the parse the child left is what the worker replays, without parsing the file again
    assert len(parsed_copies()) == 1

    def no_second_parse(*args, **kwargs):
        raise AssertionError("the worker parsed the upload again")

    monkeypatch.setattr(session_cache, "load_session", no_second_parse)
    run = child.runs.get()
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE, run.error
    assert run.result.read()["requests"]


@pytest.mark.usefixtures("empty_session_cache", "in_child")
def test_a_file_the_engine_refuses_in_the_child_is_rejected_with_the_engine_reason(user):
    with pytest.raises(services.UploadRejected) as refused:
        services.create_transcript(owner=user, name="junk.jsonl", content=io.BytesIO(b"{no\n"))
    assert "not a Claude Code transcript" in refused.value.message
    assert not Transcript.objects.exists()
    assert parsed_copies() == []


@pytest.mark.usefixtures("empty_session_cache", "in_child")
def test_a_child_that_dies_rejects_the_upload_and_keeps_nothing(user, short_jsonl, monkeypatch):
    dying_child(monkeypatch)
    with pytest.raises(services.UploadRejected) as refused:
        services.create_transcript(
            owner=user, name="short.jsonl", content=io.BytesIO(short_jsonl.read_bytes())
        )
    message = refused.value.message
    assert "short.jsonl: the check of this file stopped before it finished" in message
    assert "killed by SIGKILL, out of memory?" in message
    assert refused.value.status == 503
    assert not Transcript.objects.exists()
    assert blobs.listdir(f"uploads/{user.pk}")[1] == []
    assert parsed_copies() == []


@pytest.mark.usefixtures("empty_session_cache", "in_child")
def test_a_resumable_upload_whose_check_dies_is_rejected_with_the_reason(
    client, auth_header, short_jsonl, monkeypatch
):
    data = short_jsonl.read_bytes()
    created = create(client, auth_header, len(data))
    assert patch(client, auth_header, created["Location"], 0, data).status_code == 204
    dying_child(monkeypatch)
    finished = resumable.finish(upload_id(created))
    assert finished is not None
    assert finished.state == ResumableUpload.State.REJECTED
    assert "the check of this file stopped before it finished (killed by SIGKILL" in (
        finished.error
    )
    assert not Transcript.objects.exists()
    assert blobs.listdir(f"incoming/{finished.pk}") == ([], [])
    # the client reads the reason
    assert client.get(created["Location"], **auth_header).json()["state"] == "rejected"


#: runs the child as ``check_upload`` does, then says whether Django was imported in it
CHILD_REPORTING_DJANGO = """
import runpy, sys
try:
    runpy.run_module("contextlab.transcripts.upload_check", run_name="__main__")
except SystemExit as exit:
    if exit.code:
        raise
sys.exit(3 if any(m.partition(".")[0] == "django" for m in sys.modules) else 0)
"""


def test_the_child_checks_without_setting_django_up(short_jsonl, tmp_path):
    # what the child holds beside its parse counts against the worker's memory (issue #25):
    # it imports the engine and ``checking`` only, so it runs without any Django settings
    request = checking.CheckRequest(
        path=short_jsonl,
        name="short.jsonl",
        stored_name="uploads/1/short.jsonl",
        size=short_jsonl.stat().st_size,
        sha256=hashlib.sha256(short_jsonl.read_bytes()).hexdigest(),
        cache_dir=tmp_path / "cache",
        out=tmp_path / "checked.pickle",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO")}
    completed = subprocess.run(
        [sys.executable, "-c", CHILD_REPORTING_DJANGO],
        input=pickle.dumps(request),
        env=env,
        cwd=django_settings.BASE_DIR,
        capture_output=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr.decode()[-2000:]
    with request.out.open("rb") as fh:
        answer = pickle.load(fh)
    here = checking.check_here(
        dataclasses.replace(request, cache_dir=tmp_path / "here", out=tmp_path / "here.pickle")
    )
    assert isinstance(answer, checking.Checked)
    assert answer.fields == here.fields
    assert answer.record_uuids == here.record_uuids
    assert answer.parsed is not None
    assert answer.parsed.exists()
