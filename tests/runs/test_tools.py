"""The tools card's one cost format: the table, the chart's hover and the shared copies all
write a cost as the ``usd`` filter does; the CSV keeps the raw numbers."""

from __future__ import annotations

import csv
import io
import re

from django.template.loader import render_to_string

from contextlab import engine
from contextlab.runs import tools
from contextlab.runs.templatetags.humanize_tokens import usd

#: a zero, a cost under a cent, a few dollars: the three shapes ``usd`` writes
COSTS = (0.0, 0.0042, 12.5)


def _breakdown():
    rows = [
        {
            "tool": name,
            "calls": 2,
            "errors": 0,
            "history_tokens": 1000,
            "seen_tokens": 500,
            "sent_tokens": 4000,
            "cost_usd": cost,
            "requests": [0, 1],
        }
        for name, cost in zip(("Read", "Grep", "Bash"), COSTS, strict=True)
    ]
    return {
        "version": engine.BREAKDOWN_VERSION,
        "tools": rows,
        "cost_usd": 12.5042,
        "attribution": "estimate",
    }


def test_the_chart_and_the_table_write_a_cost_alike():
    breakdown = _breakdown()
    card = tools.tools_card(breakdown, lambda i: f"/r/{i}/", 3)
    html = render_to_string("runs/_tools.html", {**card, "shared": True})
    table = re.findall(
        r'data-label="Cost share \(estimate\)" class="num" data-value="[^"]*">([^<]*)<', html
    )
    assert table == ["$0.00", "$0.0042", "$12.50"]
    sent = tools.tools_figure(breakdown)["data"][0]
    # plotly draws the first bar at the bottom: the figure lists the tools in reverse
    assert sent["text"] == [f"{shown} (estimate)" for shown in reversed(table)]
    assert sent["text"] == [f"{usd(c)} (estimate)" for c in reversed(COSTS)]
    assert "%{text}" in sent["hovertemplate"]
    # the pages open a point's string customdata as a link: a cost must never be one
    assert "customdata" not in sent
    assert sent["textposition"] == "none"


def test_the_csv_keeps_the_raw_cost():
    rows = list(csv.DictReader(io.StringIO(tools.tools_csv(_breakdown()))))
    assert [float(r["cost_usd_estimate"]) for r in rows] == list(COSTS)
    assert [r["cost_usd_estimate"] for r in rows] == ["0.0", "0.0042", "12.5"]
