"""Fidelity of what a user acts on: prompt tokens, cache reads and cost, and a forecast's.

``evaluation.fidelity`` refits the raw view per thread, which says how well the view is
rebuilt; a user reads the replay's own figures. So, per request with recorded usage and per
session:

* prompt — ``model_tokens`` (the calibrated count the pages show) against the recorded prompt;
* cache reads — the cache model's estimated read against the recorded read, as a share of the
  recorded prompt (per session: total estimated reads against total recorded reads);
* cost — price-free, tokens weighted as Claude prices them relative to plain input (cache read
  0.1, 5-minute write 1.25, 1-hour write 2, output 5): the estimate's split with the recorded
  output against the recorded usage.

``forecast_fidelity`` measures the same on a forecast replay (``usage_until`` below 1) against
a replay that read everything: only the requests whose figures the forecast did not read, its
output estimated too, so it says how far a what-if's estimates stray once they can no longer
lean on the recording.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import TypedDict

from contextlab.engine.measures.tokens import percentile
from contextlab.engine.replay.forecast import ESTIMATED_OUTPUT
from contextlab.engine.replay.result import ReplayResult
from contextlab.engine.results import CacheRow, RecordedUsage, RequestRow

#: Price-free weights relative to plain input (Claude's published multipliers).
WEIGHTS = {"uncached": 1.0, "read": 0.1, "write_5m": 1.25, "write_1h": 2.0, "output": 5.0}


def estimate_of(row: RequestRow) -> CacheRow:
    """The cache model's own split of a request's prompt (the one place that names it):
    ``cache_estimate`` (``cache`` is the recording where a recorded replay has one; a result
    stored before RESULT_VERSION 2 has only ``cache``, then the estimate)."""
    return row.get("cache_estimate") or row["cache"]


def weighted_estimate(row: RequestRow, output: int) -> float:
    """The estimate's price-free cost of ``row`` with ``output`` tokens of output."""
    cache = estimate_of(row)
    write_1h = cache["write"] if row["ttl"] == "1h" else 0
    return (
        cache["uncached"] * WEIGHTS["uncached"]
        + cache["read"] * WEIGHTS["read"]
        + (cache["write"] - write_1h) * WEIGHTS["write_5m"]
        + write_1h * WEIGHTS["write_1h"]
        + output * WEIGHTS["output"]
    )


def weighted_recorded(rec: RecordedUsage) -> float:
    """The recorded usage's price-free cost."""
    write_1h = rec["cache_write_1h"] or 0
    return (
        rec["input"] * WEIGHTS["uncached"]
        + rec["cache_read"] * WEIGHTS["read"]
        + (rec["cache_write"] - write_1h) * WEIGHTS["write_5m"]
        + write_1h * WEIGHTS["write_1h"]
        + rec["output"] * WEIGHTS["output"]
    )


class RequestUsageFidelity(TypedDict):
    """One request's signed errors against its recorded usage."""

    thread: str
    thread_request: int
    #: (model_tokens − recorded prompt) / recorded prompt
    prompt: float
    #: (estimated read − recorded read) / recorded prompt
    read: float
    #: (weighted estimate − weighted recording) / weighted recording
    cost: float


class UsageFidelity(TypedDict):
    """Per request and for the session: what ``usage_fidelity`` measures."""

    requests: list[RequestUsageFidelity]
    #: median and p90 of |prompt error| over the session's requests
    prompt_median: float | None
    prompt_p90: float | None
    #: (Σ estimated read − Σ recorded read) / Σ recorded read
    session_read: float | None
    #: (Σ weighted estimate − Σ weighted recording) / Σ weighted recording
    session_cost: float | None


#: (row, recorded usage, output the estimate is priced with)
Pair = tuple[RequestRow, RecordedUsage, int]


def _measure(pairs: Iterable[Pair]) -> UsageFidelity:
    out: list[RequestUsageFidelity] = []
    read = recorded_read = ours = theirs = 0.0
    for row, rec, output in pairs:
        total = rec["input"] + rec["cache_read"] + rec["cache_write"]
        if total <= 0:
            continue
        estimate = estimate_of(row)
        est = weighted_estimate(row, output)
        actual = weighted_recorded(rec)
        out.append(
            {
                "thread": row["thread"],
                "thread_request": row["thread_request"],
                "prompt": (row["model_tokens"] - total) / total,
                "read": (estimate["read"] - rec["cache_read"]) / total,
                "cost": (est - actual) / actual if actual else 0.0,
            }
        )
        read += estimate["read"]
        recorded_read += rec["cache_read"]
        ours += est
        theirs += actual
    prompts = sorted(abs(r["prompt"]) for r in out)
    return {
        "requests": out,
        "prompt_median": statistics.median(prompts) if prompts else None,
        "prompt_p90": percentile(prompts, 0.9) if prompts else None,
        "session_read": (read - recorded_read) / recorded_read if recorded_read else None,
        "session_cost": (ours - theirs) / theirs if theirs else None,
    }


def _rows(result: ReplayResult) -> Sequence[RequestRow]:
    return [r for tr in result.threads for r in tr.requests]


def usage_fidelity(result: ReplayResult) -> UsageFidelity:
    """Prompt tokens, cache reads and price-free cost of a replay against its recorded usage,
    per request and for the session (every thread, subagents and compaction calls included)."""
    return _measure(
        (r, r["recorded"], r["recorded"]["output"]) for r in _rows(result) if r["recorded"]
    )


def forecast_fidelity(forecast: ReplayResult, full: ReplayResult) -> UsageFidelity:
    """The same figures for the requests a forecast replay did not read (``recorded`` null
    there), against the recorded usage a replay of the whole session read; the forecast's
    own output estimate prices them."""
    recorded = {(r["thread"], r["thread_request"]): r["recorded"] for r in _rows(full)}
    messages = {t.id: t.messages for t in forecast.session.threads}

    def pairs() -> Iterable[Pair]:
        for row in _rows(forecast):
            rec = recorded.get((row["thread"], row["thread_request"]))
            if row["recorded"] is not None or rec is None:
                continue
            message = messages[row["thread"]][row["message"]]
            yield row, rec, int(message.metadata.get(ESTIMATED_OUTPUT, 0))

    return _measure(pairs())
