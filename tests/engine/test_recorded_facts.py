"""Recorded facts first (issue #20, item 1): a recorded replay shows each request's cache and
cost as the API recorded them; the cache model's estimate stands beside them, labelled.

The transcripts are the small synthetic ones of ``test_server_misses`` (every request reads
what the one before it left and writes the rest, except where a test says); the whole corpus
is checked in ``test_corpus_truth.py``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.measures.cost import load_pricing, request_cost
from contextlab.engine.replay.recorded_cache import DISAGREE_MARGIN
from tests.engine.test_anchors import conversation, plain_replay
from tests.engine.test_server_misses import SYSTEM, replayed, with_cache_usage

CACHE_FIELDS = {
    "read",
    "write",
    "write_5m",
    "write_1h",
    "uncached",
    "hit_blocks",
    "blocks",
    "hit",
    "reason",
    "detail",
    "server_miss_tokens",
    "source",
}


def priced(row: dict[str, Any]) -> float:
    """The recorded usage of a row at list prices, computed here from ``recorded`` alone."""
    rec = row["recorded"]
    w1h = rec["cache_write_1h"] or 0
    return request_cost(
        row["model"],
        uncached=rec["input"],
        cache_read=rec["cache_read"],
        cache_write_5m=rec["cache_write"] - w1h,
        cache_write_1h=w1h,
        output=rec["output"],
        pricing=load_pricing(),
    )


def test_a_recorded_request_shows_its_recorded_usage_exactly(tmp_path):
    _, data = replayed(with_cache_usage(tmp_path, drop_at=None))
    rows = data["requests"]
    assert rows
    for row in rows:
        rec, cache = row["recorded"], row["cache"]
        assert cache["source"] == "recorded"
        assert set(cache) == set(row["cache_estimate"]) == CACHE_FIELDS
        assert row["cache_estimate"]["source"] == "estimate"
        assert cache["read"] == rec["cache_read"]
        assert cache["write"] == rec["cache_write"]
        assert cache["write_1h"] == rec["cache_write_1h"]
        assert cache["write_5m"] == rec["cache_write"] - rec["cache_write_1h"]
        assert cache["uncached"] == rec["input"]
        # the price of exactly that usage, and the estimate priced apart
        assert row["cost_usd"] == pytest.approx(priced(row), abs=1e-6)
        assert row["cost_usd"] == row["recorded_cost_usd"]
        est = row["cache_estimate"]
        assert est["read"] + est["write"] + est["uncached"] == row["model_tokens"]
    summary = data["summary"]
    assert summary["recorded_cache_requests"] == len(rows)
    assert summary["cost_usd"] == pytest.approx(sum(priced(r) for r in rows), abs=1e-5)
    assert summary["estimate"]["cost_usd"] == pytest.approx(
        sum(r["cost_estimate_usd"] for r in rows), abs=1e-5
    )
    assert summary["cache_read_tokens"] == sum(r["recorded"]["cache_read"] for r in rows)


def test_a_recorded_drop_is_a_recorded_miss_whose_cause_is_inferred(tmp_path):
    _, data = replayed(with_cache_usage(tmp_path, drop_at=6))
    row = data["requests"][6]
    assert row["cache"]["read"] == SYSTEM
    assert row["cache"]["hit"] is False
    assert row["cache"]["reason"] == "server_miss"
    assert "cause (inferred)" in row["cache"]["detail"]
    sentence = engine.cache_sentence(row, data["requests"][5])
    assert sentence.startswith("Cache miss (recorded)")
    assert "cause inferred by the cache model" in sentence
    assert all(r["cache"]["hit"] for k, r in enumerate(data["requests"]) if k not in (0, 6))


def _after_a_pause(tmp_path: Path) -> Path:
    """Two hours between requests 5 and 6, and the recording still read everything there
    (another process kept the entry warm): the cache model calls it expired."""
    b = conversation(10)
    rows = plain_replay(b.write(tmp_path / "draft.jsonl")).to_json()["requests"]
    moved = rows[6]["line"]
    for i, rec in enumerate(b.records):
        if i + 1 >= moved - 2 and rec.get("timestamp"):
            stamp = datetime.fromisoformat(rec["timestamp"].replace("Z", "+00:00"))
            rec["timestamp"] = (stamp + timedelta(hours=2)).isoformat().replace("+00:00", "Z")
    (tmp_path / "b").mkdir()
    return with_cache_usage(tmp_path / "b", drop_at=None, builder=b)


def test_a_recorded_hit_is_shown_as_a_hit_where_the_model_expected_a_miss(tmp_path):
    _, data = replayed(_after_a_pause(tmp_path))
    row = data["requests"][6]
    assert row["cache_estimate"]["reason"] == "ttl_expired"
    assert row["cache"]["reason"] == "hit"
    assert row["cache"]["hit"] is True
    assert row["cache"]["read"] >= 0.5 * row["recorded_total"]
    # the two disagree by more than the stated margin: flagged, with the gap
    assert row["cache_disagrees"] is True
    assert row["cache_read_gap"] < -DISAGREE_MARGIN
    assert data["summary"]["cache_disagreements"] >= 1
    assert not any(
        e["request"] == 6
        for e in engine.request_events(data["requests"])
        if e["kind"] == "cache_miss"
    )
    sentence = engine.cache_sentence(row, data["requests"][5])
    assert sentence.startswith("Cache hit (recorded)")
    # the neighbours agree, and are not flagged
    assert not data["requests"][7]["cache_disagrees"]


def test_a_whatif_has_only_the_estimate_in_both_fields(tmp_path):
    _, data = replayed(with_cache_usage(tmp_path, drop_at=None), "whatif")
    for row in data["requests"]:
        assert row["cache"] == row["cache_estimate"]
        assert row["cache"]["source"] == "estimate"
        assert row["cost_usd"] == row["cost_estimate_usd"]
        assert row["cache_read_gap"] is None
        assert row["cache_disagrees"] is False
    assert data["summary"]["recorded_cache_requests"] == 0
    assert data["summary"]["cost_usd"] == data["summary"]["estimate"]["cost_usd"]


def test_the_estimate_is_the_same_in_recorded_and_whatif_where_nothing_changed(tmp_path):
    path = with_cache_usage(tmp_path, drop_at=None)
    _, rec = replayed(path)
    _, wi = replayed(path, "whatif")
    # nothing compacts in this short session: the two replays see the same prompts
    assert [r["cache_estimate"] for r in rec["requests"]] == [
        r["cache_estimate"] for r in wi["requests"]
    ]
    assert [r["cost_estimate_usd"] for r in rec["requests"]] == [
        r["cost_estimate_usd"] for r in wi["requests"]
    ]
    # so the what-if's anchored cost is what was paid, with the session's own error as band
    anchored = engine.compare.whatif_cost(wi["summary"], rec["summary"])
    assert anchored["cost_usd"] == pytest.approx(rec["summary"]["cost_usd"], abs=1e-6)
    assert anchored["change_usd"] == pytest.approx(0.0, abs=1e-6)
    paid, est = rec["summary"]["cost_usd"], rec["summary"]["estimate"]["cost_usd"]
    assert anchored["band_share"] == pytest.approx(abs(est - paid) / paid, abs=1e-4)
    assert anchored["band_usd"] == pytest.approx(abs(est - paid) / paid * est, abs=1e-6)


def test_whatif_cost_adds_the_change_between_the_two_estimates():
    baseline = {"cost_usd": 10.0, "estimate": {"cost_usd": 9.0}}
    whatif = {"cost_usd": 7.5, "estimate": {"cost_usd": 7.5}}
    out = engine.compare.whatif_cost(whatif, baseline)
    assert out["cost_usd"] == pytest.approx(8.5)  # 10 + (7.5 − 9)
    assert out["change_usd"] == pytest.approx(-1.5)
    assert out["band_share"] == pytest.approx(0.1)  # the baseline estimate was 10 % off
    assert out["band_usd"] == pytest.approx(0.75)
    # nothing recorded to measure the band against: no band, never a made-up one
    assert (
        engine.compare.whatif_cost(whatif, {"cost_usd": 0.0, "estimate": {"cost_usd": 0.0}})[
            "band_usd"
        ]
        is None
    )
