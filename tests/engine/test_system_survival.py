"""The static system prompt outlives a thread's own cache entries (issue #20, item 7).

A request sent after its thread's entries expired (a break longer than the TTL) reads nothing
of the conversation back, but the system prompt before the system breakpoint is shared with the
user's other sessions: in the corpus a thread whose first request found a warm prefix reads it
again after breaks up to an hour, a thread that started cold does not. Each test writes a small
session: four turns, 5-minute TTL, a break before the third.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contextlab import engine
from tests.engine.builders import TranscriptBuilder
from tests.engine.test_pipeline import SMALL_WINDOW, run

#: the first request's prompt and what it found warm when it started warm
FIRST_TOTAL = 20_000
WARM = 14_000


def session(tmp_path: Path, *, pause: float, warm_start: bool) -> Path:
    b = TranscriptBuilder()
    for n in range(4):
        b.prompt(
            f"turn {n}: " + "explain the module layout again " * 40,
            seconds=pause if n == 2 else 30.0,
        )
        usage: dict[str, Any] | None = None
        if n == 0:
            read = WARM if warm_start else 0
            usage = {
                "input_tokens": 3,
                "cache_creation_input_tokens": FIRST_TOTAL - 3 - read,
                "cache_read_input_tokens": read,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": FIRST_TOTAL - 3 - read,
                    "ephemeral_1h_input_tokens": 0,
                },
                "output_tokens": 10,
            }
        b.assistant(
            [{"type": "text", "text": f"answer {n} " + "the layout is flat " * 30}], usage=usage
        )
    return b.write(tmp_path / "session.jsonl")


def after_break(path: Path, **overrides: Any) -> dict[str, Any]:
    config = engine.get_preset("claude-code-2.1.88").replace(**overrides)
    result = engine.replay(engine.load_session(str(path)), config, mode="whatif")
    rows = result.to_json()["requests"]
    assert [r["ttl"] for r in rows] == ["5m"] * 4
    return rows[2]["cache_estimate"]


def test_a_warm_started_thread_reads_its_system_prompt_back_after_a_break(tmp_path):
    est = after_break(session(tmp_path, pause=20 * 60, warm_start=True))
    assert est["reason"] == "ttl_expired"
    # the system part only: the conversation after it is written again
    assert 0 < est["read"] <= WARM
    assert est["write"] > 0


def test_a_cold_started_thread_reads_nothing_back_after_a_break(tmp_path):
    est = after_break(session(tmp_path, pause=20 * 60, warm_start=False))
    assert est["reason"] == "ttl_expired"
    assert est["read"] == 0


def test_past_the_survival_window_nothing_is_read(tmp_path):
    path = session(tmp_path, pause=20 * 60, warm_start=True)
    assert after_break(path, cache_system_survival_seconds=10 * 60)["read"] == 0
    assert after_break(path, cache_system_survival_seconds=0)["read"] == 0
    assert after_break(path, cache_system_survival_seconds=30 * 60)["read"] > 0


def test_within_the_ttl_the_rule_changes_nothing(tmp_path):
    path = session(tmp_path, pause=60, warm_start=True)
    with_rule = after_break(path)
    without = after_break(path, cache_system_survival_seconds=0)
    assert with_rule["reason"] == without["reason"] == "hit"
    assert with_rule["read"] == without["read"] > WARM


def test_a_compaction_call_after_a_break_reads_the_system_prompt_only_where_it_survives(
    tmp_path,
):
    """The compaction call is billed by the same rule as the requests: a cold-started thread's
    call after a break writes its whole context."""

    def calls(warm_start: bool) -> list[dict[str, Any]]:
        b = TranscriptBuilder()
        for n in range(30):
            # every turn starts more than five minutes after the last response
            b.prompt(f"step {n}", seconds=400)
            b.tool_call("Read", {"file_path": f"/src/f{n}.py"}, "code line\n" * 1200, grow=4000)
            b.assistant([{"type": "text", "text": f"done {n}"}], grow=50)
        if not warm_start:
            first = next(r for r in b.records if r["type"] == "assistant")
            usage = first["message"]["usage"]
            usage["cache_creation_input_tokens"] += usage["cache_read_input_tokens"]
            usage["cache_read_input_tokens"] = 0
        result = run(tmp_path, b, "whatif", **SMALL_WINDOW)
        found = [
            e["call"]
            for r in result["requests"]
            if r["turn_start"]
            for e in r["events"]
            if e["step"] == "autocompact" and e["action"] == "compacted"
        ]
        assert found
        return found

    assert all(c["cache"] == "cold" and c["read"] > 0 for c in calls(warm_start=True))
    assert all(c["cache"] == "cold" and c["read"] == 0 for c in calls(warm_start=False))
