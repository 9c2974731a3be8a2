"""Fixtures for the attack tests: small engine bounds, so bombs need megabytes, not gigabytes
(bench/bench_ingest_bounds.py measures the real bounds)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from contextlab.engine import loading

#: what the bomb cases expand to under the small bounds: past them, yet quick to build
SMALL_EXPANSION = 8 * 1024**2


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "MIN_EXPANSION_BYTES", SMALL_EXPANSION)
    monkeypatch.setattr(loading, "MAX_EXPANSION", 4)
    monkeypatch.setattr(loading, "MAX_ARCHIVE_MEMBERS", 500)
    monkeypatch.setattr(loading, "MAX_DROPPED_PROBLEMS", 5_000)


def run_with_broker_down(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh Django process whose broker is a port nothing listens on
    (its own SQLite database and VAR_DIR under ``tmp_path``): publishing fails for real."""
    from tests.conftest import ROOT

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "contextlab.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "VAR_DIR": str(tmp_path / "var"),
        "SECRET_KEY": "broker-down-test-" + "k" * 40,
        "CELERY_BROKER_URL": f"redis://127.0.0.1:{port}/0",
        "CACHE_URL": "locmem://",
        "ALLOWED_HOSTS": "testserver",
    }
    return subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
