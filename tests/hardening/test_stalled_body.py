"""A client that stops sending mid-body without closing its connection (a dropped Wi-Fi sends
nothing) frees its web worker after ``REQUEST_BODY_IDLE_TIMEOUT``, under the production server
(gunicorn, one sync worker): the request answers 408, nothing of it is kept, and the next
request is answered. A slow upload that keeps sending is not cut."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from contextlab import blobs
from contextlab.transcripts.models import ResumableUpload, Transcript
from tests.conftest import worker_env
from tests.hardening.test_database_restart import _free_port
from tests.hardening.test_declared_body_size import _wait_listening

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]

#: the bound under test, short so the test is quick; gunicorn's own worker timeout is far longer
IDLE_TIMEOUT = 2
#: how long the test waits for any answer: the bound plus a generous margin, under the 60 s
#: worker timeout the server is started with (so the answer cannot come from that)
ANSWER_WITHIN = IDLE_TIMEOUT + 15.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[int]:
    port = _free_port()
    env = worker_env(
        ALLOWED_HOSTS="127.0.0.1",
        STATIC_MANIFEST="0",
        CACHE_URL="locmem://",
        REQUEST_BODY_IDLE_TIMEOUT=str(IDLE_TIMEOUT),
    )
    log = (tmp_path / "gunicorn.log").open("wb")
    # one sync worker: while a stalled body held it, nothing else would be answered
    argv = [sys.executable, "-m", "gunicorn", "contextlab.wsgi", "-b", f"127.0.0.1:{port}"]
    process = subprocess.Popen(
        [*argv, "-w", "1", "--timeout", "60"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        _wait_listening(port)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Read one HTTP/1.1 answer (status, headers, body up to its Content-Length)."""
    sock.settimeout(ANSWER_WITHIN)
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed without an answer: {received[:300]!r}")
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(status_line.split()[1]), headers, body


def _request(port: int, head: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WITHIN) as sock:
        sock.sendall(head.encode() + body)
        return _answer(sock)


def _stall(port: int, head: str, first_part: bytes) -> tuple[int, dict[str, str], bytes, float]:
    """Send the head and part of the body, then nothing more (the connection stays open);
    the answer and how long after the last byte it came."""
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WITHIN) as sock:
        sock.sendall(head.encode() + first_part)
        stalled_at = time.monotonic()
        status, headers, body = _answer(sock)
        return status, headers, body, time.monotonic() - stalled_at


def _health(port: int) -> int:
    return _request(port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")[0]


def _new_upload(port: int, token: str, length: int) -> str:
    status, headers, body = _request(
        port,
        "POST /api/uploads HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\nTus-Resumable: 1.0.0\r\n"
        f"Upload-Length: {length}\r\nUpload-Metadata: filename czEuanNvbmw=\r\n"
        "Content-Length: 0\r\n\r\n",
    )
    assert status == 201, body[:300]
    return urlsplit(headers["location"]).path


def _piece_head(location: str, token: str, offset: int, size: int) -> str:
    return (
        f"PATCH {location} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\nTus-Resumable: 1.0.0\r\n"
        "Content-Type: application/offset+octet-stream\r\n"
        f"Upload-Offset: {offset}\r\nContent-Length: {size}\r\n\r\n"
    )


def test_a_stalled_piece_answers_408_keeps_nothing_and_frees_the_worker(
    server: int, api_token: str, short_jsonl: Path
) -> None:
    data = short_jsonl.read_bytes()
    location = _new_upload(server, api_token, len(data))
    status, headers, body, waited = _stall(
        server, _piece_head(location, api_token, 0, len(data)), data[: len(data) // 2]
    )
    assert status == 408, body[:300]
    assert "stalled" in json.loads(body)["detail"]
    assert headers.get("connection", "").lower() == "close"
    assert IDLE_TIMEOUT - 0.5 <= waited < ANSWER_WITHIN
    # the one worker is free, and nothing of the piece was kept: it is sent again from 0
    assert _health(server) == 200
    upload = ResumableUpload.objects.get()
    assert (upload.offset, upload.pieces) == (0, [])
    assert not blobs.storage().listdir(f"incoming/{upload.pk}")[1]
    status, headers, body = _request(server, _piece_head(location, api_token, 0, len(data)), data)
    assert status == 204, body[:300]
    assert headers["upload-offset"] == str(len(data))


def test_a_stalled_file_upload_answers_408_and_makes_no_session(
    server: int, api_token: str, short_jsonl: Path
) -> None:
    data = short_jsonl.read_bytes()
    boundary = "contextlabstall"
    multipart = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="s.jsonl"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    head = (
        "POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {api_token}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {len(multipart)}\r\n\r\n"
    )
    status, _headers, body, _waited = _stall(server, head, multipart[: len(multipart) // 2])
    assert status == 408, body[:300]
    assert _health(server) == 200
    assert not Transcript.objects.exists()
    # the same upload sent whole is taken
    status, _headers, body = _request(server, head, multipart)
    assert status in (200, 201), body[:300]
    assert Transcript.objects.count() == 1


def test_a_slow_upload_that_keeps_sending_is_not_cut(
    server: int, api_token: str, short_jsonl: Path
) -> None:
    """The bound is on the wait for the next byte, not on the whole body: a piece that takes
    twice the bound, a part every half of it, is stored."""
    data = short_jsonl.read_bytes()
    location = _new_upload(server, api_token, len(data))
    parts = [data[i : i + len(data) // 4 + 1] for i in range(0, len(data), len(data) // 4 + 1)]
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server), timeout=ANSWER_WITHIN) as sock:
        sock.sendall(_piece_head(location, api_token, 0, len(data)).encode())
        for part in parts:
            time.sleep(IDLE_TIMEOUT / 2)
            sock.sendall(part)
        status, headers, body = _answer(sock)
    assert time.monotonic() - started >= IDLE_TIMEOUT * 1.5  # longer than one bound in all
    assert status == 204, body[:300]
    assert headers["upload-offset"] == str(len(data))
