"""What "best" means when tuning: a goal, and the choice it makes among measured candidates.

A candidate is anything with summed measures (``engine.compare.summary_measures`` added over
sessions): a sweep value, an advice config. Goals:

* ``lowest_cost``: the smallest estimated cost;
* ``most_history``: the largest mean share of the history the model saw;
* ``fewest_compactions``: the fewest compactions;
* ``cost_cap``: the most history kept among those costing at most the cap.

Ties go to the lower cost, then the more history kept, then the fewer compactions, then the
first candidate (a sweep's values in order), so the choice is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from contextlab import engine

T = TypeVar("T")

GOALS: dict[str, str] = {
    "lowest_cost": "lowest cost",
    "most_history": "most history kept",
    "fewest_compactions": "fewest compactions",
    "cost_cap": "most history within a cost cap",
}
#: The largest cost cap a request may give (in USD).
MAX_COST_CAP = 1_000_000.0


def check_goal(goal: str, cost_cap: float | None) -> None:
    """``engine.FieldError`` on ``goal`` or ``cost_cap`` when they do not make a goal."""
    if goal not in GOALS:
        raise engine.FieldError("goal", f"one of {', '.join(GOALS)}; got {str(goal)[:40]!r}")
    if goal == "cost_cap":
        if cost_cap is None:
            raise engine.FieldError("cost_cap", "give the cost cap in USD for this goal")
        if not math.isfinite(cost_cap) or not 0 < cost_cap <= MAX_COST_CAP:
            raise engine.FieldError(
                "cost_cap", f"a number of USD above 0, at most {MAX_COST_CAP:,.0f}"
            )


def _key(summary: Mapping[str, Any]) -> tuple[float, float, float]:
    return (
        float(summary.get("cost_usd") or 0.0),
        -float(summary.get("mean_history_share") or 0.0),
        float(summary.get("compactions") or 0),
    )


def score(goal: str, summary: Mapping[str, Any]) -> tuple[float, ...]:
    """The sort key of a candidate for ``goal`` (smaller is better)."""
    cost, minus_history, compactions = _key(summary)
    if goal == "lowest_cost":
        return (cost, minus_history, compactions)
    if goal == "fewest_compactions":
        return (compactions, cost, minus_history)
    # most_history, and cost_cap among those under the cap
    return (minus_history, cost, compactions)


def best(
    candidates: Sequence[T],
    summary_of: Callable[[T], Mapping[str, Any] | None],
    goal: str,
    cost_cap: float | None = None,
) -> T | None:
    """The best candidate for ``goal``: None when none is measured (or none fits the cap)."""
    measured = [(c, s) for c in candidates if (s := summary_of(c)) is not None]
    if goal == "cost_cap":
        cap = cost_cap if cost_cap is not None else math.inf
        measured = [(c, s) for c, s in measured if float(s.get("cost_usd") or 0.0) <= cap]
    if not measured:
        return None
    ranked = sorted(enumerate(measured), key=lambda item: (score(goal, item[1][1]), item[0]))
    return ranked[0][1][0]
