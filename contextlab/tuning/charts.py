"""Plotly figures for comparisons and sweeps (pure functions of the engine's result JSON).

A/B figures overlay the two replays of one session: A in blue, B in orange, each with its own
threshold lines and compaction markers. Points carry the URL of the A-vs-B request view in
``customdata`` (static/js/app.js opens it on click).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import accumulate
from typing import Any

import plotly.graph_objects as go

from contextlab.engine import RequestRow, as_result
from contextlab.runs.charts import (
    figure_json,
    has_event,
    number_requests_from_one,
    sample_positions,
    styled_layout,
    threshold_trace,
)

RequestUrl = Callable[[int], str]

SIDE_COLORS = {"a": "#2563eb", "b": "#ea580c"}
LEVEL_DASH = {"autocompact": "dash", "warning": "dot"}


def _layout(title: str, xaxis: str, yaxis: str) -> dict[str, Any]:
    return styled_layout(title, xaxis, yaxis, 380)


def _requests(result: Mapping[str, Any] | None) -> list[RequestRow]:
    """The main conversation's request rows of a stored result (none for a missing side)."""
    return list(as_result(result)["requests"]) if result else []


def _positions(a: list[RequestRow], b: list[RequestRow]) -> list[int]:
    """Shared x positions (thinned for long sessions), keeping every compaction of A or B."""
    count = max(len(a), len(b))
    keep = [
        i
        for i in range(count)
        if (i < len(a) and has_event(a[i], "autocompact"))
        or (i < len(b) and has_event(b[i], "autocompact"))
    ]
    return sample_positions(count, keep)


def _sides(
    result_a: Mapping[str, Any] | None, result_b: Mapping[str, Any] | None
) -> list[tuple[str, str, list[RequestRow]]]:
    return [("a", "A", _requests(result_a)), ("b", "B", _requests(result_b))]


def _request_line(
    key: str,
    xs: list[int],
    ys: Sequence[Any],
    request_url: RequestUrl,
    *,
    name: str,
    kind: str,
    **line: Any,
) -> go.Scatter:
    """One side's line over request positions; a click opens that request's A-vs-B view."""
    return go.Scatter(
        x=xs,
        y=list(ys),
        name=name,
        mode="lines",
        line={"color": SIDE_COLORS[key], **line},
        customdata=[request_url(p) for p in xs],
        meta={"side": key, "kind": kind},
    )


def build_context_compare_figure(
    result_a: Mapping[str, Any] | None,
    result_b: Mapping[str, Any] | None,
    request_url: RequestUrl,
    *,
    labels: Sequence[str] = ("A", "B"),
) -> go.Figure:
    """Model-view tokens per request for A and B, both sets of thresholds, compactions."""
    sides = _sides(result_a, result_b)
    pos = _positions(sides[0][2], sides[1][2])
    fig = go.Figure(layout=_layout("Context size per request: A vs B", "request", "tokens"))
    for (key, _, requests), label in zip(sides, labels, strict=True):
        xs = [p for p in pos if p < len(requests)]
        rows = [requests[p] for p in xs]
        color = SIDE_COLORS[key]
        fig.add_trace(
            _request_line(
                key,
                xs,
                [r.get("model_tokens") for r in rows],
                request_url,
                name=f"{label}: model view",
                kind="model_tokens",
                width=2,
            )
        )
        for level in ("autocompact", "warning"):
            trace = threshold_trace(
                xs,
                rows,
                level,
                name=f"{label}: {level} level",
                line={"color": color, "dash": LEVEL_DASH[level]},
                opacity=0.7,
                meta={"side": key, "kind": f"{level}_level"},
            )
            if trace is not None:
                fig.add_trace(trace)
        marks = [p for p in xs if has_event(requests[p], "autocompact")]
        if marks:
            fig.add_trace(
                go.Scatter(
                    x=marks,
                    y=[requests[p].get("model_tokens") for p in marks],
                    name=f"{label}: compaction",
                    mode="markers",
                    customdata=[request_url(p) for p in marks],
                    marker={
                        "size": 12,
                        "symbol": "diamond" if key == "a" else "square",
                        "color": color,
                        "line": {"width": 1, "color": "#fff"},
                    },
                    meta={"side": key, "kind": "compaction"},
                )
            )
    return number_requests_from_one(fig)


def build_cache_compare_figure(
    result_a: Mapping[str, Any] | None,
    result_b: Mapping[str, Any] | None,
    request_url: RequestUrl,
    *,
    labels: Sequence[str] = ("A", "B"),
) -> go.Figure:
    """Estimated cache read and cache write tokens per request, for A and B."""
    sides = _sides(result_a, result_b)
    pos = _positions(sides[0][2], sides[1][2])
    fig = go.Figure(layout=_layout("Prompt cache per request: A vs B", "request", "tokens"))
    for (key, _, requests), label in zip(sides, labels, strict=True):
        xs = [p for p in pos if p < len(requests)]
        for part, dash in (("read", "solid"), ("write", "dot")):
            fig.add_trace(
                _request_line(
                    key,
                    xs,
                    [
                        (requests[p].get("cache_estimate") or requests[p]["cache"]).get(part, 0)
                        for p in xs
                    ],
                    request_url,
                    name=f"{label}: cache {part}",
                    kind=f"cache_{part}",
                    dash=dash,
                    width=1.5,
                )
            )
    return number_requests_from_one(fig)


def cumulative_cost(requests: list[RequestRow]) -> list[float]:
    """Running total of each request's estimated cost, in USD (the replay's estimate on both
    sides of a comparison: the same model, whatever was recorded)."""
    totals = accumulate(float(r.get("cost_estimate_usd", r["cost_usd"])) for r in requests)
    return [round(total, 6) for total in totals]


def build_cost_compare_figure(
    result_a: Mapping[str, Any] | None,
    result_b: Mapping[str, Any] | None,
    request_url: RequestUrl,
    *,
    labels: Sequence[str] = ("A", "B"),
) -> go.Figure:
    """Cumulative estimated cost in USD for A and B."""
    sides = _sides(result_a, result_b)
    pos = _positions(sides[0][2], sides[1][2])
    fig = go.Figure(layout=_layout("Cumulative cost: A vs B", "request", "USD"))
    for (key, _, requests), label in zip(sides, labels, strict=True):
        cost = cumulative_cost(requests)
        xs = [p for p in pos if p < len(requests)]
        fig.add_trace(
            _request_line(
                key,
                xs,
                [cost[p] for p in xs],
                request_url,
                name=f"{label}: cumulative cost",
                kind="cost",
            )
        )
    return number_requests_from_one(fig)


def _short(value: Any) -> str:
    """A swept value as a point label: 70.0 → "70", 0.25 stays."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


#: axis formats matching the tables: dollars, shares in percent, plain counts
USD_MEASURES = frozenset({"cost_usd", "summary_cost_usd"})
SHARE_MEASURES = frozenset({"cache_hit_rate", "mean_history_share"})


def _axis_format(key: str) -> dict[str, Any]:
    # fitted to the data (not from zero), in the table's units
    base: dict[str, Any] = {"rangemode": "normal", "autorange": True}
    if key in USD_MEASURES:
        return {**base, "tickprefix": "$", "tickformat": ",.2f"}
    if key in SHARE_MEASURES:
        return {**base, "tickformat": ".0%"}
    return {**base, "tickformat": ",~s" if key.endswith("_tokens") else ",d"}


def _hover_format(key: str) -> str:
    if key in USD_MEASURES:
        return "$,.2f"
    if key in SHARE_MEASURES:
        return ".1%"
    return ",.0f"


def build_sweep_figure(
    points: Sequence[dict[str, Any]],
    *,
    field: str,
    x: str = "mean_history_share",
    y: str = "cost_usd",
    labels: dict[str, str] | None = None,
) -> go.Figure:
    """One point per swept value: measure ``y`` against measure ``x``, the total over the
    sessions and (with more than one) each session's own series."""
    labels = labels or {}
    done = [p for p in points if p.get("summary")]
    x_label, y_label = labels.get(x, x), labels.get(y, y)
    layout = _layout(f"{y_label} against {x_label}, one point per {field}", x_label, y_label)
    layout["hovermode"] = "closest"
    layout["xaxis"].update(_axis_format(x))
    layout["yaxis"].update(_axis_format(y))
    layout["margin"] = {"l": 70, "r": 30, "t": 50, "b": 50}
    fig = go.Figure(layout=layout)
    hover = (
        f"{field} = %{{text}}<br>{x_label}: %{{x:{_hover_format(x)}}}<br>"
        f"{y_label}: %{{y:{_hover_format(y)}}}<extra>%{{fullData.name}}</extra>"
    )
    names = sorted({s["name"] for p in done for s in p.get("sessions") or []})
    if len(names) > 1:
        for i, name in enumerate(names):
            rows = [
                (p, s["summary"])
                for p in done
                for s in p.get("sessions") or []
                if s["name"] == name and s.get("summary")
            ]
            fig.add_trace(
                go.Scatter(
                    x=[m.get(x) for _, m in rows],
                    y=[m.get(y) for _, m in rows],
                    text=[_short(p["value"]) for p, _ in rows],
                    name=name if len(name) <= 40 else name[:39] + "…",
                    mode="lines+markers",
                    marker={"size": 6, "color": SESSION_COLORS[i % len(SESSION_COLORS)]},
                    line={"width": 1, "color": SESSION_COLORS[i % len(SESSION_COLORS)]},
                    opacity=0.7,
                    hovertemplate=hover,
                )
            )
    fig.add_trace(
        go.Scatter(
            x=[p["summary"].get(x) for p in done],
            y=[p["summary"].get(y) for p in done],
            text=[_short(p["value"]) for p in done],
            name="total" if len(names) > 1 else field,
            mode="lines+markers+text",
            # alternate above and below, so neighbouring value labels do not overlap
            textposition=[
                "top center" if i % 2 == 0 else "bottom center" for i in range(len(done))
            ],
            cliponaxis=False,
            marker={"size": 10, "color": SIDE_COLORS["a"]},
            line={"color": "#94a3b8", "dash": "dot"},
            hovertemplate=hover,
        )
    )
    return fig


SESSION_COLORS = ["#0891b2", "#7c3aed", "#16a34a", "#db2777", "#ca8a04", "#64748b"]


def compare_figures(
    result_a: Mapping[str, Any] | None,
    result_b: Mapping[str, Any] | None,
    request_url: RequestUrl,
    *,
    labels: Sequence[str],
) -> dict[str, dict[str, Any]]:
    """The compare page's three charts of one session, keyed by their ``json_script`` ids
    (the owner's page and a shared comparison show the same)."""
    return {
        "chart-context-data": figure_json(
            build_context_compare_figure(result_a, result_b, request_url, labels=labels)
        ),
        "chart-cache-data": figure_json(
            build_cache_compare_figure(result_a, result_b, request_url, labels=labels)
        ),
        "chart-cost-data": figure_json(
            build_cost_compare_figure(result_a, result_b, request_url, labels=labels)
        ),
    }
