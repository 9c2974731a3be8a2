"""Number and date formats for reports: token counts, dollars, percentages, snapshot dates.
Missing values show "—"."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template

register = template.Library()

DASH = "—"
#: the least amount ``usd`` writes in figures (four decimal places)
SMALLEST_USD = 0.0001


def _number(value: Any) -> float | None:
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


@register.filter
def tokens(value: Any) -> str:
    number = _number(value)
    if number is None:
        return DASH
    if abs(number) >= 1_000_000:
        return f"{number / 1_000_000:.2f}M"
    if abs(number) >= 10_000:
        return f"{number / 1000:.1f}k"
    return f"{number:,.0f}"


@register.filter
def usd(value: Any) -> str:
    number = _number(value)
    if number is None:
        return DASH
    if number and abs(number) < SMALLEST_USD / 2:
        # four places would print "$0.0000" beside a real "$0.00": say it is under a cent's
        # hundredth instead
        return f"{'−' if number < 0 else ''}<${SMALLEST_USD}"
    if abs(number) < 0.01 and number:
        return f"${number:.4f}"
    return f"${number:,.2f}"


@register.filter
def signed_usd(value: Any) -> str:
    """``usd`` with a minus sign before the dollar ("−$0.0092", not "$-0.0092")."""
    number = _number(value)
    if number is None or number >= 0:
        return usd(value)
    return f"−{usd(-number)}"


@register.filter
def percent(value: Any) -> str:
    number = _number(value)
    if number is None:
        return DASH
    return f"{number * 100:.1f}%"


@register.filter
def recorded_summary(runs: Any) -> dict[str, Any]:
    """The totals of a session's newest finished recorded replay (``{}`` when there is none);
    ``runs`` is the session's prefetched runs, newest first."""
    for run in runs:
        if run.mode == "recorded" and run.status == "done":
            return dict(run.summary or {})
    return {}


@register.filter
def main_run(runs: Any) -> Any:
    """The run a session's "latest run" means: its newest recorded replay, else its newest run
    (what-if runs are the user's own picks, shown on the report)."""
    items = list(runs)
    return next((r for r in items if r.mode == "recorded"), items[0] if items else None)


@register.filter
def whatif_count(runs: Any) -> int:
    return sum(1 for r in runs if r.mode == "whatif")


@register.filter
def session_facts(run: Any) -> dict[str, Any]:
    """``runs.facts.session_facts`` (cached per finished run)."""
    from contextlab.runs.facts import session_facts as facts  # models are loaded by now

    return facts(run)


#: a transcript block's type in words (the API's names, e.g. ``tool_use``, stay in the API)
BLOCK_KINDS = {
    "text": "text",
    "thinking": "thinking",
    "redacted_thinking": "hidden thinking",
    "tool_use": "tool call",
    "tool_result": "tool result",
    "server_tool_use": "server tool call",
    "web_search_tool_result": "web search result",
    "web_fetch_tool_result": "web page fetched",
    "code_execution_tool_result": "code run result",
    "mcp_tool_use": "MCP tool call",
    "mcp_tool_result": "MCP tool result",
    "image": "image",
    "document": "document",
    "summary": "summary",
}


@register.filter
def block_kind(value: Any) -> str:
    """A block type in words: ``tool_use`` → "tool call"; an unknown one without underscores."""
    name = str(value or "")
    return BLOCK_KINDS.get(name) or name.replace("_", " ")


@register.filter
def iso_datetime(value: Any) -> datetime | None:
    """An ISO 8601 date as a snapshot holds it (``sharing.services.snapshot_source``), as a
    datetime for ``date`` (None for a missing or unreadable one): a human-facing page or export
    writes it as the pages do, never as the raw ISO text."""
    if isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None
