"""Names a person can tell runs apart by: what each what-if run changed ("autocompact 70 %")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: short names of the settings people change most; any other setting is named by its key
SHORT_NAMES = {
    "autocompact_pct_override": ("autocompact", " %"),
    "autocompact_enabled": ("autocompact", ""),
    "autocompact_buffer_tokens": ("autocompact buffer", " tokens"),
    "context_window": ("window", " tokens"),
    "auto_compact_window": ("autocompact window", " tokens"),
    "time_based_mc_enabled": ("time-based microcompact", ""),
    "time_based_mc_gap_threshold_minutes": ("microcompact after", " min"),
    "time_based_mc_keep_recent": ("microcompact keeps", " results"),
    "cached_mc_enabled": ("cached microcompact", ""),
    "snip_enabled": ("snip", ""),
    "collapse_enabled": ("context collapse", ""),
    "per_message_budget_chars": ("tool-result budget", " chars"),
    "api_clear_tool_uses_enabled": ("API clearing", ""),
}


def _value(value: Any, unit: str) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and unit.strip() in ("tokens", "chars"):
        return f"{value:,}{unit}"
    if isinstance(value, (dict, list)):
        return "custom"
    return f"{value}{unit}"


def describe_overrides(overrides: Mapping[str, Any]) -> str:
    """ "autocompact 70 %, snip on" for ``{"autocompact_pct_override": 70, "snip_enabled": true}``."""
    parts = []
    for key in sorted(overrides, key=lambda k: (k not in SHORT_NAMES, k)):
        name, unit = SHORT_NAMES.get(key, (key.replace("_", " "), ""))
        parts.append(f"{name} {_value(overrides[key], unit)}")
    return ", ".join(parts)


def run_label(mode: str, preset: str, overrides: Mapping[str, Any]) -> str:
    """A run's name in lists and headings: "recorded", "what-if · autocompact 70 %"."""
    if mode == "recorded":
        return "recorded"
    changed = describe_overrides(overrides or {})
    preset = preset or "auto"
    if changed:
        return f"what-if · {changed}" + ("" if preset == "auto" else f" ({preset})")
    return f"what-if · {preset}"
