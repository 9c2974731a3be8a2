"""What a replay returns: every thread's request rows, and the result JSON built from them."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, cast

from contextlab.engine.config.fields import PipelineConfig
from contextlab.engine.input.session import Session, Thread
from contextlab.engine.measures.anchors import ThreadAnchors
from contextlab.engine.measures.cost import Price, load_pricing
from contextlab.engine.measures.tokens import Calibration
from contextlab.engine.pipeline import DEFAULT_STEPS
from contextlab.engine.pipeline.base import TransformLog
from contextlab.engine.results import (
    RESULT_VERSION,
    CalibrationJson,
    RequestRow,
    ResultJson,
    SessionSummary,
    SubagentResult,
)


@dataclass
class ThreadResult:
    thread: Thread
    requests: list[RequestRow]
    raw: list[int]
    recorded_totals: list[int]
    calibration: Calibration
    summary_calls: int = 0
    #: per model, when a thread switched models (each has its own tokenizer and system prompt)
    model_calibrations: dict[str, Calibration] = field(default_factory=dict)
    anchors: ThreadAnchors | None = None


@dataclass
class ReplayResult:
    """Everything a replay computed; ``to_json`` gives the documented JSON shape."""

    session: Session
    mode: str
    preset: str
    config: PipelineConfig
    threads: list[ThreadResult]
    log: TransformLog
    summarizer: str

    def main_requests(self) -> list[RequestRow]:
        out: list[RequestRow] = []
        for tr in self.threads:
            if tr.thread.kind in ("main", "branch"):
                out.extend(tr.requests)
        out.sort(key=lambda r: (r["timestamp"] or "", r["thread"] != "main"))
        for n, req in enumerate(out):
            if req["index"] != n:
                # a copy, renumbered: the thread's rows are final once written, and a live
                # replay's state shares them with the next version's result (``checkpoints
                # ._DECODED``)
                out[n] = {**req, "index": n}  # type: ignore[typeddict-item]
        return out

    def to_json(self) -> dict[str, Any]:
        """``result_json()`` as the plain dict it is, for code that stores or serialises it."""
        return cast(dict[str, Any], self.result_json())

    def result_json(self) -> ResultJson:
        """The result in its declared shape (``results.ResultJson``)."""
        main = self.main_requests()
        subagents: list[SubagentResult] = [
            {
                "thread": tr.thread.id,
                "kind": tr.thread.kind,
                "file": tr.thread.file,
                "compaction_fork": tr.thread.compaction_fork,
                "requests": tr.requests,
            }
            for tr in self.threads
            if tr.thread.kind in ("subagent", "sidechain")
        ]
        main_thread = self.threads[0] if self.threads else None
        return {
            "result_version": RESULT_VERSION,
            "session": {
                "name": self.session.name,
                "session_id": self.session.session_id,
                "version": self.session.version,
                "versions": self.session.versions,
                "mode": self.mode,
                "preset": self.preset,
                "summarizer": self.summarizer,
                "config": self.config.to_dict(),
                "threads": [
                    {
                        "id": tr.thread.id,
                        "kind": tr.thread.kind,
                        "file": tr.thread.file,
                        "messages": len(tr.thread.messages),
                        "requests": len(tr.requests),
                        "calibration": _calibration_json(tr.calibration),
                        "model_calibrations": {
                            m: _calibration_json(c) for m, c in tr.model_calibrations.items()
                        },
                        "segments": (max(tr.anchors.segment, default=0) + 1) if tr.anchors else 1,
                        "anchors": [a.to_json() for a in tr.anchors.anchors] if tr.anchors else [],
                    }
                    for tr in self.threads
                ],
                "calibration": _calibration_json(main_thread.calibration) if main_thread else None,
                "problems": [p.to_json() for p in self.session.problems],
                "modeled_steps": [s.name for s in DEFAULT_STEPS if s.modeled],
                "usage_until": self.session.usage_until,
            },
            "requests": main,
            "subagents": subagents,
            "summary": summarize(main, self.threads, self.session.side.claude_code_cost_usd),
            "views": {"transforms": self.log.transforms, "synthetic": self.log.synthetic},
            "summaries": self.log.summaries(),
        }


def _calibration_json(calibration: Calibration) -> CalibrationJson:
    return cast(CalibrationJson, calibration.to_json())


def summarize(
    requests: list[RequestRow],
    threads: list[ThreadResult],
    claude_code_cost: float | None = None,
) -> SessionSummary:
    """Session totals for the main thread (and its branches), subagents and compaction calls
    apart; ``claude_code_cost`` is Claude Code's own figure when the transcript has one."""
    pricing_notes, long_context = _pricing_facts(requests, threads)
    # one pass over the requests gathers every column the totals add up (a session of
    # thousands of small requests paid a pass per total); each is summed as a list, in the
    # requests' order, as the totals were before
    read_l: list[int] = []
    write_l: list[int] = []
    uncached_l: list[int] = []
    est_read_l: list[int] = []
    est_write_l: list[int] = []
    est_uncached_l: list[int] = []
    costs: list[float] = []
    recorded_costs: list[float] = []
    iteration_costs: list[float] = []
    estimate_costs: list[float] = []
    call_costs: list[float] = []
    model_tokens: list[int] = []
    compactions: list[int] = []
    shares: list[float] = []
    recorded = microcompactions = recorded_cache = disagreements = above_warning = blocking = 0
    for r in requests:
        cache, estimate = r["cache"], r["cache_estimate"]
        read_l.append(cache["read"])
        write_l.append(cache["write"])
        uncached_l.append(cache["uncached"])
        est_read_l.append(estimate["read"])
        est_write_l.append(estimate["write"])
        est_uncached_l.append(estimate["uncached"])
        compacted = False
        for e in r["events"]:
            step = e["step"]
            if step == "autocompact":
                compacted = compacted or e["action"] == "compacted"
                if "call" in e:
                    call_costs.append(float(e["call"]["cost_usd"]))
            elif step == "microcompact":
                microcompactions += 1
            elif step == "blocking":
                blocking += 1
        if compacted:
            compactions.append(r["index"])
        if r["repl_tokens"]:
            shares.append(r["model_tokens"] / r["repl_tokens"])
        if r["recorded"]:
            recorded += 1
        model_tokens.append(r["model_tokens"])
        costs.append(r["cost_usd"])
        recorded_costs.append(r["recorded_cost_usd"] or 0.0)
        iteration_costs.append(r["iteration_cost_usd"])
        estimate_costs.append(r["cost_estimate_usd"])
        if cache["source"] == "recorded":
            recorded_cache += 1
        if r["cache_disagrees"]:
            disagreements += 1
        if r["decision_tokens"] >= r["thresholds"]["warning"]:
            above_warning += 1
    read, write, uncached = sum(read_l), sum(write_l), sum(uncached_l)
    est_read, est_write, est_uncached = sum(est_read_l), sum(est_write_l), sum(est_uncached_l)
    # the main requests' costs from the columns above (the same sums in the same order)
    cost, recorded_cost, estimate_cost = sum(costs), sum(recorded_costs), sum(estimate_costs)
    side = _side_costs(threads, main=(cost, recorded_cost, estimate_cost))
    return {
        "requests": len(requests),
        "compactions": len(compactions),
        "compaction_requests": compactions,
        "microcompactions": microcompactions,
        "summary_calls": sum(
            t.summary_calls for t in threads if t.thread.kind in ("main", "branch")
        ),
        "peak_model_tokens": max(model_tokens, default=0),
        "cache_read_tokens": read,
        "cache_write_tokens": write,
        "uncached_tokens": uncached,
        "cost_usd": round(cost, 6),
        "recorded_cost_usd": round(recorded_cost, 6),
        "iteration_cost_usd": round(sum(iteration_costs), 6),
        "cache_hit_rate": _hit_rate(read, write, uncached),
        "recorded_cache_requests": recorded_cache,
        "cache_disagreements": disagreements,
        "estimate": {
            "cost_usd": round(estimate_cost, 6),
            "session_cost_usd": side["session_cost_estimate_usd"],
            "cache_read_tokens": est_read,
            "cache_write_tokens": est_write,
            "uncached_tokens": est_uncached,
            "cache_hit_rate": _hit_rate(est_read, est_write, est_uncached),
        },
        "mean_history_share": round(statistics.fmean(shares), 4) if shares else 1.0,
        "requests_above_warning": above_warning,
        "blocking_hits": blocking,
        "recorded_requests": recorded,
        "pricing_notes": pricing_notes,
        "long_context_requests": long_context,
        "subagent_cost_usd": side["subagent_cost_usd"],
        "recorded_subagent_cost_usd": side["recorded_subagent_cost_usd"],
        "compaction_cost_usd": side["compaction_cost_usd"],
        "compaction_call_cost_usd": round(sum(call_costs), 6),
        "recorded_compaction_cost_usd": side["recorded_compaction_cost_usd"],
        "session_cost_usd": side["session_cost_usd"],
        "recorded_session_cost_usd": side["recorded_session_cost_usd"],
        "claude_code_cost": claude_code_cost,
    }


def _pricing_facts(
    requests: list[RequestRow], threads: list[ThreadResult]
) -> tuple[list[str], int]:
    """What the session's costs rest on that a reader must be told: a model priced on assumed
    rates (``PricingTable.pricing_note``), and requests priced at long-context rates."""
    pricing = load_pricing()
    rows = [
        *requests,
        *(r for t in threads if t.thread.kind not in ("main", "branch") for r in t.requests),
    ]
    notes: dict[str, str] = {}
    long_context = 0
    # each model's price and note looked up once (a session has thousands of rows, a few models)
    prices: dict[str | None, Price] = {}
    for r in rows:
        model = r["model"]
        price = prices.get(model)
        if price is None:
            if model:
                note = pricing.pricing_note(model)
                if note:
                    notes[model] = note
            price = prices[model] = pricing.price_for(model)[0]
        # (``price.rates_for(prompt) is not price``, inline: most models have no long-context
        # rates, and then the prompt is not summed)
        long_rates = price.long_context
        if long_rates is not None and long_rates is not price:
            cache = r["cache"]
            if cache["read"] + cache["write"] + cache["uncached"] > price.long_context_above:
                long_context += 1
    return list(notes.values()), long_context


def _hit_rate(read: int, write: int, uncached: int) -> float:
    return round(read / (read + write + uncached), 4) if read + write + uncached else 0.0


def _side_costs(threads: list[ThreadResult], main: tuple[float, float, float]) -> dict[str, float]:
    """Subagent and compaction-call costs apart, and the session totals that include them;
    ``main``: the main requests' cost, recorded cost and estimated cost."""

    def total(rows: list[RequestRow], recorded: bool) -> float:
        if recorded:
            return sum(r["recorded_cost_usd"] or 0.0 for r in rows)
        return sum(r["cost_usd"] for r in rows)

    def estimated(rows: list[RequestRow]) -> float:
        return sum(r["cost_estimate_usd"] for r in rows)

    subagents = [
        r
        for t in threads
        if t.thread.kind in ("subagent", "sidechain") and not t.thread.compaction_fork
        for r in t.requests
    ]
    compactions = [r for t in threads if t.thread.compaction_fork for r in t.requests]
    out = {
        "subagent_cost_usd": total(subagents, False),
        "recorded_subagent_cost_usd": total(subagents, True),
        "compaction_cost_usd": total(compactions, False),
        "recorded_compaction_cost_usd": total(compactions, True),
        "session_cost_usd": main[0],
        "recorded_session_cost_usd": main[1],
    }
    out["session_cost_usd"] += out["subagent_cost_usd"] + out["compaction_cost_usd"]
    out["session_cost_estimate_usd"] = main[2] + estimated(subagents + compactions)
    out["recorded_session_cost_usd"] += (
        out["recorded_subagent_cost_usd"] + out["recorded_compaction_cost_usd"]
    )
    return {key: round(value, 6) for key, value in out.items()}
