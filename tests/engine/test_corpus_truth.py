"""#9 checks over every corpus file, ``recent/`` included: anchors, segments and session costs.

Skipped without the corpus (``needs_corpus``); the same phenomena are unit-tested on small
synthetic transcripts in ``test_anchors.py``.
"""

from __future__ import annotations

import statistics
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from tests.conftest import CORPUS, corpus_files, needs_corpus

pytestmark = needs_corpus

FILES = corpus_files()


@cache
def recorded(path: Path) -> dict[str, Any]:
    session = engine.load_session(str(path))
    config, preset = engine.resolve_config(
        "auto",
        version=session.version,
        max_recorded_prompt=session.max_recorded_prompt,
        recorded_auto_compactions=session.recorded_auto_compactions,
    )
    return engine.replay(session, config, mode="recorded", preset_name=preset).to_json()


def _name(path: Path) -> str:
    return path.relative_to(CORPUS).as_posix()[:60]


@pytest.mark.parametrize("path", FILES, ids=_name)
def test_anchors_stay_few_and_consistent(path):
    result = recorded(path)
    rows = [*result["requests"], *(r for s in result["subagents"] for r in s["requests"])]
    by_thread: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_thread.setdefault(row["thread"], []).append(row)
    for info in result["session"]["threads"]:
        thread_rows = sorted(by_thread.get(info["id"], []), key=lambda r: r["thread_request"])
        anchors = info["anchors"]
        # a model that needs an anchor per request does not work: at most 1 in 20, and 2
        assert len(anchors) <= max(2, len(thread_rows) // 20), (info["id"], anchors)
        assert all(a["kind"] in ("earlier_history", "segment", "unrecorded") for a in anchors)
        assert sum(a["kind"] == "earlier_history" for a in anchors) <= 1
        segments = [r["segment"] for r in thread_rows]
        assert segments == sorted(segments)
        assert info["segments"] == (max(segments) + 1 if segments else 1)
        assert all(r["unrecorded_tokens"] >= 0 for r in thread_rows)
        anchored = {a["request"] for a in anchors}
        for row in thread_rows:
            events = {e["action"] for e in row["events"] if e["step"] == "anchor"}
            assert bool(events) == (row["thread_request"] in anchored)


@pytest.mark.parametrize("path", FILES, ids=_name)
def test_session_costs_add_up(path):
    summary = recorded(path)["summary"]
    assert summary["session_cost_usd"] == pytest.approx(
        summary["cost_usd"] + summary["subagent_cost_usd"] + summary["compaction_cost_usd"],
        abs=1e-5,
    )
    assert summary["recorded_session_cost_usd"] == pytest.approx(
        summary["recorded_cost_usd"]
        + summary["recorded_subagent_cost_usd"]
        + summary["recorded_compaction_cost_usd"],
        abs=1e-5,
    )


def session_cost_errors() -> list[float]:
    errors = []
    for path in FILES:
        summary = recorded(path)["summary"]
        if summary["recorded_session_cost_usd"]:
            ours, theirs = summary["session_cost_usd"], summary["recorded_session_cost_usd"]
            errors.append(abs(ours - theirs) / theirs)
    return errors


def test_recorded_mode_cost_is_within_2_percent_of_the_recorded_usage_median():
    errors = session_cost_errors()
    assert len(errors) == len(FILES)
    assert statistics.median(errors) <= 0.02


@pytest.mark.xfail(
    strict=True,
    reason="measured 2026-12-01 after the /mcp restart and the warm-prefix entry (tool_heavy "
    "-33.7 % → -0.8 %): worst entireio fc_99c919b212 -16.4 %, then 25_730c -9.7 %, 9b_04c3 -5.6 %, "
    "FSM1 cipher-box -5.1 %. All four come from 10 requests (of 665) whose recorded cache read "
    "fell to the system prefix with no record naming why (4 s to 3 min after a full hit, no "
    "restart, model or TTL change; 3 in fc_99 follow a change of thinkingMetadata between turns, "
    "but marot subagent and PackmindHub read fully after the same change); without those "
    "requests the four are at +1.1, -2.0, +3.5 and +0.3 %",
)
def test_no_session_cost_is_beyond_5_percent_of_the_recorded_usage():
    assert max(session_cost_errors()) <= 0.05
