"""A what-if run read as differences from the recorded replay of the same session."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from contextlab.engine import compare
from contextlab.runs.templatetags.humanize_tokens import percent, tokens, usd


def _signed_percent(new: float, old: float) -> str:
    if not old:
        return "—" if not new else "new"
    change = (new - old) / old
    if abs(change) < 0.0005:
        return "no change"
    return f"{'+' if change > 0 else '−'}{abs(change) * 100:.1f} %"


def _signed_count(new: float, old: float) -> str:
    change = int(new) - int(old)
    return "no change" if change == 0 else f"{'+' if change > 0 else '−'}{abs(change)}"


def _points(new: float, old: float) -> str:
    change = (new - old) * 100
    if abs(change) < 0.05:
        return "no change"
    return f"{'+' if change > 0 else '−'}{abs(change):.1f} pp"


Row = tuple[str, str, Callable[[Any], str], Callable[[float, float], str], str]

#: (summary key, label, how a value reads, how a difference reads, what it means)
ROWS: list[Row] = [
    ("cost_usd", "cost", usd, _signed_percent, "estimated at list prices"),
    (
        "cache_hit_rate",
        "cache hit rate",
        percent,
        _points,
        "share of prompt tokens read from the cache; percentage points",
    ),
    ("compactions", "compactions", str, _signed_count, "summaries that replaced the history"),
    ("microcompactions", "microcompactions", str, _signed_count, "clearings of old tool results"),
    ("peak_model_tokens", "peak context", tokens, _signed_percent, "largest prompt the model saw"),
    ("requests_above_warning", "requests above the warning level", str, _signed_count, ""),
    (
        "blocking_hits",
        "blocking-limit hits",
        str,
        _signed_count,
        "requests Claude Code would have refused",
    ),
]


def whatif_differences(
    whatif: Mapping[str, Any], recorded: Mapping[str, Any]
) -> list[dict[str, str]]:
    """One line per figure: the recorded replay's value, the what-if's, and the difference
    (neutral: a what-if changes the context on purpose, so nothing here is an error)."""
    out = []
    anchored = "estimate" in whatif and "estimate" in recorded
    for key, label, show, diff, note in ROWS:
        if key not in whatif and key not in recorded:
            continue
        if anchored and key == "cost_usd":
            out.append(_cost_row(whatif, recorded))
            continue
        a, b = whatif, recorded
        if anchored and key == "cache_hit_rate":
            # the cache model on both sides: a recording against an estimate is no difference
            a, b = whatif["estimate"], recorded["estimate"]
            note = "estimated on both sides; " + note
        new = float(a.get(key) or 0)
        old = float(b.get(key) or 0)
        out.append(
            {
                "key": key,
                "label": label,
                "recorded": show(b.get(key) or 0),
                "whatif": show(a.get(key) or 0),
                "difference": diff(new, old),
                "direction": "same" if new == old else ("up" if new > old else "down"),
                "note": note,
            }
        )
    return out


def _cost_row(whatif: Mapping[str, Any], recorded: Mapping[str, Any]) -> dict[str, str]:
    """The cost line: what was paid, and the what-if's cost anchored on it (with its band)."""
    cost = compare.whatif_cost(whatif, recorded)
    new, old = cost["cost_usd"], cost["recorded_cost_usd"]
    band = f" ± {usd(cost['band_usd'])}" if cost["band_usd"] is not None else ""
    return {
        "key": "cost_usd",
        "label": "cost",
        "recorded": usd(old),
        "whatif": usd(new) + band,
        "difference": _signed_percent(new, old),
        "direction": "same" if new == old else ("up" if new > old else "down"),
        "note": "recorded cost + (what-if estimate − recorded replay's estimate)",
    }


def whatif_cost(whatif: Mapping[str, Any], recorded: Mapping[str, Any]) -> dict[str, Any] | None:
    """The what-if's headline cost (``compare.whatif_cost``) and its band rule, None for a
    result stored before the replay kept its estimate apart."""
    if "estimate" not in whatif or "estimate" not in recorded:
        return None
    cost = compare.whatif_cost(whatif, recorded)
    change = cost["change_usd"]
    return {
        **cost,
        # where the cache model strayed from the recording: what a what-if leans on
        "baseline_disagreements": recorded.get("cache_disagreements"),
        "baseline_requests": recorded.get("recorded_cache_requests"),
        "rule": compare.WHATIF_BAND_RULE,
        "change_sign": "−" if change < 0 else "+",
        "change_abs": abs(change),
    }
