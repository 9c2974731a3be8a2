from __future__ import annotations

import pytest

from contextlab.engine import evaluation
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
    # plotted at the request's number (from 1, as the pages say); the URL keeps its index
    assert list(data["compaction"]["x"]) == [4]
    assert list(data["microcompaction"]["x"]) == [4]
    assert list(data["model view"]["x"]) == [1, 2, 3, 4, 5]
    # every clickable point knows the URL of its request
    assert list(data["model view"]["customdata"]) == [url(i) for i in range(5)]
    # a short session: one whole-numbered tick per request, none at "request 2.5"
    xaxis = fig.to_dict()["layout"]["xaxis"]
    assert (xaxis["dtick"], xaxis["tickformat"]) == (1, ",d")
    assert list(data["compaction"]["customdata"]) == [url(3)]


def test_context_figure_without_recorded_usage_has_no_recorded_trace():
    data = traces(charts.build_context_figure(result(3, compact_at=None, recorded=False), url))
    assert "recorded input" not in data
    assert "compaction" not in data


def test_cache_figure_stacks_estimates_beside_recorded():
    fig = charts.build_cache_figure(result(4), url)
    data = traces(fig)
    layout = fig.to_dict()["layout"]
    assert layout["barmode"] == "stack"
    # which shape is estimated on its own line, under a title short enough for a phone
    assert layout["title"]["text"] == "Prompt cache per request"
    assert layout["title"]["subtitle"]["text"] == "bars: estimated, markers: recorded"
    assert list(data["cache read (est.)"]["y"]) == [900, 1900, 2900, 3900]
    assert list(data["cache write (est.)"]["y"]) == [100] * 4
    assert list(data["cache read (recorded)"]["y"]) == [990, 2090, 3190, 4290]


def test_cost_figure_is_cumulative():
    data = traces(charts.build_cost_figure(result(4), url))
    assert list(data["replay estimate"]["y"]) == pytest.approx([0.01, 0.02, 0.03, 0.04])
    assert list(data["recorded usage"]["y"]) == pytest.approx([0.012, 0.024, 0.036, 0.048])


def test_fidelity_reports_the_engines_refit_and_calibration():
    fid = charts.fidelity(result(5))
    assert fid["requests"] == 5
    # recorded = 1.1 × raw exactly: the refit (prefix 0, ratio 1.1) leaves no error
    assert fid["median_rel_error"] == pytest.approx(0, abs=1e-9)
    assert fid["p90_rel_error"] == pytest.approx(0, abs=1e-9)
    assert fid["max_rel_error"] == pytest.approx(0, abs=1e-9)
    assert [(t["thread"], t["requests"], t["ratio"]) for t in fid["threads"]] == [("main", 5, 1.1)]
    assert fid["calibration"]["prefix_tokens"] == 4000
    fig = charts.build_fidelity_figure(result(5), url)
    # percent with up to two decimals: a 0.3 % error does not read "0%"
    assert fig.to_dict()["layout"]["yaxis"]["tickformat"] == ".2~%"


def test_fidelity_figures_are_the_engines_with_one_percentile_definition():
    data = result(10)
    # bend the line: the fit cannot pass through every point any more
    for i, row in enumerate(data["requests"]):
        row["recorded_total"] = row["raw_tokens"] + 500 + (97 * i * i) % 400
        row["recorded"]["cache_read"] = row["recorded_total"] - 110
    fid = charts.fidelity(data)
    engine_fid = evaluation.result_fidelity(data)
    for key in ("requests", "median_rel_error", "p90_rel_error", "max_rel_error", "threads"):
        assert fid[key] == engine_fid[key]
    errors = engine_fid["errors"]
    assert len(errors) == 10
    assert errors == sorted(errors)
    assert errors[-1] > 0
    # nearest rank: p90 of ten values is the ninth, never an interpolation between two
    assert fid["p90_rel_error"] == errors[8]
    assert fid["median_rel_error"] == pytest.approx((errors[4] + errors[5]) / 2)
    # the figure plots the same per-request errors (signed), at each request's position
    trace = traces(charts.build_fidelity_figure(data, url))["(fitted count − recorded) / recorded"]
    assert list(trace["x"]) == list(range(1, 11))
    assert sorted(abs(y) for y in trace["y"]) == pytest.approx(errors)
    assert list(trace["customdata"]) == [url(i) for i in range(10)]


def test_fidelity_without_recorded_usage_is_empty():
    fid = charts.fidelity(result(3, recorded=False))
    assert fid["requests"] == 0
    assert fid["median_rel_error"] is None
    assert fid["p90_rel_error"] is None


def test_long_sessions_are_downsampled_but_keep_compactions(settings):
    settings.CHART_MAX_POINTS = 100
    fig = charts.build_context_figure(result(5000, compact_at=4321), url)
    data = traces(fig)
    xs = list(data["model view"]["x"])
    assert len(xs) <= 103
    assert 4322 in xs  # request index 4321, numbered from 1
    assert xs[0] == 1
    assert xs[-1] == 5000
    assert list(data["compaction"]["x"]) == [4322]
    # a long session: the axis picks its own ticks
    assert "dtick" not in fig.to_dict()["layout"]["xaxis"]


def test_sample_positions_keeps_short_series_whole():
    assert charts.sample_positions(5, max_points=10) == [0, 1, 2, 3, 4]


def test_figure_json_is_plain_data():
    out = charts.figure_json(charts.build_cost_figure(result(2), url))
    assert set(out) == {"data", "layout"}


def test_long_sessions_draw_lines_and_areas_not_one_shape_per_request():
    long = result(charts.MARKER_LIMIT + 50)
    context = traces(charts.build_context_figure(long, url))
    assert context["model view"]["mode"] == "lines"
    assert context["recorded input"]["mode"] == "lines"
    cache = charts.build_cache_figure(long, url).to_dict()
    estimated = [t for t in cache["data"] if t["name"].endswith("(est.)")]
    assert [t["type"] for t in estimated] == ["scatter"] * 3
    assert {t["stackgroup"] for t in estimated} == {"estimate"}
    assert list(estimated[1]["y"]) == [100] * (charts.MARKER_LIMIT + 50)
    # short sessions keep a bar and a marker per request
    short = charts.build_cache_figure(result(4), url).to_dict()
    assert [t["type"] for t in short["data"][:3]] == ["bar"] * 3


def test_a_recorded_cache_mark_shows_on_the_bar_it_sits_on():
    """Recorded read and write marks sit on the estimate's bars: drawn in the bars' own colours
    they vanished (a green mark on the green read bar); each differs from every bar's colour."""
    data = traces(charts.build_cache_figure(result(4), url))
    bar_colors = {
        data[f"{label} (est.)"]["marker"]["color"]
        for label in ("cache read", "cache write", "uncached")
    }
    for label in ("cache read", "cache write"):
        mark = data[f"{label} (recorded)"]["marker"]
        assert mark["color"] not in bar_colors
        assert mark["line"]["color"] not in bar_colors
    # about a bar's width: a few wide bars, wide marks; many narrow bars, narrow ones
    many = traces(charts.build_cache_figure(result(150), url))
    assert data["cache read (recorded)"]["marker"]["size"] == 18
    assert many["cache read (recorded)"]["marker"]["size"] == 6


def test_every_request_chart_keeps_its_legend_at_the_foot_of_the_figure():
    """Placed at a fraction of the plot's height below it, a legend that wraps to more rows on
    a narrow screen ran into the axis title or past the figure (the browser test measures it)."""
    fig = charts.build_context_figure(result(4), url).to_dict()
    legend = fig["layout"]["legend"]
    assert (legend["yref"], legend["yanchor"], legend["y"]) == ("container", "bottom", 0)
