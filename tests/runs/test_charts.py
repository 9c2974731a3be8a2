from __future__ import annotations

import pytest

from contextlab.runs import charts
from tests.runs.results import result


def url(i: int) -> str:
    return f"/sessions/1/requests/{i}/?run=1"


def traces(fig):
    return {t["name"]: t for t in fig.to_dict()["data"]}


def test_context_figure_has_history_model_recorded_thresholds_and_markers():
    fig = charts.build_context_figure(result(5, compact_at=3), url)
    data = traces(fig)
    assert list(data["full history"]["y"]) == [2000, 4000, 6000, 8000, 10000]
    assert list(data["model view"]["y"]) == [1000, 2000, 3000, 4000, 5000]
    assert list(data["recorded input"]["y"]) == [1100, 2200, 3300, 4400, 5500]
    assert set(data["autocompact level"]["y"]) == {155000}
    assert set(data["warning level"]["y"]) == {135000}
    assert set(data["blocking level"]["y"]) == {197000}
    assert list(data["compaction"]["x"]) == [3]
    assert list(data["microcompaction"]["x"]) == [3]
    # every clickable point knows the URL of its request
    assert list(data["model view"]["customdata"]) == [url(i) for i in range(5)]
    assert list(data["compaction"]["customdata"]) == [url(3)]


def test_context_figure_without_recorded_usage_has_no_recorded_trace():
    data = traces(charts.build_context_figure(result(3, compact_at=None, recorded=False), url))
    assert "recorded input" not in data
    assert "compaction" not in data


def test_cache_figure_stacks_estimates_beside_recorded():
    fig = charts.build_cache_figure(result(4), url)
    data = traces(fig)
    assert fig.to_dict()["layout"]["barmode"] == "stack"
    assert list(data["cache read (est.)"]["y"]) == [900, 1900, 2900, 3900]
    assert list(data["cache write (est.)"]["y"]) == [100] * 4
    assert list(data["cache read (recorded)"]["y"]) == [990, 2090, 3190, 4290]


def test_cost_figure_is_cumulative():
    data = traces(charts.build_cost_figure(result(4), url))
    assert list(data["replay estimate"]["y"]) == pytest.approx([0.01, 0.02, 0.03, 0.04])
    assert list(data["recorded usage"]["y"]) == pytest.approx([0.012, 0.024, 0.036, 0.048])


def test_fidelity_reports_relative_errors_and_calibration():
    fid = charts.fidelity(result(5))
    assert fid["count"] == 5
    # model = recorded / 1.1 everywhere (up to rounding)
    assert fid["median_abs_rel_error"] == pytest.approx(1 - 1 / 1.1, abs=1e-3)
    assert fid["p90_abs_rel_error"] == pytest.approx(1 - 1 / 1.1, abs=1e-3)
    assert fid["calibration"]["prefix_tokens"] == 4000
    fig = charts.build_fidelity_figure(result(5), url)
    assert fig.to_dict()["layout"]["yaxis"]["tickformat"] == ".0%"


def test_fidelity_without_recorded_usage_is_empty():
    fid = charts.fidelity(result(3, recorded=False))
    assert fid["count"] == 0
    assert fid["median_abs_rel_error"] is None


def test_long_sessions_are_downsampled_but_keep_compactions(settings):
    settings.CHART_MAX_POINTS = 100
    fig = charts.build_context_figure(result(5000, compact_at=4321), url)
    data = traces(fig)
    xs = list(data["model view"]["x"])
    assert len(xs) <= 103
    assert 4321 in xs
    assert xs[0] == 0
    assert xs[-1] == 4999
    assert list(data["compaction"]["x"]) == [4321]


def test_sample_positions_keeps_short_series_whole():
    assert charts.sample_positions(5, max_points=10) == [0, 1, 2, 3, 4]


def test_figure_json_is_plain_data():
    out = charts.figure_json(charts.build_cost_figure(result(2), url))
    assert set(out) == {"data", "layout"}
