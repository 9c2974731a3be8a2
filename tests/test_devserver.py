"""The `make run` launcher: serves with a real worker on the embedded broker; SIGINT stops all."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from contextlab.transcripts.management.commands import load_demo

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_devserver_serves_and_stops_everything_on_sigint(tmp_path):
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "DATABASE_URL",
            "CELERY_BROKER_URL",
            "CELERY_TASK_DEFAULT_QUEUE",
            "DJANGO_SETTINGS_MODULE",
            "MEDIA_ROOT",
            # `make run` as a newcomer runs it: no key, DEBUG at its default (off)
            "SECRET_KEY",
            "SECRET_KEY_FILE",
            "DEBUG",
            "STATIC_MANIFEST",
        )
    }
    env["VAR_DIR"] = str(tmp_path / "var")
    log = (tmp_path / "devserver.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "contextlab.devserver", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "devserver.log").read_text()
            text = (tmp_path / "devserver.log").read_text(errors="replace")
            if "log in as 'demo'" in text and "ready." in text:
                try:
                    login = urllib.request.urlopen(
                        f"http://127.0.0.1:{port}/accounts/login/", timeout=2
                    ).read()
                    break
                except OSError:
                    pass
            time.sleep(0.3)
        else:
            raise AssertionError(
                "devserver did not come up:\n" + (tmp_path / "devserver.log").read_text()
            )
        # the demo sessions were queued before the worker started; the worker replays them
        while (
            "run 2: done" not in (tmp_path / "devserver.log").read_text()
            and time.monotonic() < deadline
        ):
            time.sleep(0.3)
        assert "run 2: done" in (tmp_path / "devserver.log").read_text()
        # DEBUG off: a wrong link is the friendly page, static files still come from static/
        with pytest.raises(urllib.error.HTTPError) as wrong_link:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/no/such/page/", timeout=5)
        assert wrong_link.value.code == 404
        assert b'id="error-page"' in wrong_link.value.read()
        css = urllib.request.urlopen(f"http://127.0.0.1:{port}/static/css/app.css", timeout=5)
        assert b".topbar" in css.read()
        assert b"css/app.css" in login
        key_file = tmp_path / "var" / "secret_key"
        assert key_file.stat().st_mode & 0o777 == 0o600
        # the worker dies (an out-of-memory kill of its whole group): a new one starts, and the
        # web server was never stopped
        text = (tmp_path / "devserver.log").read_text(errors="replace")
        worker_pid = int(re.search(r"worker pid (\d+)", text).group(1))  # type: ignore[union-attr]
        os.killpg(worker_pid, signal.SIGKILL)
        while time.monotonic() < deadline + 60:
            text = (tmp_path / "devserver.log").read_text(errors="replace")
            if "starting a new one" in text and text.count("ready.") >= 2:
                break
            time.sleep(0.3)
        assert "starting a new one" in text, text[-3000:]
        assert text.count("ready.") >= 2, text[-3000:]
        assert proc.poll() is None
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
        log.close()
    time.sleep(0.5)
    left = subprocess.run(
        ["pgrep", "-g", str(proc.pid)], capture_output=True, text=True
    ).stdout.split()
    assert left == [], f"processes left after SIGINT: {left}"
    assert "[devserver] stopped" in (tmp_path / "devserver.log").read_text()


@pytest.mark.django_db
@pytest.mark.parametrize("with_corpus", [False, True], ids=["no-corpus", "corpus"])
def test_demo_sessions_come_from_the_corpus_else_the_bundled_copies(
    with_corpus, monkeypatch, tmp_path, settings, clean_media
):
    """``make run`` in a clone without ``../shared``: the demo loads the bundled copies. The
    corpus is found where the tests find it (``$CONTEXTLAB_CORPUS``), never by another path."""
    corpus = tmp_path / "corpus"
    if with_corpus:
        corpus.mkdir()
        for name in load_demo.DEMO_FILES:
            shutil.copy(load_demo.BUNDLED / name, corpus / name)
    monkeypatch.setenv("CONTEXTLAB_CORPUS", str(corpus))
    settings.VAR_DIR = tmp_path / "var"
    out = StringIO()
    call_command("load_demo", stdout=out)
    text = out.getvalue()
    source = corpus if with_corpus else ROOT / "contextlab" / "demo"
    assert text.count(f"({source})") == len(load_demo.DEMO_FILES), text
    assert "log in as 'demo' with password" in text
