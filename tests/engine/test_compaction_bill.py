"""A compaction's own call is billed as Claude Code pays it, whoever wrote the summary.

The offline summarizer costs nothing to run, but the compaction it stands for is a real API
call: the whole context as input at its cache state, the summary as output.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextlab import engine
from tests.engine.builders import TranscriptBuilder
from tests.engine.test_cli import cli
from tests.engine.test_pipeline import SMALL_WINDOW, events, long_session, run


def _calls(result: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    found = [(i, e) for i, e in events(result, "autocompact") if e["action"] == "compacted"]
    assert found, "expected a compaction"
    return found


def test_an_offline_summary_is_billed_as_claude_codes_own_compaction_call(tmp_path):
    result = run(tmp_path, long_session(30), "whatif", **SMALL_WINDOW)
    rows = result["requests"]
    total = 0.0
    for index, event in _calls(result):
        call = event["call"]
        assert call["context_tokens"] == event["decision_tokens"]
        # the previous request was sent seconds before: its cached prompt is read
        previous = rows[index - 1]["model_tokens"]
        assert call["cache"] == "warm"
        assert call["read"] == min(previous, call["context_tokens"])
        assert call["write"] == call["context_tokens"] - call["read"]
        assert call["output"] > 0
        expected = engine.request_cost(
            rows[index]["model"],
            uncached=0,
            cache_read=call["read"],
            cache_write_5m=call["write"],
            cache_write_1h=0,
            output=call["output"],
        )
        assert call["cost_usd"] == pytest.approx(expected, abs=1e-6)
        total += call["cost_usd"]
    assert result["summary"]["compaction_call_cost_usd"] == pytest.approx(total, abs=1e-5)
    # what a comparison shows as the summaries' cost: no longer $0.00 for offline summaries
    measures = engine.compare.summary_measures(result)
    assert measures["summary_cost_usd"] == result["summary"]["compaction_call_cost_usd"] > 0
    # and the cost a comparison weighs includes those calls
    assert measures["cost_usd"] == pytest.approx(
        result["summary"]["estimate"]["cost_usd"] + total, abs=1e-5
    )


def test_a_whatif_that_compacts_more_pays_for_its_summary_calls(tmp_path):
    """Offline summaries are free to write, not to send: the what-if's cost against the
    recorded replay grows by the calls of the compactions it adds."""
    baseline = run(tmp_path, long_session(30))
    whatif = run(tmp_path, long_session(30), "whatif", **SMALL_WINDOW)
    added = whatif["summary"]["compaction_call_cost_usd"]
    assert added > 0
    assert whatif["summary"]["compactions"] > baseline["summary"]["compactions"]
    assert baseline["summary"]["compaction_call_cost_usd"] == 0
    cost = engine.compare.whatif_cost(whatif["summary"], baseline["summary"])
    requests_only = (
        whatif["summary"]["estimate"]["cost_usd"] - baseline["summary"]["estimate"]["cost_usd"]
    )
    assert cost["change_usd"] == pytest.approx(requests_only + added, abs=1e-5)
    assert cost["whatif_estimate_usd"] == pytest.approx(
        whatif["summary"]["estimate"]["cost_usd"] + added, abs=1e-5
    )


def test_a_compaction_kept_by_the_whatif_cancels_in_its_cost():
    """The same compaction call on both sides changes nothing; the band still measures the
    requests' estimate against their recorded cost."""
    baseline = {"cost_usd": 10.0, "estimate": {"cost_usd": 9.0}, "compaction_call_cost_usd": 0.4}
    whatif = {"cost_usd": 9.0, "estimate": {"cost_usd": 9.0}, "compaction_call_cost_usd": 0.4}
    cost = engine.compare.whatif_cost(whatif, baseline)
    assert cost["change_usd"] == pytest.approx(0.0)
    assert cost["cost_usd"] == pytest.approx(10.0)
    assert cost["band_share"] == pytest.approx(0.1)


@pytest.mark.slow
def test_the_replay_table_states_the_compaction_calls(tmp_path):
    path = long_session(30).write(tmp_path / "s.jsonl")
    config = tmp_path / "small.json"
    config.write_text(json.dumps({"context_window": 100_000}))
    proc = cli("replay", str(path), "--mode", "whatif", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("compaction calls $"))
    assert float(line.split("$")[1].split()[0]) > 0


def test_a_compaction_after_the_ttl_reads_only_the_system_prompt(tmp_path):
    b = TranscriptBuilder()
    for n in range(30):
        # every turn starts more than five minutes after the last response: the cache expired
        b.prompt(f"step {n}", seconds=400)
        b.tool_call("Read", {"file_path": f"/src/f{n}.py"}, "code line\n" * 1200, grow=4000)
        b.assistant([{"type": "text", "text": f"done {n}"}], grow=50)
    result = run(tmp_path, b, "whatif", **SMALL_WINDOW)
    checked = 0
    for index, event in _calls(result):
        call = event["call"]
        previous = result["requests"][index - 1]["model_tokens"]
        turn_start = result["requests"][index]["turn_start"]
        if not turn_start:
            continue
        assert call["cache"] == "cold"
        assert call["read"] < previous / 2
        assert call["write"] == call["context_tokens"] - call["read"]
        checked += 1
    assert checked


def test_a_recorded_compaction_is_billed_on_its_recorded_count(tmp_path):
    b = TranscriptBuilder()
    b.prompt("start")
    for n in range(4):
        b.tool_call("Bash", {"command": f"cat p{n}"}, f"line {n}\n" * 300)
    b.compact("Summary: the parts were read.", pre_tokens=150_000)
    b.prompt("go on")
    b.assistant([{"type": "text", "text": "done"}])
    result = run(tmp_path, b)
    ((_, event),) = _calls(result)
    assert event["call"]["context_tokens"] == 150_000
    assert event["call"]["output"] > 0
