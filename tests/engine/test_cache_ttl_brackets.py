"""The cache TTLs as the corpus recordings bracket them (issue #20, item 7).

Across the corpus, with the 5-minute TTL the longest gap after which a request still read the
conversation from the cache is 283 s and the shortest after which it read none of it is 332 s;
with the 1-hour TTL, 3,518 s and 3,763 s. Both bracket the documented TTL, so the simulator
keeps it exactly, with no slack: an entry refreshed at t is read until t + TTL, not after.
"""

from __future__ import annotations

import pytest

from contextlab.engine.measures.prompt_cache import CacheSimulator, rolling_hashes

BLOCKS = [4_000, 3_000, 2_000]


def read_after(ttl: str, gap: float) -> int:
    sim = CacheSimulator()
    hashes = rolling_hashes([1, 2, 3], seed=7)
    sim.request(
        time=0.0, model="m", prefix_hashes=hashes, block_tokens=BLOCKS, breakpoints=[2], ttl=ttl
    )
    return sim.request(
        time=gap, model="m", prefix_hashes=hashes, block_tokens=BLOCKS, breakpoints=[2], ttl=ttl
    ).read


@pytest.mark.parametrize(
    ("ttl", "last_hit", "first_miss"), [("5m", 283.0, 332.0), ("1h", 3_518.0, 3_763.0)]
)
def test_the_recorded_brackets_of_each_ttl_hold(ttl, last_hit, first_miss):
    assert read_after(ttl, last_hit) == sum(BLOCKS)
    assert read_after(ttl, first_miss) == 0


@pytest.mark.parametrize(("ttl", "seconds"), [("5m", 300.0), ("1h", 3_600.0)])
def test_no_slack_past_the_ttl(ttl, seconds):
    assert read_after(ttl, seconds - 1) == sum(BLOCKS)
    assert read_after(ttl, seconds + 1) == 0
