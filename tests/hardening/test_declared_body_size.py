"""A request that only declares a huge body is refused at once, under the production server
(gunicorn, sync workers): nobody waits for bytes that will never come, and the worker is free
for the next request."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import worker_env
from tests.hardening.test_database_restart import _free_port

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

#: long enough for any sane answer, far shorter than gunicorn's 30 s worker timeout
ANSWER_WITHIN = 10.0


def _headers_only(port: int, head: str) -> bytes:
    """Send a request's head and no body; what the server answers before the timeout."""
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WITHIN) as sock:
        sock.sendall(head.encode())
        received = b""
        try:
            while b"\r\n\r\n" not in received:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
        except TimeoutError:
            pass
        return received


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("gunicorn did not start")


def test_a_huge_declared_body_is_refused_before_it_is_read(tmp_path: Path, api_token: str) -> None:
    port = _free_port()
    env = worker_env(ALLOWED_HOSTS="127.0.0.1", STATIC_MANIFEST="0", CACHE_URL="locmem://")
    log = (tmp_path / "gunicorn.log").open("wb")
    # one sync worker: if it waited for the body, nothing else would be answered
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "contextlab.wsgi", "-b", f"127.0.0.1:{port}", "-w", "1"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_listening(port)
        huge = 50 * 1024**3  # 50 GB declared, none sent
        upload = _headers_only(
            port,
            "POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {api_token}\r\n"
            "Content-Type: multipart/form-data; boundary=xyz\r\n"
            f"Content-Length: {huge}\r\n\r\n",
        )
        assert upload.startswith(b"HTTP/1.1 413"), upload[:300]
        form = _headers_only(
            port,
            "POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {api_token}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {huge}\r\n\r\n",
        )
        assert form.startswith(b"HTTP/1.1 413"), form[:300]
        # the one worker answers the next request at once
        health = _headers_only(port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert health.startswith(b"HTTP/1.1 200"), health[:300]
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
