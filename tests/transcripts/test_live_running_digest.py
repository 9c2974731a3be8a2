"""A live session's appends hash only their own bytes: the web process that took the last
append carries that file's SHA-256 on (``live._RUNNING_DIGESTS``), and a process that did not
hashes the file whole. Either way the session's digest is its file's."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from contextlab.transcripts import live
from contextlab.transcripts.models import Transcript
from tests.transcripts.test_live_append import LINES, append, create

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


def test_appends_carry_the_files_digest_on(client, auth_header, monkeypatch):
    hashed: list[int] = []
    real = hashlib.sha256

    class Counting:
        """``hashlib.sha256`` that counts the bytes given to the hashes it makes."""

        def __init__(self, data: bytes = b"") -> None:
            self.inner = real(data)
            hashed.append(len(data))

        def update(self, data: bytes) -> None:
            hashed.append(len(data))
            self.inner.update(data)

        def hexdigest(self) -> str:
            return self.inner.hexdigest()

        def copy(self) -> Counting:
            twin = Counting.__new__(Counting)
            twin.inner = self.inner.copy()
            return twin

    monkeypatch.setattr(live, "hashlib", SimpleNamespace(sha256=Counting))
    live._RUNNING_DIGESTS.clear()
    session = create(client, auth_header, b"".join(LINES[:12]))
    offset = len(b"".join(LINES[:12]))
    for n, (start, end) in enumerate(((12, 20), (20, 30), (30, len(LINES)))):
        if n == 2:
            live._RUNNING_DIGESTS.clear()  # another web process took the last append
        data = b"".join(LINES[start:end])
        hashed.clear()
        response = append(client, auth_header, session["id"], offset, data)
        assert response.status_code == 200, response.content
        offset += len(data)
        transcript = Transcript.objects.get(pk=session["id"])
        stored = Path(transcript.path).read_bytes()
        assert transcript.sha256 == real(stored).hexdigest()
        if n == 1:
            assert sum(hashed) == len(data), "the earlier bytes were hashed again"
        else:
            # the first append after the upload, or another process's: the file hashed whole
            assert sum(hashed) == len(stored)
