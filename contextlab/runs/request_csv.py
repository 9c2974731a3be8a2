"""A run's request rows as CSV: one line per request, the figures the explorer shows.

``request`` is the number the pages show (from 1), ``index`` the 0-based index of the API and
the page addresses. Cells a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@`` at the
start of a text cell) are quoted with a leading apostrophe: thread names and event texts come
from a transcript, which is untrusted.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from contextlab import engine
from contextlab.engine import RequestRow

COLUMNS = (
    "request",
    "index",
    "thread",
    "timestamp",
    "model",
    "model_tokens",
    "claude_code_count",
    "recorded_prompt_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "uncached_tokens",
    "cost_usd",
    "recorded_cost_usd",
    "events",
)
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return "" if value is None else value


def request_csv(requests: Sequence[RequestRow]) -> str:
    """The rows as CSV text, with a header line."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    for r in requests:
        cache = r["cache"]
        writer.writerow(
            safe_cell(v)
            for v in (
                r["index"] + 1,
                r["index"],
                r["thread"],
                r["timestamp"],
                r["model"],
                r["model_tokens"],
                r["decision_tokens"],
                r["recorded_total"],
                cache["read"],
                cache["write"],
                cache["uncached"],
                round(r["cost_usd"], 6),
                None if r["recorded_cost_usd"] is None else round(r["recorded_cost_usd"], 6),
                "; ".join(engine.describe_event(e) for e in r["events"]),
            )
        )
    return out.getvalue()
