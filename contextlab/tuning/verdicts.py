"""What a comparison's differences mean for what the user optimizes.

A difference is "better" or "worse" only against a goal: cost by default, or the share of the
history the model kept, or the peak context. The goal's own measure (and the measures that are
worse whatever the goal, such as blocking-limit hits) get a verdict; every other difference is
said neutrally ("more in B"), and rates differ in percentage points.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: goal → (label, measure, whether lower is better)
GOALS: dict[str, tuple[str, str, bool]] = {
    "cost": ("lowest cost", "cost_usd", True),
    "history": ("most history kept", "mean_history_share", False),
    "peak": ("smallest peak context", "peak_model_tokens", True),
}
DEFAULT_GOAL = "cost"
#: worse whatever the goal: a run that hits the blocking limit would have failed requests
ALWAYS_LOWER_IS_BETTER = frozenset({"blocking_hits"})
#: rates in [0, 1]: differences in percentage points
RATES = frozenset({"cache_hit_rate", "mean_history_share"})


def goal_of(value: str | None) -> str:
    return value if value in GOALS else DEFAULT_GOAL


def _side_better(diff: float, lower_is_better: bool) -> str | None:
    if diff == 0:
        return None
    return "b" if (diff < 0) == lower_is_better else "a"


def read_delta(delta: Mapping[str, Mapping[str, Any]], goal: str) -> dict[str, dict[str, Any]]:
    """``engine.compare.delta`` rows with ``reading`` (what to show), ``verdict`` ("a", "b" or
    None: only for the goal's measure and the always-worse ones) and ``points`` for rates."""
    _, goal_key, goal_lower = GOALS[goal]
    out: dict[str, dict[str, Any]] = {}
    for key, row in delta.items():
        diff = float(row.get("delta") or 0)
        item = dict(row)
        item["is_goal"] = key == goal_key
        item["points"] = round(diff * 100, 2) if key in RATES else None
        if key == goal_key:
            item["verdict"] = _side_better(diff, goal_lower)
        elif key in ALWAYS_LOWER_IS_BETTER:
            item["verdict"] = _side_better(diff, True)
        else:
            item["verdict"] = None
        if diff == 0:
            item["reading"] = "same"
        elif item["verdict"]:
            item["reading"] = f"{item['verdict'].upper()} better"
        else:
            item["reading"] = (
                ("higher in B" if key in RATES else "more in B")
                if diff > 0
                else ("lower in B" if key in RATES else "fewer in B")
            )
        out[key] = item
    return out


def headline(delta: Mapping[str, Mapping[str, Any]], goal: str) -> str:
    """One sentence: B against A on the goal's measure."""
    label, key, lower = GOALS[goal]
    row = delta.get(key) or {}
    a, b = float(row.get("a") or 0), float(row.get("b") or 0)
    if a == b:
        return f"For the {label}, A and B are the same."
    better = _side_better(b - a, lower)
    if key in RATES:
        change = f"{abs(b - a) * 100:.1f} percentage points"
    elif a:
        change = f"{abs(b - a) / a * 100:.1f} %"
    else:
        change = "more than zero"
    if key == "cost_usd":
        what = f"B costs {change} {'less' if b < a else 'more'} than A"
    elif key == "peak_model_tokens":
        what = f"B's peak context is {change} {'smaller' if b < a else 'larger'} than A's"
    else:
        what = f"B keeps {change} {'more' if b > a else 'less'} of the history than A"
    return f"For the {label}, {better.upper() if better else 'neither'} is better: {what}."
