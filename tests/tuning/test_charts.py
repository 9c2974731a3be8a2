from __future__ import annotations

from typing import Any

from contextlab.tuning import charts
from tests.runs.results import request, result


def url(i):
    return f"/compare/1/requests/{i}/?session=2"


def early_result():
    data = result(6, compact_at=2)
    for r in data["requests"]:
        r["thresholds"] = {**r["thresholds"], "autocompact": 90000, "warning": 70000}
    return data


def by_name(fig):
    return {trace["name"]: trace for trace in fig.to_dict()["data"]}


def test_context_figure_overlays_both_model_views_with_both_thresholds():
    fig = charts.build_context_compare_figure(result(6, compact_at=None), early_result(), url)
    traces = by_name(fig)
    assert traces["A: model view"]["y"] == [1000 * (i + 1) for i in range(6)]
    assert len(traces["B: model view"]["y"]) == 6
    for side in ("A", "B"):
        assert f"{side}: autocompact level" in traces
        assert f"{side}: warning level" in traces
    assert set(traces["A: autocompact level"]["y"]) == {155000}
    assert set(traces["B: autocompact level"]["y"]) == {90000}
    assert set(traces["B: warning level"]["y"]) == {70000}
    # compaction markers only where that side compacted
    assert "A: compaction" not in traces
    assert list(traces["B: compaction"]["x"]) == [3]  # index 2: request 3
    assert traces["A: model view"]["customdata"][3] == url(3)


def test_context_figure_uses_the_given_labels():
    fig = charts.build_context_compare_figure(
        result(5), result(5), url, labels=("A (auto)", "B (mine v2)")
    )
    names = set(by_name(fig))
    assert "A (auto): model view" in names
    assert "B (mine v2): compaction" in names


def test_cache_figure_has_read_and_write_for_both():
    traces = by_name(charts.build_cache_compare_figure(result(4), early_result(), url))
    assert set(traces) == {"A: cache read", "A: cache write", "B: cache read", "B: cache write"}
    assert traces["A: cache write"]["y"] == [100, 100, 100, 100]


def test_cost_figure_is_cumulative_for_both():
    a = result(3)
    b = result(3)
    for r in b["requests"]:
        r["cost_usd"] = 0.02
    traces = by_name(charts.build_cost_compare_figure(a, b, url))
    assert traces["A: cumulative cost"]["y"] == [0.01, 0.02, 0.03]
    assert traces["B: cumulative cost"]["y"] == [0.02, 0.04, 0.06]


def test_sides_of_different_lengths_and_missing_results():
    short = {"requests": [request(0, model=10, repl=10)]}
    traces = by_name(charts.build_context_compare_figure(short, result(3), url))
    assert len(traces["A: model view"]["x"]) == 1
    assert len(traces["B: model view"]["x"]) == 3
    assert (
        by_name(charts.build_cost_compare_figure(None, None, url))["A: cumulative cost"]["x"] == []
    )


def test_long_sessions_are_thinned_but_keep_every_compaction(settings):
    settings.CHART_MAX_POINTS = 50
    data = result(400, compact_at=333)
    traces = by_name(charts.build_context_compare_figure(data, result(400, compact_at=None), url))
    assert len(traces["A: model view"]["x"]) < 120
    assert 334 in list(traces["A: model view"]["x"])  # index 333, numbered from 1
    assert list(traces["A: compaction"]["x"]) == [334]


def test_sweep_figure_one_point_per_finished_value():
    points: list[dict[str, Any]] = [
        {"value": 50, "summary": {"cost_usd": 1.5, "mean_history_share": 0.6, "compactions": 3}},
        {"value": 70, "summary": {"cost_usd": 1.2, "mean_history_share": 0.8, "compactions": 1}},
        {"value": 90, "summary": None},
    ]
    fig = charts.build_sweep_figure(
        points, field="autocompact_pct_override", labels={"cost_usd": "estimated cost ($)"}
    ).to_dict()
    (trace,) = fig["data"]
    assert list(trace["x"]) == [0.6, 0.8]
    assert list(trace["y"]) == [1.5, 1.2]
    assert list(trace["text"]) == ["50", "70"]
    assert "autocompact_pct_override = %{text}" in trace["hovertemplate"]
    assert fig["layout"]["yaxis"]["title"]["text"] == "estimated cost ($)"
    other = charts.build_sweep_figure(points, field="f", x="compactions", y="cost_usd").to_dict()
    assert list(other["data"][0]["x"]) == [3, 1]


def test_sweep_figure_has_a_series_per_session_and_the_total_in_the_tables_units():
    def point(value: int, a: float, b: float) -> dict[str, Any]:
        sessions = [
            {"name": "one.jsonl", "summary": {"cost_usd": a, "mean_history_share": 0.5}},
            {"name": "two.jsonl", "summary": {"cost_usd": b, "mean_history_share": 0.7}},
        ]
        total = {"cost_usd": a + b, "mean_history_share": 0.6}
        return {"value": value, "summary": total, "sessions": sessions}

    fig = charts.build_sweep_figure(
        [point(50, 1.0, 2.0), point(70, 0.5, 1.5), point(90, 0.4, 1.0)], field="pct"
    ).to_dict()
    names = [t["name"] for t in fig["data"]]
    assert names == ["one.jsonl", "two.jsonl", "total"]
    assert list(fig["data"][1]["y"]) == [2.0, 1.5, 1.0]
    assert list(fig["data"][2]["y"]) == [3.0, 2.0, 1.4]
    # fitted to the data, in dollars and percent as the table shows them
    assert fig["layout"]["yaxis"]["rangemode"] == "normal"
    assert fig["layout"]["yaxis"]["tickprefix"] == "$"
    assert fig["layout"]["xaxis"]["tickformat"] == ".0%"
    # neighbouring value labels alternate above and below the line
    assert list(fig["data"][2]["textposition"]) == ["top center", "bottom center", "top center"]
