"""Fidelity of what a user acts on (prompt tokens, cache reads, price-free cost), and a forecast's."""

from __future__ import annotations

import math

import pytest

from contextlab import engine
from contextlab.engine.results.usage_fidelity import (
    estimate_of,
    weighted_estimate,
    weighted_recorded,
)
from tests.conftest import FIXTURES

SOURCE = FIXTURES / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl"


def _replay(usage_until: float = 1.0) -> engine.ReplayResult:
    session = engine.load_session(str(SOURCE))
    config, preset = engine.resolve_config("auto", version=session.version)
    return engine.replay(session, config, preset_name=preset, usage_until=usage_until)


def test_price_free_weights_are_claudes_multipliers():
    rec = {
        "input": 100,
        "cache_read": 1_000,
        "cache_write": 200,
        "cache_write_5m": 150,
        "cache_write_1h": 50,
        "output": 10,
    }
    assert weighted_recorded(rec) == pytest.approx(100 + 100 + 150 * 1.25 + 50 * 2 + 10 * 5)
    row = _replay().threads[0].requests[0]
    estimate_of(row).update(read=1_000, write=200, uncached=100)
    row["ttl"] = "1h"
    assert weighted_estimate(row, 10) == pytest.approx(100 + 100 + 200 * 2 + 50)
    row["ttl"] = "5m"
    assert weighted_estimate(row, 0) == pytest.approx(100 + 100 + 200 * 1.25)


def test_usage_fidelity_measures_every_recorded_request_against_its_usage():
    result = _replay()
    figs = engine.usage_fidelity(result)
    rows = [r for tr in result.threads for r in tr.requests if r["recorded"]]
    assert len(figs["requests"]) == len(rows)
    read = recorded_read = 0
    for row, point in zip(rows, figs["requests"], strict=True):
        rec = row["recorded"]
        total = rec["input"] + rec["cache_read"] + rec["cache_write"]
        assert point["prompt"] == pytest.approx((row["model_tokens"] - total) / total)
        estimate = estimate_of(row)
        assert point["read"] == pytest.approx((estimate["read"] - rec["cache_read"]) / total)
        read += estimate["read"]
        recorded_read += rec["cache_read"]
    assert figs["session_read"] == pytest.approx((read - recorded_read) / recorded_read)
    assert 0 <= figs["prompt_median"] <= figs["prompt_p90"]
    assert figs["session_cost"] is not None


def test_forecast_fidelity_measures_only_the_requests_the_forecast_did_not_read():
    full = _replay()
    forecast = _replay(0.3)
    figs = engine.forecast_fidelity(forecast, full)
    n = len(full.threads[0].requests)
    later = n - math.ceil(0.3 * n)
    assert len(figs["requests"]) == later
    assert {p["thread_request"] for p in figs["requests"]} == set(range(n - later, n))
    # a forecast that read everything leaves nothing to measure
    assert engine.forecast_fidelity(full, full)["requests"] == []
    # against its own recording the forecast strays further than the replay that read it
    assert figs["prompt_median"] > engine.usage_fidelity(full)["prompt_median"]
