"""A web process killed mid-upload leaves its partial temporary file behind (the request's
clean-up never runs); the periodic recovery removes such files once they are older than
UPLOAD_TEMP_STALE_AFTER, and leaves a live upload's file alone."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contextlab.jobs import tasks, uploads
from tests.conftest import ROOT, require_services, worker_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

BOUNDARY = "contextlab-test-boundary"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "gunicorn exited early"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"gunicorn did not listen on {port}")


def _wait_for(predicate, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_a_web_process_killed_mid_upload_leaves_a_file_the_recovery_removes(
    tmp_path: Path, api_token: str, settings
) -> None:
    require_services()
    temp_dir = tmp_path / "upload-tmp"
    temp_dir.mkdir()
    port = _free_port()
    env = worker_env(FILE_UPLOAD_TEMP_DIR=str(temp_dir), STATIC_MANIFEST="false")
    web = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "--workers=1",
            f"--bind=127.0.0.1:{port}",
            "contextlab.wsgi",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    client = None
    try:
        _wait_listening(port, web)
        # a 50 MB upload of which the client sends 4 MB, then stalls: the server is streaming
        # it to its temporary file when it is killed
        head = (
            f"--{BOUNDARY}\r\n"
            'Content-Disposition: form-data; name="file"; filename="big.jsonl"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        client = socket.create_connection(("127.0.0.1", port))
        client.sendall(
            (
                "POST /api/sessions HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{port}\r\n"
                f"Authorization: Bearer {api_token}\r\n"
                f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
                f"Content-Length: {len(head) + 50 * 1024 * 1024}\r\n\r\n"
            ).encode()
            + head
        )
        chunk = b'{"type": "user"}\n' * 4096
        sent = 0
        while sent < 4 * 1024 * 1024:
            client.sendall(chunk)
            sent += len(chunk)

        def partial_files() -> list[Path]:
            return [p for p in temp_dir.iterdir() if p.stat().st_size > 0]

        _wait_for(lambda: bool(partial_files()))
        os.killpg(web.pid, signal.SIGKILL)  # the whole server, mid-request
        web.wait(timeout=10)
        left = partial_files()
        assert left, "the killed process's temporary file should still be there"
        assert all(p.name.startswith("tmp") and ".upload" in p.name for p in left)

        # a live upload's file (written just now) must survive the same pass
        live = temp_dir / "tmplive.upload.jsonl"
        settings.FILE_UPLOAD_TEMP_DIR = str(temp_dir)
        settings.UPLOAD_TEMP_STALE_AFTER = 2
        time.sleep(2.5)  # the dead upload's file is now older than that
        live.write_bytes(b"still streaming")
        tasks.recover()
        assert [p for p in left if p.exists()] == []
        assert live.exists()
    finally:
        if client is not None:
            client.close()
        if web.poll() is None:
            os.killpg(web.pid, signal.SIGKILL)
            web.wait(timeout=10)


def test_a_partial_copy_left_beside_the_stored_uploads_is_removed_once_stale(
    tmp_path: Path, settings
) -> None:
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "upload-tmp")
    folder = tmp_path / "media" / "uploads" / "7"
    folder.mkdir(parents=True)
    dead = folder / ".partial-0123abcd.jsonl"
    fresh = folder / ".partial-4567ef01.jsonl"
    stored = folder / "0123abcd.jsonl"
    for path in (dead, fresh, stored):
        path.write_bytes(b"{}\n")
    old = time.time() - settings.UPLOAD_TEMP_STALE_AFTER - 60
    os.utime(dead, (old, old))
    os.utime(stored, (old, old))
    assert uploads.remove_stale_temp_files() == [dead]
    assert fresh.exists()
    assert stored.exists()  # a stored upload is never a temporary file
