from __future__ import annotations

import gzip
import io
import tarfile
import zipfile
from pathlib import Path

import pytest
from django.conf import settings

from contextlab.runs.models import Run
from contextlab.transcripts import checking, services
from contextlab.transcripts.models import Transcript

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


def stored_files() -> list[Path]:
    root = Path(settings.MEDIA_ROOT) / "uploads"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def create(user, name: str, data: bytes):
    return services.create_transcript(owner=user, name=name, content=io.BytesIO(data))


def test_upload_becomes_a_session_with_a_queued_recorded_run(user, short_jsonl):
    transcript, created = create(user, "short.jsonl", short_jsonl.read_bytes())
    assert created
    assert transcript.request_count > 0
    assert transcript.version == "2.1.38"
    assert transcript.threads[0]["kind"] == "main"
    assert [p.name for p in stored_files()] == [f"{transcript.sha256}.jsonl"]
    run = transcript.runs.get()
    assert (run.mode, run.status, run.owner) == ("recorded", Run.Status.QUEUED, user)
    assert run.config  # resolved by the engine at creation


def test_same_bytes_twice_are_stored_once_per_user(user, other_user, short_jsonl):
    data = short_jsonl.read_bytes()
    first, _ = create(user, "a.jsonl", data)
    second, created = create(user, "renamed.jsonl", data)
    assert (second.pk, created) == (first.pk, False)
    assert Transcript.objects.filter(owner=user).count() == 1
    assert len(stored_files()) == 1
    theirs, created = create(other_user, "a.jsonl", data)
    assert created
    assert theirs.pk != first.pk


def test_gzip_zip_and_tar_uploads_are_accepted(user, short_jsonl):
    data = short_jsonl.read_bytes()
    transcript, _ = create(user, "s.jsonl.gz", gzip.compress(data))
    assert transcript.request_count > 0
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("55604662/55604662.jsonl", data + b"\n")
    transcript, _ = create(user, "folder.zip", buf.getvalue())
    assert transcript.request_count > 0
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        payload = data + b"\n\n"
        info = tarfile.TarInfo("session/abc.jsonl")
        info.size = len(payload)
        tf.addfile(info, io.BytesIO(payload))
    transcript, _ = create(user, "folder.tar.gz", buf.getvalue())
    assert transcript.request_count > 0


def test_unusable_file_is_refused_with_the_reason_and_nothing_remains(user):
    with pytest.raises(services.UploadRejected) as exc:
        create(user, "notes.jsonl", b"hello\nworld\n")
    assert "not a Claude Code transcript" in exc.value.message
    assert exc.value.problems[0]["line"] == 1
    assert not Transcript.objects.exists()
    assert not Run.objects.exists()
    assert stored_files() == []


def test_truncated_gzip_is_refused_cleanly(user, short_jsonl):
    data = gzip.compress(short_jsonl.read_bytes())[:200]
    with pytest.raises(services.UploadRejected):
        create(user, "half.jsonl.gz", data)
    assert not Transcript.objects.exists()
    assert stored_files() == []


def test_half_finished_transcript_keeps_what_is_valid_and_reports_the_bad_line(user, short_jsonl):
    lines = short_jsonl.read_bytes().splitlines()
    data = b"\n".join(lines) + b'\n{"type": "user", "message": {"role": "us'  # cut mid-record
    transcript, _ = create(user, "cut.jsonl", data)
    assert transcript.problems
    assert any(p["line"] == len(lines) + 1 for p in transcript.problems)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("notes.txt", "unsupported file type"),
        ("archive.rar", "unsupported file type"),
        ("", "no file name"),
    ],
)
def test_unsupported_names_are_refused(user, short_jsonl, name, message):
    with pytest.raises(services.UploadRejected, match=message):
        create(user, name, short_jsonl.read_bytes())
    assert stored_files() == []


def test_empty_file_is_refused(user):
    with pytest.raises(services.UploadRejected, match="empty"):
        create(user, "empty.jsonl", b"")
    assert stored_files() == []


def test_oversize_upload_names_the_limit(user, settings, short_jsonl):
    settings.UPLOAD_MAX_BYTES = 1000
    with pytest.raises(services.UploadRejected) as exc:
        create(user, "big.jsonl", short_jsonl.read_bytes())
    assert exc.value.status == 413
    assert "1000 bytes" in exc.value.message
    assert stored_files() == []


def test_hostile_file_names_cannot_escape_the_upload_folder(user, short_jsonl):
    transcript, _ = create(user, "../../../../etc/cron.d/evil.jsonl", short_jsonl.read_bytes())
    assert transcript.name == "evil.jsonl"
    assert Path(transcript.path).resolve().is_relative_to(Path(settings.MEDIA_ROOT).resolve())


def test_a_database_failure_leaves_no_file(user, short_jsonl, monkeypatch):
    def boom(**kwargs):
        raise RuntimeError("db down")

    monkeypatch.setattr(services.run_services, "start_run", boom)
    with pytest.raises(RuntimeError):
        create(user, "short.jsonl", short_jsonl.read_bytes())
    assert not Transcript.objects.exists()
    assert stored_files() == []


def test_delete_removes_row_runs_and_file(user, short_jsonl, django_capture_on_commit_callbacks):
    transcript, _ = create(user, "short.jsonl", short_jsonl.read_bytes())
    with django_capture_on_commit_callbacks(execute=True):
        services.delete_transcript(transcript=transcript)
    assert not Transcript.objects.exists()
    assert not Run.objects.exists()
    assert stored_files() == []


def test_archive_with_path_traversal_members_cannot_write_outside(user, short_jsonl, tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../../evil.jsonl", short_jsonl.read_bytes())
        zf.writestr("/etc/evil2.jsonl", short_jsonl.read_bytes())
    try:
        transcript, _ = create(user, "evil.zip", buf.getvalue())
    except services.UploadRejected as exc:
        message = exc.message  # refused, with a reason
    else:
        message = "accepted"
        assert Path(transcript.path).resolve().is_relative_to(Path(settings.MEDIA_ROOT).resolve())
    assert message
    assert not (Path(settings.MEDIA_ROOT).parent / "evil.jsonl").exists()
    assert not Path("/etc/evil2.jsonl").exists()


def test_corrupt_zip_is_refused_cleanly(user):
    with pytest.raises(services.UploadRejected) as exc:
        create(user, "broken.zip", b"PK\x03\x04 this is not really a zip")
    assert exc.value.message.startswith("broken.zip:")
    assert stored_files() == []


def test_problem_lists_are_capped_with_a_note(user, short_jsonl, monkeypatch):
    monkeypatch.setattr(checking, "MAX_STORED_PROBLEMS", 2)
    lines = short_jsonl.read_bytes().splitlines()
    data = b"\n".join([b"{broken", b"{broken", b"{broken", *lines]) + b"\n"
    transcript, _ = create(user, "noisy.jsonl", data)
    assert [p["line"] for p in transcript.problems] == [1, 2, 0]
    assert transcript.problems[-1]["message"] == "1 more problem(s) not listed"
