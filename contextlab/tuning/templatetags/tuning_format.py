"""Formats for comparison and sweep tables: each measure in its own unit."""

from __future__ import annotations

from typing import Any

from django import template

from contextlab.runs.templatetags.humanize_tokens import DASH, percent, tokens, usd

register = template.Library()

_USD = {"cost_usd", "summary_cost_usd"}
_SHARE = {"cache_hit_rate", "mean_history_share"}


@register.filter
def measure(value: Any, key: str) -> str:
    """A measure's value: dollars, a share in percent, or a count."""
    if value is None or value == "":
        return DASH
    if key in _USD:
        return usd(value)
    if key in _SHARE:
        return percent(value)
    if key.endswith("_tokens"):
        return tokens(value)
    try:
        return f"{float(value):,.0f}" if float(value).is_integer() else f"{float(value):,.4g}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def signed_measure(value: Any, key: str) -> str:
    """A difference, with its sign."""
    if value is None or value == "":
        return DASH
    text = measure(abs(value), key)
    if value > 0:
        return "+" + text
    if value < 0:
        return "−" + text
    return text


@register.filter
def relative(value: Any) -> str:
    if value is None:
        return DASH
    return ("+" if value > 0 else "") + percent(value)


@register.filter
def abs_value(value: Any) -> Any:
    try:
        return abs(value)
    except TypeError:
        return value
