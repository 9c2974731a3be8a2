"""With STORAGE_BACKEND=s3, web and workers share no disk: an upload goes to the object store,
a worker on its own empty folder replays it, and a second worker finds the parsed session in
the store instead of parsing the file again. Real moto_server, PostgreSQL, Redis and Celery."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from contextlab import blobs
from contextlab.runs import services as run_services
from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript
from tests.conftest import FIXTURES, flush_broker, require_services, start_worker, wait_for_run

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SESSION = FIXTURES / "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


def host_env(s3, root: Path) -> dict[str, str]:
    """A worker host: the object store, and folders of its own that nobody else sees."""
    return {
        **s3.env(),
        "WORKER_DIR": str(root / "worker"),
        "SESSION_CACHE_DIR": str(root / "session-cache"),
        "MEDIA_ROOT": str(root / "media"),
        "VAR_DIR": str(root / "var"),
    }


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_workers_on_their_own_disks_replay_through_the_object_store(
    s3_storage, client, auth_header, user, tmp_path, settings
):
    require_services()
    flush_broker()
    response = client.post(
        "/api/sessions",
        {"file": SimpleUploadedFile("s.jsonl", SESSION.read_bytes())},
        **auth_header,
    )
    assert response.status_code == 201, response.content
    transcript = Transcript.objects.get(pk=response.json()["id"])
    assert transcript.file in s3_storage.keys("uploads/")
    # the web host kept nothing in MEDIA_ROOT: the file lives in the store
    assert files_under(Path(settings.MEDIA_ROOT) / "uploads") == []
    # the web's upload check left its parse for the first replay, in the store
    assert any(k.endswith(".parsed.pickle") for k in s3_storage.keys("session-cache/"))

    first_host, second_host = tmp_path / "host-a", tmp_path / "host-b"
    worker = start_worker(tmp_path, "host-a", **host_env(s3_storage, first_host))
    try:
        run = wait_for_run(transcript.runs.get().pk)
        assert run.status == Run.Status.DONE, run.error
    finally:
        worker.stop()
    copies = files_under(first_host / "worker" / "objects")
    assert [p.name for p in copies] == [Path(transcript.file).name]
    assert copies[0].read_bytes() == SESSION.read_bytes()
    prepared = [k for k in s3_storage.keys("session-cache/") if not k.endswith(".parsed.pickle")]
    assert len(prepared) == 1, s3_storage.keys("session-cache/")

    # another host, nothing on its disk: a what-if run loads the prepared session from the store
    whatif = run_services.start_run(owner=user, transcript=transcript, mode="whatif")
    other = start_worker(tmp_path, "host-b", **host_env(s3_storage, second_host))
    try:
        done = wait_for_run(whatif.pk)
        assert done.status == Run.Status.DONE, done.error
    finally:
        other.stop()
    fetched = [p.name for p in files_under(second_host / "session-cache")]
    assert fetched == [Path(prepared[0]).name]
    assert blobs.listdir("checkpoints") == ([], [])
