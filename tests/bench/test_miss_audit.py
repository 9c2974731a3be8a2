"""``bench/miss_audit.py``: every request where the cache model and the recording disagree."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench.miss_audit import audit, main
from tests.engine.test_server_misses import SYSTEM, with_cache_usage


def test_a_drop_with_nothing_changed_is_listed_as_server_side(tmp_path: Path) -> None:
    path = with_cache_usage(tmp_path, drop_at=6)
    survival: Counter[str] = Counter()
    found = audit(path, survival)
    assert [(d.kind, d.request, d.cls) for d in found] == [("missed", 6, "server_side")]
    drop = found[0]
    assert drop.read == SYSTEM
    # the system prompt's level: what the first request read
    assert drop.level == "warm"
    assert drop.reason == "server_miss"
    assert drop.gap is not None
    assert drop.gap < 300
    assert drop.previous_read > drop.read


def test_a_session_without_a_drop_lists_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = with_cache_usage(tmp_path, drop_at=None)
    assert audit(path, Counter()) == []
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "missed" not in out
    assert "requests 5-60 min after a 1-hour write: 0 read the whole prefix back" in out
