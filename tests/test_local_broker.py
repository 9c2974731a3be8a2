"""The embedded broker of ``make run`` (settings' filesystem transport) never shows a reader a
message file before it is whole: a reader polling the queue folder while large messages are
published reads only complete messages."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kombu import Connection

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def make_run_transport(var_dir: Path) -> str:
    """The transport the settings choose for ``make run``'s embedded broker (the tests' own
    settings use Redis, so ask a fresh process configured as ``make run`` is)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "contextlab.settings",
        "CELERY_BROKER_URL": "filesystem://",
        "DATABASE_URL": "sqlite://",
        "VAR_DIR": str(var_dir),
        "DEBUG": "true",
        "PYTHONPATH": str(ROOT),
    }
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(getattr(settings, 'CELERY_BROKER_TRANSPORT', None) or 'filesystem')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def test_a_reader_never_sees_a_message_before_it_is_whole(tmp_path: Path) -> None:
    queue_folder = tmp_path / "queue"
    queue_folder.mkdir()
    options = {
        "data_folder_in": str(queue_folder),
        "data_folder_out": str(queue_folder),
        "control_folder": str(tmp_path / "control"),
        "store_processed": False,
    }
    transport = make_run_transport(tmp_path)
    seen: list[bytes] = []
    done = threading.Event()

    def read_as_the_worker_does() -> None:
        # kombu's reader lists the folder and reads a file without taking its lock
        while not done.is_set():
            for name in os.listdir(queue_folder):
                if name.partition(".")[2] != "race.msg":
                    continue
                with contextlib.suppress(FileNotFoundError):
                    seen.append((queue_folder / name).read_bytes())

    reader = threading.Thread(target=read_as_the_worker_does)
    reader.start()
    body = "x" * (8 * 1024 * 1024)  # large enough that writing it takes a while
    try:
        with Connection("filesystem://", transport=transport, transport_options=options) as conn:
            queue = conn.SimpleQueue("race")
            for i in range(12):
                queue.put({"n": i, "body": body})
            queue.close()
    finally:
        done.set()
        reader.join()
    assert seen, "the reader saw no message at all"
    partial = 0
    for raw in seen:
        try:
            json.loads(raw)
        except ValueError:
            partial += 1
    assert partial == 0, f"{partial} of {len(seen)} reads found a message not yet whole"
