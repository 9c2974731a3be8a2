"""How well a replay matches the recording: token fidelity, cache estimates, compactions.

These are the acceptance measures of the engine, computed from replay results only:

* fidelity — refit ``recorded ≈ a + b · raw_tokens`` per thread (two numbers, least squares)
  and report relative errors;
* cache — |estimated read − recorded read| as a share of the recorded prompt, and how well
  the estimate finds the requests whose cache mostly missed (read < 50 % of the prompt);
* compaction — whether a what-if replay predicts every recorded automatic compaction on the
  same request or a neighbour, with a decision count close to the recorded ``preTokens``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any, TypedDict

from contextlab.engine.measures.tokens import fit_calibration, percentile
from contextlab.engine.replay.result import ReplayResult
from contextlab.engine.results import RequestRow, ResultJson

MISS_SHARE = 0.5


class FidelityThread(TypedDict):
    """The refit of one thread (or one model of a thread that switched models)."""

    thread: str
    kind: str
    model: str | None
    requests: int
    prefix_tokens: int
    ratio: float
    median_rel_error: float
    p90_rel_error: float


class FidelityPoint(TypedDict):
    """One request's signed error, ``(fit − recorded) / recorded``, and where it is."""

    thread: str
    thread_request: int
    #: the row's ``index`` (position among the main conversation's requests for its rows)
    index: int
    rel_error: float


class Fidelity(TypedDict):
    threads: list[FidelityThread]
    requests: int
    median_rel_error: float | None
    p90_rel_error: float | None
    max_rel_error: float | None
    #: every request's |relative error|, sorted (what a caller pools over several sessions)
    errors: list[float]
    points: list[FidelityPoint]


#: A thread as fidelity sees it: id, kind, whether it is fitted per model, its rows in order.
FidelityInput = tuple[str, str, bool, Sequence[RequestRow]]


def fidelity(result: ReplayResult) -> Fidelity:
    """Per-thread (and per-model) least-squares fit of recorded prompt totals on raw tokens."""
    return _fidelity(
        (tr.thread.id, tr.thread.kind, bool(tr.model_calibrations), tr.requests)
        for tr in result.threads
    )


def result_fidelity(data: ResultJson) -> Fidelity:
    """``fidelity`` of a stored result JSON: the same figures as for its ``ReplayResult``.

    The JSON lists the main conversation's rows (branches included) in time order and each
    subagent's apart; regrouped by thread in request order, every fit sums the same numbers
    in the same order as ``fidelity`` does, so the two agree to the last bit.
    """
    by_thread: dict[str, list[RequestRow]] = {}
    for row in data.get("requests") or []:
        by_thread.setdefault(row.get("thread") or "main", []).append(row)
    for sub in data.get("subagents") or []:
        by_thread.setdefault(sub["thread"], []).extend(sub.get("requests") or [])
    threads = (data.get("session") or {}).get("threads") or []
    known = {t["id"] for t in threads}
    inputs: list[FidelityInput] = [
        (
            t["id"],
            t.get("kind", ""),
            bool(t.get("model_calibrations")),
            sorted(by_thread.get(t["id"], []), key=lambda r: r.get("thread_request", 0)),
        )
        for t in threads
    ]
    # rows of a thread the session does not list (hand-built or partial results) still count
    inputs.extend(
        (thread, "", False, sorted(rows, key=lambda r: r.get("thread_request", 0)))
        for thread, rows in by_thread.items()
        if thread not in known
    )
    return _fidelity(inputs)


def _fidelity(threads: Iterable[FidelityInput]) -> Fidelity:
    rows: list[FidelityThread] = []
    points: list[FidelityPoint] = []
    for thread_id, kind, per_model, requests in threads:
        groups: dict[str, list[RequestRow]] = {}
        for r in requests:
            if r["recorded_total"]:
                # one fit per model: a /model switch changes tokenizer and system prompt
                key = (r["model"] or "") if per_model else ""
                groups.setdefault(key, []).append(r)
        for model, reqs in groups.items():
            # unrecorded input is what the transcript cannot show: off the total before the fit
            totals = [(r["recorded_total"] or 0) - r.get("unrecorded_tokens", 0) for r in reqs]
            cal = fit_calibration([r["raw_tokens"] for r in reqs], totals)
            if cal is None:
                continue
            signed = [
                (cal.prefix_tokens + cal.ratio * r["raw_tokens"] - total) / total
                for r, total in zip(reqs, totals, strict=True)
            ]
            points.extend(
                {
                    "thread": thread_id,
                    "thread_request": r["thread_request"],
                    "index": r["index"],
                    "rel_error": e,
                }
                for r, e in zip(reqs, signed, strict=True)
            )
            errs = sorted(abs(e) for e in signed)
            rows.append(
                {
                    "thread": thread_id,
                    "kind": kind,
                    "model": model or None,
                    "requests": len(errs),
                    "prefix_tokens": round(cal.prefix_tokens),
                    "ratio": round(cal.ratio, 4),
                    "median_rel_error": statistics.median(errs),
                    "p90_rel_error": percentile(errs, 0.9),
                }
            )
    errors = sorted(abs(p["rel_error"]) for p in points)
    return {
        "threads": rows,
        "requests": len(errors),
        **pooled_errors(errors),
        "errors": errors,
        "points": points,
    }


class PooledErrors(TypedDict):
    median_rel_error: float | None
    p90_rel_error: float | None
    max_rel_error: float | None


def pooled_errors(sorted_errors: Sequence[float]) -> PooledErrors:
    """Median, p90 (``tokens.percentile``, the one definition) and worst of sorted errors."""
    values = list(sorted_errors)
    if not values:
        return {"median_rel_error": None, "p90_rel_error": None, "max_rel_error": None}
    return {
        "median_rel_error": statistics.median(values),
        "p90_rel_error": percentile(values, 0.9),
        "max_rel_error": values[-1],
    }


def cache_accuracy(result: ReplayResult) -> dict[str, Any]:
    """Estimated cache reads against the recorded ones (never fed back into the estimate).

    The estimate is the cache model's own: a server-side miss taken from the recording
    (``server_miss_tokens``) is added back, so it counts as the model's miss when it had one.
    """
    diffs: list[float] = []
    recorded_miss = predicted_miss = both = 0
    for tr in result.threads:
        for r in tr.requests:
            rec = r["recorded"]
            total = r["recorded_total"]
            if not rec or not total:
                continue
            est = r.get("cache_estimate") or r["cache"]  # results before RESULT_VERSION 2
            estimate = est["read"] + int(est.get("server_miss_tokens") or 0)
            diffs.append(abs(estimate - rec["cache_read"]) / total)
            actual = rec["cache_read"] < MISS_SHARE * total
            predicted = estimate < MISS_SHARE * max(1, r["model_tokens"])
            recorded_miss += actual
            predicted_miss += predicted
            both += actual and predicted
    diffs.sort()
    return {
        "requests": len(diffs),
        "median_read_error_share": statistics.median(diffs) if diffs else None,
        "p90_read_error_share": percentile(diffs, 0.9) if diffs else None,
        "recorded_misses": recorded_miss,
        "predicted_misses": predicted_miss,
        "misses_found": both,
        "miss_recall": both / recorded_miss if recorded_miss else None,
        "miss_precision": both / predicted_miss if predicted_miss else None,
        "diffs": diffs,
        "counts": (recorded_miss, predicted_miss, both),
    }


def compaction_accuracy(recorded: ReplayResult, whatif: ReplayResult) -> dict[str, Any]:
    """Match each recorded automatic compaction with one the what-if replay predicted."""
    rows: list[dict[str, Any]] = []
    for rec_tr, wi_tr in zip(recorded.threads, whatif.threads, strict=True):
        predicted = {
            r["thread_request"]: e
            for r in wi_tr.requests
            for e in r["events"]
            if e["step"] == "autocompact" and e["action"] == "compacted"
        }
        for r in rec_tr.requests:
            for e in r["events"]:
                if (
                    e["step"] != "autocompact"
                    or e["action"] != "compacted"
                    or e.get("trigger") != "auto"
                ):
                    continue
                k = r["thread_request"]
                match = next((predicted[j] for j in (k, k - 1, k + 1) if j in predicted), None)
                offset = next((j - k for j in (k, k - 1, k + 1) if j in predicted), None)
                pre = e.get("pre_tokens") or 0
                count = match["decision_tokens"] if match else None
                rows.append(
                    {
                        "thread": rec_tr.thread.id,
                        "request": k,
                        "pre_tokens": pre,
                        "predicted": match is not None,
                        "offset": offset,
                        "decision_tokens": count,
                        "rel_error": abs(count - pre) / pre
                        if (count is not None and pre)
                        else None,
                    }
                )
    ok = [
        r for r in rows if r["predicted"] and r["rel_error"] is not None and r["rel_error"] <= 0.03
    ]
    return {"recorded_auto": len(rows), "predicted_within_3pct": len(ok), "rows": rows}
