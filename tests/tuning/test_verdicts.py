"""Comparison verdicts follow the user's goal; other differences are neutral; rates in points."""

from __future__ import annotations

from contextlab.engine import compare
from contextlab.tuning import verdicts


def _delta(**b_overrides: float) -> dict:
    a = dict.fromkeys(compare.MEASURES, 10)
    a["cache_hit_rate"] = 0.5
    a["mean_history_share"] = 0.6
    a["cost_usd"] = 10.0
    b = {**a, **b_overrides}
    return compare.delta(a, b)


def test_fewer_cache_reads_but_a_higher_cost_is_not_called_better():
    # the case: B reads less from the cache and costs 27.6 % more
    delta = _delta(cache_read_tokens=5, cost_usd=12.76)
    read = verdicts.read_delta(delta, "cost")
    assert read["cost_usd"]["verdict"] == "a"
    assert read["cost_usd"]["reading"] == "A better"
    assert read["cache_read_tokens"]["verdict"] is None
    assert read["cache_read_tokens"]["reading"] == "fewer in B"
    assert verdicts.headline(delta, "cost") == (
        "For the lowest cost, A is better: B costs 27.6 % more than A."
    )


def test_the_goal_decides_which_measure_gets_a_verdict():
    delta = _delta(cost_usd=12.0, mean_history_share=0.7, peak_model_tokens=8)
    history = verdicts.read_delta(delta, "history")
    assert history["mean_history_share"]["verdict"] == "b"
    assert history["cost_usd"]["verdict"] is None
    assert history["cost_usd"]["reading"] == "more in B"
    peak = verdicts.read_delta(delta, "peak")
    assert peak["peak_model_tokens"]["verdict"] == "b"
    assert verdicts.headline(delta, "history") == (
        "For the most history kept, B is better: B keeps 10.0 percentage points more of the history than A."
    )
    assert verdicts.goal_of("nonsense") == "cost"


def test_rates_differ_in_points_and_blocking_hits_are_always_worse():
    delta = _delta(cache_hit_rate=0.582, blocking_hits=12)
    read = verdicts.read_delta(delta, "cost")
    assert read["cache_hit_rate"]["points"] == 8.2
    assert read["cache_hit_rate"]["reading"] == "higher in B"
    assert read["compactions"]["points"] is None
    assert read["blocking_hits"]["verdict"] == "a"
    assert read["requests"]["reading"] == "same"
