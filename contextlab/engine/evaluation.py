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
from typing import Any

from .replay import ReplayResult
from .tokens import fit_calibration, percentile

MISS_SHARE = 0.5


def fidelity(result: ReplayResult) -> dict[str, Any]:
    """Per-thread (and per-model) least-squares fit of recorded prompt totals on raw tokens."""
    rows = []
    errors: list[float] = []
    for tr in result.threads:
        groups: dict[str, list[dict[str, Any]]] = {}
        for r in tr.requests:
            if r["recorded_total"]:
                # one fit per model: a /model switch changes tokenizer and system prompt
                key = (r["model"] or "") if tr.model_calibrations else ""
                groups.setdefault(key, []).append(r)
        for model, reqs in groups.items():
            cal = fit_calibration(
                [r["raw_tokens"] for r in reqs], [r["recorded_total"] for r in reqs]
            )
            if cal is None:
                continue
            errs = sorted(
                abs(cal.prefix_tokens + cal.ratio * r["raw_tokens"] - r["recorded_total"])
                / r["recorded_total"]
                for r in reqs
            )
            errors.extend(errs)
            rows.append(
                {
                    "thread": tr.thread.id,
                    "kind": tr.thread.kind,
                    "model": model or None,
                    "requests": len(errs),
                    "prefix_tokens": round(cal.prefix_tokens),
                    "ratio": round(cal.ratio, 4),
                    "median_rel_error": statistics.median(errs),
                    "p90_rel_error": percentile(errs, 0.9),
                }
            )
    errors.sort()
    return {
        "threads": rows,
        "requests": len(errors),
        "median_rel_error": statistics.median(errors) if errors else None,
        "p90_rel_error": percentile(errors, 0.9) if errors else None,
        "errors": errors,
    }


def cache_accuracy(result: ReplayResult) -> dict[str, Any]:
    """Estimated cache reads against the recorded ones (never fed back into the estimate)."""
    diffs: list[float] = []
    recorded_miss = predicted_miss = both = 0
    for tr in result.threads:
        for r in tr.requests:
            rec = r["recorded"]
            total = r["recorded_total"]
            if not rec or not total:
                continue
            diffs.append(abs(r["cache"]["read"] - rec["cache_read"]) / total)
            actual = rec["cache_read"] < MISS_SHARE * total
            predicted = r["cache"]["read"] < MISS_SHARE * max(1, r["model_tokens"])
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
    rows = []
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
