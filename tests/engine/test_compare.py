"""A/B deltas, first divergence and sweep values."""

from __future__ import annotations

import pytest

from contextlab import engine
from contextlab.engine.results.compare import (
    add_measures,
    delta,
    first_divergence,
    parse_sweep_values,
    summary_measures,
)
from tests.engine.test_pipeline import SMALL_WINDOW, long_session


def replay(tmp_path, **changes):
    session = engine.load_session(str(long_session(30).write(tmp_path / "s.jsonl")))
    config = engine.get_preset("claude-code-2.1.88").replace(**SMALL_WINDOW, **changes)
    return engine.replay(session, config, mode="whatif").to_json()


def test_delta_says_which_side_is_better(tmp_path):
    a = summary_measures(replay(tmp_path))
    b = summary_measures(replay(tmp_path, autocompact_pct_override=50))
    d = delta(a, b)
    assert d["compactions"]["b"] > d["compactions"]["a"]
    assert d["compactions"]["better"] == "a"
    assert d["peak_model_tokens"]["better"] == "b"
    assert d["requests"]["delta"] == 0


def test_first_divergence_is_where_the_configs_first_act_differently(tmp_path):
    a = replay(tmp_path)
    b = replay(tmp_path, autocompact_pct_override=50)
    index = first_divergence(a, b)
    assert index is not None
    assert a["requests"][index - 1]["raw_tokens"] == b["requests"][index - 1]["raw_tokens"]
    assert a["requests"][index]["raw_tokens"] != b["requests"][index]["raw_tokens"]
    assert first_divergence(a, a) is None


def test_totals_over_sessions_weight_rates_by_requests():
    one = dict.fromkeys(engine.compare.MEASURES, 0) | {
        "requests": 10,
        "cache_hit_rate": 1.0,
        "mean_history_share": 1.0,
        "cost_usd": 1.5,
    }
    two = dict.fromkeys(engine.compare.MEASURES, 0) | {
        "requests": 30,
        "cache_hit_rate": 0.0,
        "mean_history_share": 0.5,
        "cost_usd": 0.5,
    }
    total = add_measures([one, two])
    assert total["requests"] == 40
    assert total["cache_hit_rate"] == 0.25
    assert total["cost_usd"] == 2.0


def test_sweep_values_from_range_list_and_text():
    assert parse_sweep_values("autocompact_buffer_tokens", "5000:40000:5000") == [
        5000,
        10000,
        15000,
        20000,
        25000,
        30000,
        35000,
        40000,
    ]
    assert parse_sweep_values("time_based_mc_gap_threshold_minutes", [5, 30, 60]) == [5, 30, 60]
    assert parse_sweep_values("snip_trigger_pct", "0.7, 0.9") == [0.7, 0.9]


@pytest.mark.parametrize(
    ("field", "values", "message"),
    [
        ("warp_factor", "1,2", "unknown field"),
        ("autocompact_enabled", "1,2", "cannot sweep"),
        ("autocompact_buffer_tokens", "-5, 10", "autocompact_buffer_tokens"),
        ("autocompact_buffer_tokens", "1.5", "whole number"),
        ("autocompact_buffer_tokens", "0:100000:1", "at most 50"),
        ("autocompact_buffer_tokens", "abc", "numbers"),
    ],
)
def test_invalid_sweeps_name_the_field(field, values, message):
    with pytest.raises(engine.ConfigError, match=message) as info:
        parse_sweep_values(field, values)
    assert info.value.field == field
