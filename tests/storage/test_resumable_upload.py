"""A resumable upload over a real connection that drops mid-piece: ``contextlab upload``
resumes at the server's offset (it does not start again), a real worker joins the pieces, and
the session is the file's bytes."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from contextlab import blobs, upload_client
from contextlab.transcripts.models import ResumableUpload, Transcript
from tests.conftest import FIXTURES
from tests.storage.netcut import CuttingProxy

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]

SESSION = FIXTURES / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl"  # 360 KB


def test_a_cut_connection_resumes_and_the_worker_stores_the_session(
    live_server, api_token, user, celery_worker_process, tmp_path, monkeypatch
):
    monkeypatch.setenv("CONTEXTLAB_CACHE_DIR", str(tmp_path / "client-cache"))
    data = SESSION.read_bytes()
    target = urlparse(live_server.url)
    proxy = CuttingProxy((target.hostname or "127.0.0.1", target.port or 80), len(data) // 2)
    try:
        sent = upload_client.upload(
            SESSION, url=proxy.url, token=api_token, resumable_from=0, chunk_size=32 * 1024
        )
    finally:
        proxy.close()
    assert proxy.cuts == 1, "the connection was never cut"
    transcript = Transcript.objects.get(pk=sent.session_id)
    assert sent.created
    assert blobs.read_bytes(transcript.file) == data
    # resumed: at most the piece in flight was sent again (plus the requests' headers)
    overhead = 64 * 1024
    assert proxy.sent < len(data) + 32 * 1024 + overhead, (proxy.sent, len(data))
    upload = ResumableUpload.objects.get()
    assert upload.state == ResumableUpload.State.STORED
    assert blobs.listdir(f"incoming/{upload.pk}") == ([], [])
