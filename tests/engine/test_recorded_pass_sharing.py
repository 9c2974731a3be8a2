"""What-if replays of one loaded session share the recorded passes (calibration, the server
misses the recording shows) with replays whose configs differ only in fields such a pass cannot
tell (``recorded_pass_key``: the autocompact threshold, and the cache TTL for the calibration).
An advice or a sweep replays a session under several thresholds; each must give exactly what a
replay on a freshly loaded session gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from tests.conftest import corpus_files, needs_corpus
from tests.engine.test_server_misses import with_cache_usage

#: the advice's default candidates, a tighter window on top so the thresholds fire, then TTLs
CONFIGS: list[dict[str, Any]] = [
    {},
    {"autocompact_pct_override": 60},
    {"autocompact_pct_override": 90},
    {"cache_ttl": "1h"},
    {"cache_ttl": "5m"},
    {"auto_compact_window": 30_000, "max_output_tokens": 4_000},
    {"auto_compact_window": 30_000, "max_output_tokens": 4_000, "autocompact_pct_override": 50},
    {
        "auto_compact_window": 30_000,
        "max_output_tokens": 4_000,
        "autocompact_pct_override": 80,
        "cache_ttl": "1h",
    },
]


def _replay(session: engine.Session, overrides: dict[str, Any]) -> dict[str, Any]:
    config, preset = engine.resolve_config("auto", overrides, version=session.version or None)
    return engine.replay(session, config, mode="whatif", preset_name=preset).to_json()


def _calibrations(session: engine.Session) -> int:
    return sum(1 for key in session.memo if isinstance(key, tuple) and key[0] == "calibration")


def check_shared_equals_fresh(path: Path) -> list[dict[str, Any]]:
    """Replay every config on one session (sharing), then each on a fresh one: the same JSON."""
    shared = engine.load_session(str(path))
    try:
        together = [_replay(shared, overrides) for overrides in CONFIGS]
        # the threshold and TTL variants measured the session once per window
        assert _calibrations(shared) == 2, sorted(map(str, shared.memo))
    finally:
        shared.close()
    for overrides, result in zip(CONFIGS, together, strict=True):
        fresh = engine.load_session(str(path))
        try:
            assert _replay(fresh, overrides) == result, overrides
        finally:
            fresh.close()
    return together


def test_a_server_miss_is_met_the_same_under_every_shared_threshold(tmp_path: Path):
    results = check_shared_equals_fresh(with_cache_usage(tmp_path, drop_at=5))
    misses = [
        [r["index"] for r in result["requests"] if r["cache"]["reason"] == "server_miss"]
        for result in results
    ]
    # the miss each replay on the session's own window takes from the recording
    assert all(m == [5] for m in misses[:5]), misses


def test_committed_sessions_replay_the_same_with_shared_passes(tool_heavy_jsonl: Path):
    results = check_shared_equals_fresh(tool_heavy_jsonl)
    # the tight window compacts: the shared passes served replays that differ
    compactions = [r["summary"]["compactions"] for r in results]
    assert len(set(compactions)) > 1, compactions


@pytest.mark.slow
@needs_corpus
def test_corpus_sessions_replay_the_same_with_shared_passes():
    files = [p for p in corpus_files() if "_subagents_" not in p.name]
    # the two largest main sessions: long enough to reach the default thresholds
    for path in sorted(files, key=lambda p: p.stat().st_size)[-2:]:
        check_shared_equals_fresh(path)
