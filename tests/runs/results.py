"""Small hand-built result dicts in the engine's JSON shape, for chart and view unit tests."""

from __future__ import annotations

from typing import Any


def request(
    i: int,
    *,
    model: int,
    repl: int,
    recorded: int | None = None,
    events: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "index": i,
        "thread": "main",
        "thread_request": i,
        "message_id": f"msg_{i}",
        "timestamp": f"2026-01-01T00:00:{i % 60:02d}Z",
        "model": "claude-opus-4-5",
        "raw_tokens": model,
        "model_tokens": model,
        "repl_tokens": repl,
        "decision_tokens": model,
        "recorded": None
        if recorded is None
        else {"input": 10, "cache_read": recorded - 110, "cache_write": 100, "output": 5},
        "recorded_total": recorded,
        "cache": {"read": model - 100, "write": 100, "uncached": 0, "reason": "hit", "detail": ""},
        "cost_usd": 0.01,
        "recorded_cost_usd": 0.012 if recorded is not None else None,
        "thresholds": {
            "warning": 135000,
            "autocompact": 155000,
            "blocking": 197000,
            "effective": 168000,
        },
        "events": events or [],
        "branch": False,
        "view": {"head": [], "start": 0, "end": 0},
    }


def result(n: int = 5, *, compact_at: int | None = 3, recorded: bool = True) -> dict[str, Any]:
    requests = []
    for i in range(n):
        events = []
        if compact_at is not None and i == compact_at:
            events = [
                {"step": "autocompact", "action": "compacted"},
                {"step": "microcompact", "action": "cleared"},
            ]
        model = 1000 * (i + 1)
        requests.append(
            request(
                i,
                model=model,
                repl=model * 2,
                recorded=int(model * 1.1) if recorded else None,
                events=events,
            )
        )
    return {
        "session": {
            "name": "t.jsonl",
            "session_id": "s",
            "version": "2.1.38",
            "mode": "recorded",
            "preset": "auto",
            "config": {},
            "threads": [{"id": "main", "kind": "main", "messages": 10, "requests": n}],
            "calibration": {
                "prefix_tokens": 4000,
                "ratio": 1.2,
                "median_rel_error": 0.05,
                "p90_rel_error": 0.1,
            },
            "problems": [],
        },
        "requests": requests,
        "subagents": [],
        "summary": {
            "requests": n,
            "compactions": 1,
            "microcompactions": 1,
            "peak_model_tokens": 1000 * n,
            "cost_usd": 0.01 * n,
            "recorded_cost_usd": 0.012 * n,
            "cache_hit_rate": 0.9,
        },
        "views": {"transforms": [], "synthetic": []},
    }
