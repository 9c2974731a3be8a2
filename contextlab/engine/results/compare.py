"""Compare replays of one session under two configs, and sweep one numeric field.

Works on replay JSON (``ReplayResult.to_json()``), so stored results can be compared without
replaying again. Measures are the ones a user tuning thresholds asks about: cost, cache,
compactions, peak context and how much of the history the model kept.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from contextlab.engine.config.errors import ConfigError
from contextlab.engine.config.fields import PipelineConfig
from contextlab.engine.config.forms import field_specs
from contextlab.engine.results import as_result

#: Measures shown in comparisons and sweeps, with a label and whether lower is better.
MEASURES: dict[str, tuple[str, bool]] = {
    "requests": ("requests", False),
    "compactions": ("compactions", True),
    "summary_calls": ("summary calls", True),
    "summary_cost_usd": ("summary cost ($)", True),
    "peak_model_tokens": ("peak model-view tokens", True),
    "uncached_tokens": ("tokens billed uncached", True),
    "cache_write_tokens": ("tokens billed as cache write", True),
    "cache_read_tokens": ("tokens billed as cache read", False),
    "cost_usd": ("estimated cost, compaction calls included ($)", True),
    "cache_hit_rate": ("cache hit rate", False),
    "mean_history_share": ("mean share of the history the model saw", False),
    "requests_above_warning": ("requests above the warning level", True),
    "blocking_hits": ("blocking-limit hits", True),
}


def summary_measures(result: Mapping[str, Any]) -> dict[str, Any]:
    """The comparison measures of one replay (main thread and its branches).

    Cache and cost are the replay's own estimate (``summary["estimate"]``) whatever the mode:
    two replays are compared with the same model on both sides, never a recording against an
    estimate (a result older than ``RESULT_VERSION`` 2 has only the estimate at the top). The
    cost includes the compaction calls (``estimate_with_calls``): a what-if that compacts more
    pays for every summary request, whoever wrote the summary text.
    """
    summary = as_result(result)["summary"]
    est: Mapping[str, Any] = summary.get("estimate") or summary
    synthetic = result.get("views", {}).get("synthetic", [])
    summaries = [s for s in synthetic if s.get("kind") == "summary" and not s.get("reused")]
    return {
        "requests": summary["requests"],
        "compactions": summary["compactions"],
        "compaction_requests": summary.get("compaction_requests", []),
        "summary_calls": summary.get("summary_calls", len(summaries)),
        # the compaction calls as Claude Code pays them, whoever wrote the summaries (results
        # stored before that figure existed: what the summarizer itself cost)
        "summary_cost_usd": summary.get("compaction_call_cost_usd")
        if "compaction_call_cost_usd" in summary
        else round(sum(float(s.get("cost_usd") or 0.0) for s in summaries), 6),
        "peak_model_tokens": summary["peak_model_tokens"],
        "uncached_tokens": est["uncached_tokens"],
        "cache_write_tokens": est["cache_write_tokens"],
        "cache_read_tokens": est["cache_read_tokens"],
        "cost_usd": estimate_with_calls(summary),
        "cache_hit_rate": est["cache_hit_rate"],
        "mean_history_share": summary["mean_history_share"],
        "requests_above_warning": summary["requests_above_warning"],
        "blocking_hits": summary["blocking_hits"],
    }


def estimate_with_calls(summary: Mapping[str, Any]) -> float:
    """A replay's estimated cost with its compaction calls as Claude Code pays them.

    Each compaction is an API call of its own (the whole context as input at its cache state,
    the summary as output, ``replay.compaction_bill``) that no request row holds; a comparison
    or a what-if's cost without it would make extra compactions free, whichever summarizer
    wrote the text (the offline one costs ContextLab nothing, the session still pays the call).
    """
    est: Mapping[str, Any] = summary.get("estimate") or summary
    calls = float(summary.get("compaction_call_cost_usd") or 0.0)
    return round(float(est.get("cost_usd") or 0.0) + calls, 6)


class WhatifCost(TypedDict):
    """A what-if's cost anchored on what was paid (``whatif_cost``)."""

    #: recorded cost + (what-if estimate − baseline estimate)
    cost_usd: float
    #: the error band: ± this many USD around ``cost_usd`` (None: no recorded cost to measure)
    band_usd: float | None
    #: the baseline estimate's relative error against the recorded cost, the band's source
    band_share: float | None
    recorded_cost_usd: float
    #: the two replays' estimates, their compaction calls included (``estimate_with_calls``)
    baseline_estimate_usd: float
    whatif_estimate_usd: float
    #: what-if estimate − baseline estimate (same model on both sides)
    change_usd: float


#: how ``whatif_cost`` draws its band, in a sentence the pages show
WHATIF_BAND_RULE = (
    "± the baseline replay's own cost error (|its estimate − the recorded cost| / the recorded "
    "cost) applied to the what-if's estimate"
)


def whatif_cost(whatif: Mapping[str, Any], baseline: Mapping[str, Any]) -> WhatifCost:
    """A what-if's cost: what the recorded session cost plus what the change changes.

    ``whatif`` and ``baseline`` are the two results' ``summary`` (main conversation and its
    branches). The change is the what-if's estimate minus the baseline replay's estimate, the
    same cache model and prices on both sides, so the model's own bias cancels; the recorded
    cost is what was paid. The band: the estimate strayed from the recording by some share on
    this very session (the baseline's cost fidelity); the what-if's estimate, which has no
    recording to lean on, is taken to stray by as much (``WHATIF_BAND_RULE``).
    """
    recorded = float(baseline.get("cost_usd") or 0.0)
    # the compaction calls on both sides: a recorded compaction the what-if keeps cancels,
    # one it adds costs its call (the band compares like with like: the requests' estimate
    # against the requests' recorded cost)
    base_requests = float((baseline.get("estimate") or baseline).get("cost_usd") or 0.0)
    base_est = estimate_with_calls(baseline)
    what_est = estimate_with_calls(whatif)
    change = what_est - base_est
    share = abs(base_requests - recorded) / recorded if recorded > 0 else None
    return {
        "cost_usd": round(max(0.0, recorded + change), 6),
        "band_usd": round(share * what_est, 6) if share is not None else None,
        "band_share": round(share, 4) if share is not None else None,
        "recorded_cost_usd": round(recorded, 6),
        "baseline_estimate_usd": round(base_est, 6),
        "whatif_estimate_usd": round(what_est, 6),
        "change_usd": round(change, 6),
    }


def add_measures(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Totals over several sessions (rates and shares weighted by requests)."""
    if not items:
        return dict.fromkeys(MEASURES, 0)
    total_requests = sum(int(i["requests"]) for i in items) or 1
    out: dict[str, Any] = {}
    for key in MEASURES:
        if key in ("cache_hit_rate", "mean_history_share"):
            out[key] = round(
                sum(float(i[key]) * int(i["requests"]) for i in items) / total_requests, 4
            )
        elif key == "peak_model_tokens":
            out[key] = max(int(i[key]) for i in items)
        else:
            value = sum(i[key] for i in items)
            out[key] = round(value, 6) if isinstance(value, float) else value
    return out


def delta(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per measure: A, B, B − A, relative change, and which side is better."""
    out: dict[str, dict[str, Any]] = {}
    for key, (label, lower_is_better) in MEASURES.items():
        va, vb = a.get(key, 0) or 0, b.get(key, 0) or 0
        diff = vb - va
        rel = (diff / va) if va else None
        if diff == 0:
            better = None
        elif (diff < 0) == lower_is_better:
            better = "b"
        else:
            better = "a"
        out[key] = {
            "label": label,
            "a": va,
            "b": vb,
            "delta": round(diff, 6) if isinstance(diff, float) else diff,
            "relative": round(rel, 4) if rel is not None else None,
            "better": better,
        }
    return out


def first_divergence(a: Mapping[str, Any], b: Mapping[str, Any]) -> int | None:
    """Index of the first request whose model view differs between two replays of a session."""
    rows_a, rows_b = as_result(a)["requests"], as_result(b)["requests"]
    for ra, rb in zip(rows_a, rows_b, strict=False):
        if ra["message_id"] != rb["message_id"]:
            return ra["index"]
        if ra["raw_tokens"] != rb["raw_tokens"] or ra["view"]["start"] != rb["view"]["start"]:
            return ra["index"]
    if len(rows_a) != len(rows_b):
        return min(len(rows_a), len(rows_b))
    return None


def numeric_fields() -> list[dict[str, Any]]:
    """Fields a sweep can vary (ints and floats)."""
    return [s for s in field_specs() if s["type"] in ("int", "float", "int | None", "float | None")]


def parse_sweep_values(
    field: str, values: str | Sequence[float | int], base: PipelineConfig | None = None
) -> list[float | int]:
    """Values to sweep: a list, or ``"start:stop:step"`` (inclusive), or ``"a, b, c"``.

    Raises ``ConfigError`` naming the field when it is unknown, not numeric, or a value is out
    of its range (checked by building a config with it).
    """
    specs = {s["name"]: s for s in field_specs()}
    spec = specs.get(field)
    if spec is None:
        raise ConfigError(field, "unknown field; a sweep varies one numeric config field")
    if spec["name"] not in {s["name"] for s in numeric_fields()}:
        raise ConfigError(field, f"cannot sweep a {spec['type']} field; pick a numeric one")
    is_int = str(spec["type"]).startswith("int")
    parsed: list[float | int]
    if isinstance(values, str):
        text = values.strip()
        if ":" in text:
            parts = [p.strip() for p in text.split(":")]
            if len(parts) != 3:
                raise ConfigError(field, "a range is start:stop:step")
            start, stop, step = (float(p) for p in parts)
            if not all(math.isfinite(v) for v in (start, stop, step)):
                raise ConfigError(field, "a range needs finite numbers (no inf or nan)")
            if step <= 0 or stop < start:
                raise ConfigError(field, "a range needs step > 0 and stop ≥ start")
            span = (stop - start) / step
            if not math.isfinite(span) or span > 50:  # 0:1e308:1e-300 spans infinity
                raise ConfigError(field, "more than 50 values; at most 50 per sweep")
            count = math.floor(span + 1e-9) + 1
            if count > 50:
                raise ConfigError(field, f"{count} values; at most 50 per sweep")
            parsed = [start + n * step for n in range(count)]
        else:
            try:
                parsed = [float(p) for p in text.replace(";", ",").split(",") if p.strip()]
            except ValueError as exc:
                raise ConfigError(field, f"values must be numbers ({exc})") from exc
    else:
        parsed = [float(v) for v in values]
    if not parsed:
        raise ConfigError(field, "no values to sweep")
    if not all(math.isfinite(v) for v in parsed):
        raise ConfigError(field, "values must be finite numbers (no inf or nan)")
    if len(parsed) > 50:
        raise ConfigError(field, f"{len(parsed)} values; at most 50 per sweep")
    out: list[float | int] = []
    for value in parsed:
        if is_int:
            if not float(value).is_integer():
                raise ConfigError(field, f"{value} is not a whole number")
            out.append(int(value))
        else:
            out.append(float(value))
    base = base or PipelineConfig()
    for value in out:
        base.replace(**{field: value})  # raises ConfigError with the allowed range
    return list(dict.fromkeys(out))
