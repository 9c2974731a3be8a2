"""Fixtures for the attack tests: small engine bounds, so bombs need megabytes, not gigabytes
(bench/bench_ingest_bounds.py measures the real bounds)."""

from __future__ import annotations

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
