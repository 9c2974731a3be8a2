"""The advice page's Pareto chart: estimated cost against the share of the history kept, one
point per candidate, the ones no other beats on both joined as the front, the recommendation
ringed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from contextlab.runs.charts import styled_layout


def pareto_figure(candidates: Sequence[dict[str, Any]], chosen: str | None) -> go.Figure:
    layout = styled_layout(
        "Estimated cost against history kept (lower right is better)",
        "mean share of the history the model saw",
        "estimated cost of the sessions ($)",
        380,
    )
    layout["hovermode"] = "closest"
    layout["xaxis"].update({"tickformat": ".0%"})
    layout["yaxis"].update({"tickprefix": "$"})
    fig = go.Figure(layout=layout)
    hover = "%{text}<br>history kept %{x:.1%}<br>cost $%{y:.4f}<extra></extra>"
    fig.add_trace(
        go.Scatter(
            x=[c["mean_history_share"] for c in candidates],
            y=[c["cost_usd"] for c in candidates],
            text=[c["label"] for c in candidates],
            mode="markers",
            name="candidates",
            marker={"size": 9, "color": "#94a3b8"},
            hovertemplate=hover,
        )
    )
    front = sorted((c for c in candidates if c.get("pareto")), key=lambda c: c["cost_usd"])
    fig.add_trace(
        go.Scatter(
            x=[c["mean_history_share"] for c in front],
            y=[c["cost_usd"] for c in front],
            text=[c["label"] for c in front],
            mode="lines+markers",
            name="Pareto front",
            marker={"size": 10, "color": "#2563eb"},
            line={"color": "#2563eb", "dash": "dot"},
            hovertemplate=hover,
        )
    )
    picked = [c for c in candidates if c["candidate"] == chosen]
    if picked:
        fig.add_trace(
            go.Scatter(
                x=[picked[0]["mean_history_share"]],
                y=[picked[0]["cost_usd"]],
                text=[picked[0]["label"]],
                mode="markers+text",
                textposition="top center",
                cliponaxis=False,
                name="recommended",
                marker={
                    "size": 18,
                    "color": "rgba(0,0,0,0)",
                    "line": {"color": "#ea580c", "width": 3},
                },
                hovertemplate=hover,
            )
        )
    return fig
