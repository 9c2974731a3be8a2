"""Plotly figures of a replay result (pure functions of the engine's result JSON).

Every point carries its request in ``customdata`` (the URL, or the position the chart's
``data-request-url`` pattern turns into one) so a click can open it (static/js/app.js). Long sessions are downsampled, always keeping compaction points.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import plotly.graph_objects as go
from django.conf import settings

from contextlab.engine import RecordedUsage, RequestRow, ResultJson, result_fidelity

RequestUrl = Callable[[int], str]


def _point_data(positions: Sequence[int], request_url: RequestUrl | None) -> list[Any]:
    """Each point's click target: its request's URL, or without ``request_url`` its position
    (the page's chart carries the URL pattern, ``data-request-url``: a much smaller page)."""
    if request_url is None:
        return list(positions)
    return [request_url(i) for i in positions]


COLORS = {
    "repl": "#9aa5b1",
    "model": "#2563eb",
    "recorded": "#111827",
    "baseline": "#a855f7",
    "warning": "#d97706",
    "autocompact": "#dc2626",
    "blocking": "#7f1d1d",
    "read": "#16a34a",
    "write": "#f59e0b",
    "uncached": "#64748b",
}
#: recorded cache figures marked on the estimate's bars: the bars' hues, dark enough to show
#: on a bar of either colour
RECORDED_MARK_COLORS = {"read": "#14532d", "write": "#9a3412"}


#: The look of plotly's "plotly_white" template, set directly: a named template makes plotly
#: validate and ship its whole 7 KB definition with every figure (most of a figure's build time).
AXIS_STYLE: dict[str, Any] = {
    "gridcolor": "#ebf0f8",
    "zerolinecolor": "#ebf0f8",
    "linecolor": "#ebf0f8",
    "automargin": True,
}
PAGE_STYLE: dict[str, Any] = {
    "template": "none",
    "paper_bgcolor": "#ffffff",
    "plot_bgcolor": "#ffffff",
    "font": {"color": "#2a3f5f"},
}


def styled_layout(title: str, xaxis: str, yaxis: str, height: int) -> dict[str, Any]:
    """A chart layout in the pages' style: title left, legend below, axes from zero."""
    return {
        "title": {"text": title, "x": 0, "font": {"size": 15}},
        "xaxis": {"title": {"text": xaxis}, "rangemode": "tozero", **AXIS_STYLE},
        "yaxis": {"title": {"text": yaxis}, "rangemode": "tozero", **AXIS_STYLE},
        "hovermode": "x unified",
        # at the foot of the figure, not at a fraction of the plot's height below it: on a
        # narrow screen the legend wraps to more rows and a fraction under a shrunken plot
        # runs into the axis title (or past the figure's bottom, cut off)
        "legend": {"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0, "x": 0},
        "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
        "height": height,
        **PAGE_STYLE,
    }


#: up to this many requests, the request axis has one tick per request
EVERY_REQUEST_TICKED = 12


def number_requests_from_one(fig: go.Figure) -> go.Figure:
    """Put a request chart on the pages' numbering: request 1 is the first. Traces are built on
    0-based indices (the URLs' and the result's); only the plotted x moves, a click still opens
    the URL in ``customdata``. Whole numbers only on the axis (no "request 2.5")."""
    top: float = 0
    for trace in fig.data:
        xs = getattr(trace, "x", None)
        if xs is None:
            continue
        trace.x = [x + 1 if isinstance(x, int | float) else x for x in xs]
        top = max([top, *(x for x in trace.x if isinstance(x, int | float))])
    fig.update_xaxes(
        tickformat=",d",
        rangemode="normal",
        **({"dtick": 1} if top <= EVERY_REQUEST_TICKED else {}),
    )
    return fig


def _layout(title: str, yaxis: str) -> dict[str, Any]:
    return styled_layout(title, "request", yaxis, 360)


def has_event(req: RequestRow, step: str) -> bool:
    return any(e["step"] == step for e in req["events"])


def recorded_prompt(req: RequestRow) -> int | None:
    """Total prompt tokens the API reported (input + cache read + cache write), or None."""
    rec: RecordedUsage | None = req.get("recorded")
    if not rec:
        return None
    return rec["input"] + rec["cache_read"] + rec["cache_write"]


def sample_positions(
    count: int, keep: Sequence[int] = (), max_points: int | None = None
) -> list[int]:
    """Positions 0..count-1 thinned to about ``max_points``, always keeping ``keep`` and the ends."""
    limit = max_points or settings.CHART_MAX_POINTS
    if count <= limit:
        return list(range(count))
    stride = count / limit
    chosen = {min(count - 1, int(i * stride)) for i in range(limit)}
    chosen.update(p for p in keep if 0 <= p < count)
    chosen.update({0, count - 1})
    return sorted(chosen)


#: Above this many points a chart draws lines and areas instead of one marker or bar per
#: request: thousands of SVG shapes take seconds to draw and are under a pixel wide anyway.
MARKER_LIMIT = 300


def _positions(requests: list[RequestRow]) -> list[int]:
    keep = [
        i
        for i, r in enumerate(requests)
        if has_event(r, "autocompact") or has_event(r, "microcompact")
    ]
    return sample_positions(len(requests), keep)


def threshold_trace(
    xs: Sequence[int],
    rows: Sequence[RequestRow],
    level: Literal["effective", "autocompact", "warning", "blocking"],
    *,
    name: str,
    line: dict[str, Any],
    **extra: Any,
) -> go.Scatter | None:
    """One threshold level per request as a step line; None when no request has that level."""
    ys = [r["thresholds"].get(level) for r in rows]
    if all(y is None for y in ys):
        return None
    return go.Scatter(
        x=list(xs),
        y=ys,
        name=name,
        mode="lines",
        hoverinfo="skip",
        line={"width": 1, "shape": "hv", **line},
        **extra,
    )


def build_context_figure(
    result: ResultJson,
    request_url: RequestUrl | None = None,
    *,
    baseline: ResultJson | None = None,
) -> go.Figure:
    """Context size per request: full history, model view, recorded, thresholds, compactions;
    with ``baseline`` (a what-if's recorded replay) that replay's model view as well."""
    requests = result["requests"]
    pos = _positions(requests)
    rows = [requests[i] for i in pos]
    urls = _point_data(pos, request_url)
    fig = go.Figure(layout=_layout("Context size per request", "tokens"))
    base_rows = baseline["requests"] if baseline else []
    if base_rows:
        shared = [p for p in pos if p < len(base_rows)]
        fig.add_trace(
            go.Scatter(
                x=shared,
                y=[base_rows[p].get("model_tokens") for p in shared],
                name="recorded replay: model view",
                mode="lines",
                line={"color": COLORS["baseline"], "width": 1.5, "dash": "dot"},
                hoverinfo="skip",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=pos,
            y=[r.get("repl_tokens") for r in rows],
            name="full history",
            mode="lines",
            line={"color": COLORS["repl"], "dash": "dot"},
            customdata=urls,
        )
    )
    fig.add_trace(
        go.Scatter(
            x=pos,
            y=[r.get("model_tokens") for r in rows],
            name="model view",
            mode="lines+markers" if len(pos) <= MARKER_LIMIT else "lines",
            marker={"size": 4},
            line={"color": COLORS["model"]},
            customdata=urls,
        )
    )
    recorded = [(p, recorded_prompt(r), u) for p, r, u in zip(pos, rows, urls, strict=True)]
    recorded = [t for t in recorded if t[1] is not None]
    if recorded:
        fig.add_trace(
            go.Scatter(
                x=[t[0] for t in recorded],
                y=[t[1] for t in recorded],
                name="recorded input",
                mode="markers" if len(recorded) <= MARKER_LIMIT else "lines",
                marker={"size": 5, "symbol": "x", "color": COLORS["recorded"]},
                line={"width": 1, "color": COLORS["recorded"]},
                customdata=[t[2] for t in recorded],
            )
        )
    for level in ("warning", "autocompact", "blocking"):
        trace = threshold_trace(
            pos, rows, level, name=f"{level} level", line={"color": COLORS[level], "dash": "dash"}
        )
        if trace is not None:
            fig.add_trace(trace)
    for step, symbol, label in (
        ("autocompact", "diamond", "compaction"),
        ("microcompact", "triangle-down", "microcompaction"),
    ):
        marks = [(p, r, u) for p, r, u in zip(pos, rows, urls, strict=True) if has_event(r, step)]
        if marks:
            fig.add_trace(
                go.Scatter(
                    x=[m[0] for m in marks],
                    y=[m[1].get("model_tokens") for m in marks],
                    name=label,
                    mode="markers",
                    customdata=[m[2] for m in marks],
                    marker={
                        "size": 12 if step == "autocompact" else 9,
                        "symbol": symbol,
                        "color": COLORS["autocompact"]
                        if step == "autocompact"
                        else COLORS["warning"],
                        "line": {"width": 1, "color": "#fff"},
                    },
                )
            )
    return number_requests_from_one(fig)


def build_cache_figure(result: ResultJson, request_url: RequestUrl | None = None) -> go.Figure:
    """Estimated cache read / write / uncached tokens per request, with the recorded values."""
    requests = result["requests"]
    pos = _positions(requests)
    rows = [requests[i] for i in pos]
    urls = _point_data(pos, request_url)
    bars = len(pos) <= MARKER_LIMIT
    layout = _layout("Prompt cache per request", "tokens")
    # which shape is the estimate on a line of its own: in the title it ran past a phone's
    # screen (a plotly title does not wrap)
    layout["title"]["subtitle"] = {
        "text": "bars: estimated, markers: recorded"
        if bars
        else "areas: estimated, lines: recorded",
        "font": {"size": 12},
    }
    layout["margin"] = {**layout["margin"], "t": 64}
    layout["barmode"] = "stack"
    fig = go.Figure(layout=layout)
    for key, label in (("read", "cache read"), ("write", "cache write"), ("uncached", "uncached")):
        # the estimate (``cache`` of a recorded replay is the recording, drawn as markers)
        ys = [(r.get("cache_estimate") or r["cache"]).get(key, 0) for r in rows]
        name = f"{label} (est.)"
        if bars:
            fig.add_trace(
                go.Bar(x=pos, y=ys, name=name, marker={"color": COLORS[key]}, customdata=urls)
            )
        else:
            fig.add_trace(
                go.Scatter(
                    x=pos,
                    y=ys,
                    name=name,
                    mode="lines",
                    stackgroup="estimate",
                    line={"width": 0.5, "color": COLORS[key]},
                    customdata=urls,
                )
            )
    with_rec = [
        (p, rec, u) for p, r, u in zip(pos, rows, urls, strict=True) if (rec := r.get("recorded"))
    ]
    if with_rec:
        for key, rec_key, label in (
            ("read", "cache_read", "cache read"),
            ("write", "cache_write", "cache write"),
        ):
            fig.add_trace(
                go.Scatter(
                    x=[t[0] for t in with_rec],
                    y=[t[1].get(rec_key, 0) for t in with_rec],
                    name=f"{label} (recorded)",
                    mode="markers" if bars else "lines",
                    customdata=[t[2] for t in with_rec],
                    # a darker shade of the bar's colour: in the bar's own colour the mark
                    # vanished into the bar it sits on
                    marker={
                        "symbol": "line-ew-open",
                        # about a bar's width: wider, the marks of many bars merge into a band
                        "size": max(6, min(18, 600 // len(pos))),
                        "color": RECORDED_MARK_COLORS[key],
                        "line": {"width": 3, "color": RECORDED_MARK_COLORS[key]},
                    },
                    line={"width": 1, "dash": "dot", "color": "#111827"},
                )
            )
    return number_requests_from_one(fig)


def build_cost_figure(result: ResultJson, request_url: RequestUrl | None = None) -> go.Figure:
    """Cumulative cost in USD: the replay's estimate and, where known, the recorded usage's."""
    requests = result["requests"]
    est: list[float] = []
    rec: list[float | None] = []
    total_est = 0.0
    total_rec = 0.0
    any_rec = False
    for r in requests:
        total_est += float(r.get("cost_estimate_usd", r["cost_usd"]))
        est.append(round(total_est, 6))
        recorded_cost = r.get("recorded_cost_usd")
        if recorded_cost is not None:
            any_rec = True
            total_rec += float(recorded_cost)
        rec.append(round(total_rec, 6))
    pos = _positions(requests)
    urls = _point_data(pos, request_url)
    fig = go.Figure(layout=_layout("Cumulative cost", "USD"))
    fig.add_trace(
        go.Scatter(
            x=pos,
            y=[est[i] for i in pos],
            name="replay estimate",
            mode="lines",
            line={"color": COLORS["model"]},
            customdata=urls,
        )
    )
    if any_rec:
        fig.add_trace(
            go.Scatter(
                x=pos,
                y=[rec[i] for i in pos],
                name="recorded usage",
                mode="lines",
                line={"color": COLORS["recorded"], "dash": "dot"},
                customdata=urls,
            )
        )
    return number_requests_from_one(fig)


def fidelity(result: ResultJson) -> dict[str, Any]:
    """The report's fidelity figures: the engine's (``contextlab fidelity``'s) for this result.

    Each thread's recorded prompt totals are refitted on its raw token counts and the
    relative errors pooled (``engine.evaluation.result_fidelity``), so the report and the CLI
    give the same numbers for the same session; ``calibration`` is the main thread's fit that
    the replay's display counts used.
    """
    fid = result_fidelity(result)
    return {
        "requests": fid["requests"],
        "median_rel_error": fid["median_rel_error"],
        "p90_rel_error": fid["p90_rel_error"],
        "max_rel_error": fid["max_rel_error"],
        "threads": fid["threads"],
        "calibration": result["session"]["calibration"] or {},
    }


def fidelity_points(result: ResultJson) -> list[tuple[int, float]]:
    """(position in ``requests``, signed relative error) of each main-conversation request."""
    position = {(r["thread"], r["thread_request"]): i for i, r in enumerate(result["requests"])}
    points = [
        (position[(p["thread"], p["thread_request"])], p["rel_error"])
        for p in result_fidelity(result)["points"]
        if (p["thread"], p["thread_request"]) in position
    ]
    return sorted(points)


def build_fidelity_figure(result: ResultJson, request_url: RequestUrl | None = None) -> go.Figure:
    """Relative error of the fitted count against the recorded prompt total, per request."""
    points = fidelity_points(result)
    keep = sample_positions(len(points))
    points = [points[i] for i in keep]
    fig = go.Figure(
        layout=_layout("Replay vs recorded: relative error per request", "relative error")
    )
    # two decimals at most, trailing zeros dropped: a 0.3 % error is not "0%"
    fig.update_yaxes(tickformat=".2~%", rangemode="normal", zeroline=True)
    fig.add_trace(
        go.Scatter(
            x=[p[0] for p in points],
            y=[p[1] for p in points],
            name="(fitted count − recorded) / recorded",
            mode="markers",
            marker={"size": 5, "color": COLORS["model"]},
            customdata=_point_data([p[0] for p in points], request_url),
        )
    )
    return number_requests_from_one(fig)


def figure_json(fig: go.Figure) -> dict[str, Any]:
    """What the page hands to Plotly.newPlot (through json_script: no inline script, CSP-safe)."""
    data: dict[str, Any] = fig.to_dict()
    return {"data": data["data"], "layout": data["layout"]}


#: the explorer's mini context chart: SVG user units (the SVG scales to its box)
MINI_WIDTH = 1000
MINI_HEIGHT = 60
MINI_POINTS = 400


def mini_chart(requests: Sequence[RequestRow], current: int) -> dict[str, Any]:
    """A small context chart as SVG polylines (no plotly on the explorer): the model view, the
    full history and the autocompact level per request, and the current request's x."""
    count = len(requests)
    pos = sample_positions(count, [current], max_points=MINI_POINTS)
    top = max(
        (max(r["repl_tokens"], r["model_tokens"]) for r in requests),
        default=0,
    )
    levels = [r["thresholds"]["autocompact"] for r in requests]
    top = max(top, max(levels, default=0), 1)

    def x(i: int) -> float:
        return round(i / max(1, count - 1) * MINI_WIDTH, 1)

    def y(tokens: int) -> float:
        return round(MINI_HEIGHT - tokens / top * (MINI_HEIGHT - 4), 1)

    def line(key: str) -> str:
        rows: list[dict[str, Any]] = [dict(requests[i]) for i in pos]
        return " ".join(f"{x(i)},{y(int(r.get(key) or 0))}" for i, r in zip(pos, rows, strict=True))

    return {
        "width": MINI_WIDTH,
        "height": MINI_HEIGHT,
        "model": line("model_tokens"),
        "repl": line("repl_tokens"),
        "level": " ".join(f"{x(i)},{y(levels[i])}" for i in pos if levels[i]),
        "current_x": x(current),
        "current_y": y(requests[current]["model_tokens"]) if count else 0,
        "peak": top,
    }


def mark_request(
    mini: dict[str, Any], current: int, requests: Sequence[RequestRow]
) -> dict[str, Any]:
    """``mini_chart``'s lines (shared by a run's pages) with the current request marked."""
    count = len(requests)
    top = max(1, int(mini.get("peak") or 1))
    tokens = requests[current]["model_tokens"] if count else 0
    return {
        **mini,
        "current_x": round(current / max(1, count - 1) * MINI_WIDTH, 1),
        "current_y": round(MINI_HEIGHT - tokens / top * (MINI_HEIGHT - 4), 1),
    }
