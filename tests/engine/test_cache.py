"""Prompt-cache simulator: hits, misses and their reasons on tiny hand-built prompts."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Sequence

import pytest

from contextlab.engine.measures.prompt_cache import (
    CacheResult,
    CacheSimulator,
    block_key,
    rolling_hashes,
)

MODEL = "claude-sonnet-4-5"
MIN = 1024
MINUTE = 60.0
REASONS = {
    "first_request",
    "hit",
    "ttl_expired",
    "prefix_changed",
    "lookback_exceeded",
    "below_minimum",
    "model_changed",
    "no_breakpoint",
}


def prompt(n: int, *, changed: Sequence[int] = ()) -> list[int]:
    """Block keys 0..n-1; indices in ``changed`` get different content."""
    return [k + 1_000_000 if k in changed else k for k in range(n)]


def send(
    sim: CacheSimulator,
    time: float,
    keys: Sequence[int],
    breakpoints: Sequence[int],
    *,
    tokens: int | Sequence[int] = 100,
    model: str = MODEL,
    **kwargs: object,
) -> CacheResult:
    block_tokens = [tokens] * len(keys) if isinstance(tokens, int) else list(tokens)
    result = sim.request(
        time=time,
        model=model,
        prefix_hashes=rolling_hashes(keys, seed=7),
        block_tokens=block_tokens,
        breakpoints=breakpoints,
        min_cacheable_tokens=kwargs.pop("min_cacheable_tokens", MIN),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )
    assert result.read + result.write + result.uncached == sum(block_tokens)
    return result


def test_first_request_writes_everything_after_the_warm_prefix():
    sim = CacheSimulator()
    r = send(sim, 0, prompt(10), [3, 9], tokens=500, warm_blocks=4)
    assert (r.read, r.write, r.uncached) == (2000, 3000, 0)
    assert (r.write_5m, r.write_1h) == (3000, 0)
    assert r.hit_block == 4
    assert r.reason == "first_request"
    assert "warm" in r.detail


def test_first_request_without_warm_prefix_writes_everything_up_to_the_last_breakpoint():
    sim = CacheSimulator()
    r = send(sim, 0, prompt(10), [3, 7], tokens=500)
    assert (r.read, r.write, r.uncached, r.hit_block) == (0, 4000, 1000, 0)
    assert r.reason == "first_request"


def test_steady_growth_reads_the_previous_prefix_and_writes_the_delta():
    sim = CacheSimulator()
    tokens = [300] * 4 + [50 * (i + 1) for i in range(22)]
    send(sim, 0, prompt(20), [3, 19], tokens=tokens[:20])
    r = send(sim, 30, prompt(26), [3, 25], tokens=tokens)
    assert r.read == sum(tokens[:20])
    assert r.write == sum(tokens[20:26])
    assert r.uncached == 0
    assert r.hit_block == 20
    assert r.reason == "hit"
    assert "request 1" in r.detail


def test_read_write_uncached_always_add_up_to_the_request_total():
    rng = random.Random(20260301)
    for _ in range(40):
        sim = CacheSimulator(
            lookback_blocks=rng.choice([0, 3, 20]), lookback_enabled=rng.random() < 0.8
        )
        keys = prompt(rng.randint(1, 30))
        t = 0.0
        for _ in range(60):
            roll = rng.random()
            if roll < 0.6:
                keys = keys + [rng.getrandbits(32) for _ in range(rng.randint(0, 25))]
            elif roll < 0.8 and keys:
                keys = list(keys)
                keys[rng.randrange(len(keys))] = rng.getrandbits(32)
            elif keys:
                keys = keys[: rng.randint(1, len(keys))]
            t += rng.choice([1, 30, 299, 301, 3599, 3601, 7200])
            n = len(keys)
            tokens = [rng.randint(0, 900) for _ in range(n)]
            bps = sorted(rng.sample(range(n), k=min(n, rng.randint(0, 4))))
            r = send(
                sim,
                t,
                keys,
                bps,
                tokens=tokens,
                model=rng.choice([MODEL, MODEL, MODEL, "claude-opus-4-6"]),
                ttl=rng.choice(["5m", "1h"]),
                min_cacheable_tokens=rng.choice([0, 512, 1024, 4096]),
                warm_blocks=rng.randint(0, n),
            )
            assert min(r.read, r.write, r.uncached) >= 0
            assert r.write_5m + r.write_1h == r.write
            assert 0 <= r.hit_block <= n
            assert r.reason in REASONS
            assert r.detail


def test_entry_is_still_read_at_4m59s():
    sim = CacheSimulator()
    send(sim, 0, prompt(20), [19])
    r = send(sim, 4 * MINUTE + 59, prompt(22), [21])
    assert r.reason == "hit"
    assert (r.read, r.write) == (2000, 200)


def test_entry_expires_after_5m_and_1s():
    sim = CacheSimulator()
    send(sim, 0, prompt(20), [19])
    r = send(sim, 5 * MINUTE + 1, prompt(22), [21])
    assert (r.read, r.write, r.hit_block) == (0, 2200, 0)
    assert r.reason == "ttl_expired"
    assert r.detail.startswith("cache entry from request 1 expired after 5m (gap 5m 1s)")


def test_ttl_detail_names_the_request_label_and_the_gap():
    sim = CacheSimulator()
    send(sim, 0, prompt(20), [19], label="request 12")
    r = send(sim, 7 * MINUTE + 12, prompt(22), [21], label="request 13")
    assert r.detail.startswith("cache entry from request 12 expired after 5m (gap 7m 12s)")


def test_1h_entries_survive_a_30_minute_gap():
    sim = CacheSimulator()
    first = send(sim, 0, prompt(20), [19], ttl="1h")
    assert (first.write_5m, first.write_1h) == (0, 2000)
    r = send(sim, 30 * MINUTE, prompt(22), [21], ttl="1h")
    assert r.reason == "hit"
    assert r.read == 2000
    gone = send(sim, 30 * MINUTE + 3601, prompt(22), [21], ttl="1h")
    assert gone.reason == "ttl_expired"
    assert "after 1h" in gone.detail


def test_a_hit_refreshes_the_expiry():
    sim = CacheSimulator()
    send(sim, 0, prompt(20), [19])
    again = send(sim, 4 * MINUTE, prompt(20), [19])
    assert (again.read, again.write) == (2000, 0)
    r = send(sim, 8 * MINUTE, prompt(20), [19])
    assert r.reason == "hit"
    assert r.read == 2000


def test_without_the_refreshing_hit_the_same_entry_has_expired():
    sim = CacheSimulator()
    send(sim, 0, prompt(20), [19])
    r = send(sim, 8 * MINUTE, prompt(20), [19])
    assert r.reason == "ttl_expired"


@pytest.mark.parametrize(
    ("added", "reason", "hit_block"), [(20, "hit", 30), (21, "lookback_exceeded", 4)]
)
def test_the_previous_write_must_be_within_20_blocks_of_the_new_breakpoint(
    added, reason, hit_block
):
    sim = CacheSimulator()
    send(sim, 0, prompt(30), [3, 29], tokens=400)
    r = send(sim, 10, prompt(30 + added), [3, 29 + added], tokens=400)
    assert r.reason == reason
    assert r.hit_block == hit_block
    assert r.read == 400 * hit_block
    if reason == "lookback_exceeded":
        assert "21 blocks before the breakpoint at block 50" in r.detail


def test_unlimited_lookback_finds_the_previous_write():
    sim = CacheSimulator(lookback_enabled=False)
    send(sim, 0, prompt(30), [3, 29], tokens=400)
    r = send(sim, 10, prompt(51), [3, 50], tokens=400)
    assert r.reason == "hit"
    assert r.hit_block == 30


@pytest.mark.parametrize(
    ("breakpoints", "warm"), [([3, 29], 0), ([3, 29], 4)], ids=["system-entry", "warm-prefix"]
)
def test_a_changed_block_in_the_middle_reads_only_up_to_the_system_prefix(breakpoints, warm):
    sim = CacheSimulator()
    send(sim, 0, prompt(30), breakpoints, tokens=400, warm_blocks=warm)
    r = send(sim, 20, prompt(32, changed=[15]), [3, 31], tokens=400, warm_blocks=warm)
    assert r.reason == "prefix_changed"
    assert "block 15 differs" in r.detail
    assert r.hit_block == 4
    assert (r.read, r.write) == (1600, 400 * 28)


def test_a_read_of_the_warm_prefix_leaves_an_entry_under_its_breakpoint():
    # the file's first request read the system prompt another session had cached; later
    # requests are not warm by assumption, yet a change in the messages reads it back
    sim = CacheSimulator()
    send(sim, 0, prompt(10), [3, 9], tokens=500, warm_blocks=4)
    send(sim, MINUTE, prompt(12), [3, 11], tokens=500)
    r = send(sim, 2 * MINUTE, prompt(14, changed=[6]), [3, 13], tokens=500)
    assert r.reason == "prefix_changed"
    assert (r.hit_block, r.read, r.write) == (4, 2000, 5000)


def test_hits_keep_the_system_entry_warm_for_a_later_prefix_change():
    sim = CacheSimulator()
    send(sim, 0, prompt(30), [3, 29], tokens=400)
    send(sim, 4 * MINUTE, prompt(33), [3, 32], tokens=400)
    # 8 minutes after the system entry was written, but 4 after the hit that used it
    r = send(sim, 8 * MINUTE, prompt(35, changed=[10]), [3, 34], tokens=400)
    assert r.reason == "prefix_changed"
    assert r.hit_block == 4


def test_a_fork_with_its_marker_before_the_tail_reads_the_main_prefix():
    sim = CacheSimulator()
    send(sim, 0, prompt(30), [29])
    r = send(sim, 5, prompt(32), [29])
    assert (r.read, r.write, r.uncached) == (3000, 0, 200)
    assert r.reason == "hit"


def test_models_never_share_entries():
    sim = CacheSimulator()
    send(sim, 0, prompt(20), [19])
    other = send(sim, 10, prompt(20), [19], model="claude-opus-4-6")
    assert (other.read, other.write) == (0, 2000)
    assert other.reason == "model_changed"
    assert "claude-sonnet-4-5 to claude-opus-4-6" in other.detail
    back = send(sim, 20, prompt(21), [20])
    assert back.reason == "hit"
    assert back.read == 2000


def test_below_the_minimum_nothing_is_cached():
    sim = CacheSimulator()
    r = send(sim, 0, prompt(10), [9], tokens=50)
    assert (r.read, r.write, r.uncached, r.hit_block) == (0, 0, 500, 0)
    assert r.reason == "below_minimum"
    nxt = send(sim, 10, prompt(30), [29], tokens=50)
    assert nxt.reason == "first_request"
    assert nxt.write == 1500


def test_a_breakpoint_below_the_minimum_is_not_written_even_when_a_later_one_is():
    sim = CacheSimulator()
    send(sim, 0, prompt(30), [3, 29], tokens=100)  # system prefix: 400 tokens < 1024
    r = send(sim, 10, prompt(31, changed=[10]), [3, 30], tokens=100)
    assert r.reason == "prefix_changed"
    assert (r.read, r.write) == (0, 3100)


def test_a_request_without_breakpoints_is_all_uncached():
    sim = CacheSimulator()
    r = send(sim, 0, prompt(20), [])
    assert (r.read, r.write, r.uncached) == (0, 0, 2000)
    assert r.reason == "no_breakpoint"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"breakpoints": [20]}, "breakpoints must be block indices"),
        ({"breakpoints": [-1]}, "breakpoints must be block indices"),
        ({"ttl": "10m"}, "ttl must be one of"),
        ({"warm_blocks": 21}, "warm_blocks must be in"),
        ({"block_tokens": [1] * 19}, "prefix_hashes has 20 items"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, message):
    args: dict[str, object] = {
        "time": 0.0,
        "model": MODEL,
        "prefix_hashes": rolling_hashes(prompt(20), seed=0),
        "block_tokens": [100] * 20,
        "breakpoints": [19],
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        CacheSimulator().request(**args)  # type: ignore[arg-type]


def test_expired_entries_are_dropped_from_the_store():
    sim = CacheSimulator()
    for k in range(6000):
        send(sim, k * 10 * MINUTE, [k, k + 1, k + 2], [2], tokens=500)
    entries = sum(len(m["entries"]) for m in sim.snapshot()["models"].values())
    assert entries <= 4096


def test_rolling_hashes_can_be_extended_from_the_last_hash():
    keys = [block_key(f"block {i}") for i in range(12)]
    whole = rolling_hashes(keys, seed=3)
    head = rolling_hashes(keys[:5], seed=3)
    assert whole == head + rolling_hashes(keys[5:], seed=head[-1])
    assert rolling_hashes(keys, seed=4)[0] != whole[0]


def test_block_key_is_a_stable_64_bit_content_key():
    assert block_key("abc") == block_key("abc") != block_key("abd")
    assert 0 <= block_key("abc") < 2**64
    block_key("lone surrogate \ud800")  # from a JSON escape; must not raise


def test_keys_and_hashes_are_the_same_in_another_process():
    code = (
        "from contextlab.engine.measures.prompt_cache import block_key, rolling_hashes;"
        "print(rolling_hashes([block_key('a'), block_key('b')], seed=1))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1


def test_a_kept_total_and_an_append_only_hash_list_give_the_same_results() -> None:
    """``total_tokens`` and ``hashes_append_only`` (what the replay's CacheBlocks passes: one
    list appended to in place, a new list when the prompt changes inside it) change nothing
    of what the simulator decides, request after request: hits, a changed prefix, a TTL
    expiry, a model change."""
    rng = random.Random(5)
    copied, kept = CacheSimulator(), CacheSimulator()
    keys: list[int] = []
    hashes: list[int] = []
    time = 0.0
    for step in range(120):
        if step % 17 == 16 and len(keys) > 4:
            cut = rng.randrange(2, len(keys))
            keys = [*keys[:cut], *(rng.getrandbits(40) for _ in range(2))]
            hashes = hashes[:cut]  # a new list: the kept one must not change
        else:
            keys.extend(rng.getrandbits(40) for _ in range(rng.randint(1, 4)))
        hashes.extend(rolling_hashes(keys[len(hashes) :], hashes[-1] if hashes else 7))
        tokens = [(key % 900) + 50 for key in keys]
        time += 400.0 if step % 23 == 22 else rng.uniform(1, 60)
        model = MODEL if step % 41 != 40 else "claude-opus-4-1"
        common = {
            "time": time,
            "model": model,
            "block_tokens": tokens,
            "breakpoints": [0, len(keys) - 1],
            "min_cacheable_tokens": MIN,
        }
        expected = copied.request(prefix_hashes=list(hashes), **common)  # type: ignore[arg-type]
        got = kept.request(
            prefix_hashes=hashes,
            total_tokens=sum(tokens),
            hashes_append_only=True,
            **common,  # type: ignore[arg-type]
        )
        assert got == expected
