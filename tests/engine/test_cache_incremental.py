"""The cache model's incremental path against the full computation, request by request.

Incremental (what a replay runs): a request's cache blocks are the previous request's with the
new ones appended (``CacheBlocks.sync`` walks only the blocks after the first change) and the
simulator takes the prompt's total and breakpoint sums from what the estimator keeps
(``total_tokens``). Full: every request's blocks built anew from its view, and the simulator
summing every block itself. Both must give the same rows on replays where the simulator's rules
bite: TTL expiry, the lookback limit, a prefix change mid-session, compaction, a warm prefix at
the file's start and server-side misses.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextlab.engine.config.resolve import resolve_session_config
from contextlab.engine.input.sources.registry import load_session
from contextlab.engine.measures.prompt_cache import CacheSimulator, rolling_hashes
from contextlab.engine.pipeline.base import View
from contextlab.engine.replay import cache_estimate, driver
from contextlab.engine.replay.cache_blocks import CacheBlocks
from contextlab.engine.replay.driver import replay

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: fixtures whose replays hit each rule (the test checks that they still do)
FILES = [
    FIXTURES / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl",  # a TTL expiry
    FIXTURES / "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
    FIXTURES / "persisted_preview.jsonl",  # server-side misses
    FIXTURES / "codex" / "v0_104_two_remote_compactions.jsonl",
    FIXTURES / "codex" / "v0_46_local_compaction_cut.jsonl",
    FIXTURES / "codex" / "token_budget_new_window.jsonl",
]


class RebuiltBlocks(CacheBlocks):
    """The full computation: every request's blocks built anew from its view."""

    def sync(self, view: View, ratio: float, seed: int) -> None:
        self.keys = []  # a rebuild from the view's head and messages
        self.hashes = []  # (a new list: the simulator keeps the previous request's)
        super().sync(view, ratio, seed)


def replays(path: Path, lookback: int | None) -> list[dict[str, Any]]:
    session = load_session(path)
    config, preset = resolve_session_config(session)
    if lookback is not None:
        config = config.replace(cache_lookback_blocks=lookback)
    return [
        replay(session, config, mode=mode, preset_name=preset).to_json()
        for mode in ("recorded", "whatif")
    ]


@pytest.fixture
def full_computation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_estimate, "CacheBlocks", RebuiltBlocks)
    incremental = CacheSimulator.request

    def summed(self: CacheSimulator, **kw: Any) -> Any:
        kw["total_tokens"] = None  # the simulator sums the blocks itself
        kw["hashes_append_only"] = False  # and keeps a copy of the hashes
        return incremental(self, **kw)

    monkeypatch.setattr(CacheSimulator, "request", summed)


def reasons(results: list[dict[str, Any]]) -> Counter[str]:
    return Counter(row["cache_estimate"]["reason"] for result in results for row in rows(result))


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every request row of a result: the main thread's and its subagents'."""
    found = list(result["requests"])
    for subagent in result["subagents"]:
        found += subagent["requests"]
    return found


@pytest.mark.parametrize("lookback", [None, 2])
def test_incremental_rows_equal_the_full_computation(
    lookback: int | None, request: pytest.FixtureRequest
) -> None:
    incremental = {path.name: replays(path, lookback) for path in FILES}
    request.getfixturevalue("full_computation")
    full = {path.name: replays(path, lookback) for path in FILES}
    for name, results in incremental.items():
        assert results == full[name], name
    seen = reasons([r for results in incremental.values() for r in results])
    # the rules bite on these files (else the test proves less than it says)
    assert seen["ttl_expired"]
    assert seen["prefix_changed"]
    assert seen["server_miss"]
    if lookback is not None:
        assert seen["lookback_exceeded"]
    compactions = sum(
        1
        for results in incremental.values()
        for r in results
        for row in rows(r)
        for e in row["events"]
        if e.get("step") == "autocompact" and e.get("action") == "compacted"
    )
    assert compactions >= 4


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    lookback=st.integers(0, 6),
    ttl=st.sampled_from(["5m", "1h"]),
)
def test_simulator_sums_from_the_kept_total_equal_the_walk(seed: int, lookback: int, ttl: str):
    """Random sessions of appends, cuts (a prefix change), long gaps (TTL expiry), big appends
    (past the lookback) and warm prefixes: each request's result with the caller's total is the
    result of the simulator summing the blocks itself."""
    rng = random.Random(seed)
    kept = CacheSimulator(lookback_blocks=lookback)
    walked = CacheSimulator(lookback_blocks=lookback)
    keys = [1, 2]
    tokens = [rng.randint(0, 3000), rng.randint(0, 3000)]
    now = 0.0
    for _ in range(25):
        action = rng.random()
        if action < 0.15 and len(keys) > 3:  # a prefix change: cut and rebuild
            cut = rng.randint(2, len(keys) - 1)
            del keys[cut:], tokens[cut:]
        extra = rng.randint(1, 12 if action > 0.9 else 3)
        keys += [rng.randint(3, 10**9) for _ in range(extra)]
        tokens += [rng.randint(0, 2500) for _ in range(extra)]
        now += rng.choice([5.0, 30.0, 200.0, 400.0, 4000.0])
        hashes = rolling_hashes(keys, 7)
        last = len(keys) - 1
        warm = rng.choice([0, 0, 1, rng.randint(0, len(keys))])
        common = {
            "time": now,
            "model": "m",
            "prefix_hashes": hashes,
            "block_tokens": list(tokens),
            "breakpoints": [0, last],
            "ttl": ttl,
            "min_cacheable_tokens": 1024,
            "warm_blocks": warm,
            "ready_time": now + 2,
        }
        a = kept.request(**common, total_tokens=sum(tokens), hashes_append_only=True)
        b = walked.request(**common)
        assert a == b


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_probe_sizes_handed_to_the_pass_with_results_equal_measuring_again(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass with results' view takes the calibration probe's base sizes (one-thread
    sessions, the same texts): the same replays as a view that measures every block again."""
    handed = replays(path, None)
    measure_again = driver.calibrate

    def without_probes(inputs: Any, threads: Any, probes: Any = None) -> Any:
        return measure_again(inputs, threads)  # no probe handed on: each view measures

    monkeypatch.setattr(driver, "calibrate", without_probes)
    assert replays(path, None) == handed
