"""The report's tools panel from a run's breakdown (``engine.tool_breakdown``): its rows with
each tool's explorer link, the bar chart (a plain plotly figure, no ``go.Figure`` to build) and
the CSV download. Tool names come from the transcript: the templates escape them, the CSV
quotes formula-like cells, the chart's JSON goes out through ``json_script``."""

from __future__ import annotations

import csv
import io
from typing import Any
from urllib.parse import quote

from django.utils.html import json_script

from contextlab import engine
from contextlab.runs import charts, request_csv, services
from contextlab.runs.templatetags.humanize_tokens import usd

#: tools the chart shows (the most costly); the table lists every one
CHART_TOOLS = 15
CSV_COLUMNS = (
    "tool",
    "calls",
    "errors",
    "history_tokens",
    "seen_tokens_last_request",
    "sent_tokens_all_requests",
    "cost_usd_estimate",
    "requests_calling_it",
)


def tool_rows(
    breakdown: engine.ToolBreakdown, request_url: charts.RequestUrl | None, count: int
) -> list[dict[str, Any]]:
    """The table's rows: the breakdown's, each with the explorer filtered to it, opened at
    the request after its first call (the first whose prompt holds the call and its result;
    ``count``: the run's requests); no link without ``request_url`` (the HTML export)."""
    rows = []
    for tool in breakdown["tools"]:
        first = min(tool["requests"][0] + 1, count - 1) if tool["requests"] else 0
        rows.append(
            {
                **tool,
                "request_count": len(tool["requests"]),
                "explorer_url": (
                    filter_url(request_url(first), tool["tool"]) if request_url else ""
                ),
            }
        )
    return rows


def tools_card(
    breakdown: engine.ToolBreakdown, request_url: charts.RequestUrl | None, count: int
) -> dict[str, Any]:
    """What ``runs/_tools.html`` reads: the breakdown, its rows (``tool_rows``) and its
    chart's data, which goes out as JSON in a script element (escaped there), never inline."""
    return {
        "tools": breakdown,
        "tool_rows": tool_rows(breakdown, request_url, count),
        "tools_script": json_script(tools_figure(breakdown), "chart-tools-data"),
    }


def snapshot_tools(snapshot: dict[str, Any]) -> engine.ToolBreakdown:
    """The tools breakdown of a share's snapshot: as it holds it (redacted with the rest),
    else worked out from its result and messages (their token counts stay in every share
    mode)."""
    data = snapshot["result"]
    stored = services.stored_tool_breakdown(data)
    if stored is not None:
        return stored
    return engine.tool_breakdown(data, snapshot["messages"])


def filter_url(url: str, tool: str) -> str:
    """``url`` (a request page) with the explorer's tool filter on ``tool``."""
    return url + ("&" if "?" in url else "?") + "tool=" + quote(tool, safe="")


def tools_figure(breakdown: engine.ToolBreakdown) -> dict[str, Any]:
    """Horizontal bars per tool: tokens in the history, and sent over every request."""
    tools = breakdown["tools"][:CHART_TOOLS][::-1]  # plotly draws the first bar at the bottom
    names = [t["tool"] for t in tools]
    layout = charts.styled_layout("Tokens by tool", "tokens", "", max(260, 60 + 44 * len(tools)))
    layout["hovermode"] = "y unified"
    layout["barmode"] = "group"
    layout["yaxis"] = {**layout["yaxis"], "automargin": True, "type": "category"}
    # the title says "tokens": no axis title for the legend below to run into
    layout["xaxis"] = {**layout["xaxis"], "title": {"text": ""}}
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "name": "sent over all requests",
                "y": names,
                "x": [t["sent_tokens"] for t in tools],
                # the one cost format (the table's ``usd``); as text, not customdata, which
                # the pages' click handler opens as a link; never drawn on the bars
                "text": [f"{usd(t['cost_usd'])} (estimate)" for t in tools],
                "textposition": "none",
                "hovertemplate": "%{x:,} tokens sent, cost share %{text}<extra></extra>",
            },
            {
                "type": "bar",
                "orientation": "h",
                "name": "in the full history",
                "y": names,
                "x": [t["history_tokens"] for t in tools],
                "hovertemplate": "%{x:,} tokens in the history<extra></extra>",
            },
        ],
        "layout": layout,
    }


def tools_csv(breakdown: engine.ToolBreakdown) -> str:
    """The breakdown as CSV text, one line per tool (request numbers from 1)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for t in breakdown["tools"]:
        writer.writerow(
            request_csv.safe_cell(v)
            for v in (
                t["tool"],
                t["calls"],
                t["errors"],
                t["history_tokens"],
                t["seen_tokens"],
                t["sent_tokens"],
                t["cost_usd"],
                " ".join(str(i + 1) for i in t["requests"]),
            )
        )
    return out.getvalue()
