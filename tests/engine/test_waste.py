"""Waste findings and compact-now-or-wait (``engine.waste_findings``, ``engine.idle_compaction``)
on the synthetic sessions of ``tests/waste_sessions.py``: each finding is found, and the near
miss beside it is not; then on a real corpus session."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine import as_result
from tests import waste_sessions
from tests.conftest import corpus_path
from tests.engine.builders import TranscriptBuilder

PRICES = engine.load_pricing()


def replay(tmp_path: Path, b: TranscriptBuilder) -> tuple[dict[str, Any], dict[str, Any]]:
    session = engine.load_session(str(b.write(tmp_path / "t.jsonl")))
    config, preset = engine.resolve_config("auto", version=session.version)
    result = engine.replay(session, config, mode="recorded", preset_name=preset).to_json()
    return result, engine.expand_messages(engine.messages_json(session))


@pytest.fixture(scope="module")
def wasteful(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    return replay(tmp_path_factory.mktemp("wasteful"), waste_sessions.wasteful())


@pytest.fixture(scope="module")
def tidy(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    return replay(tmp_path_factory.mktemp("tidy"), waste_sessions.tidy())


def of_kind(report: engine.WasteReport, kind: str) -> list[Any]:
    return [f for f in report["findings"] if f["kind"] == kind]


def test_the_committed_fixtures_are_what_the_generator_writes(tmp_path):
    for written in waste_sessions.write_fixtures(tmp_path):
        committed = waste_sessions.FIXTURES / written.name
        assert committed.read_text(encoding="utf-8") == written.read_text(encoding="utf-8")


def test_a_tidy_session_has_no_finding_and_says_the_tools_are_not_recorded(tidy):
    report = engine.waste_findings(as_result(tidy[0]), tidy[1])
    assert report["findings"] == []
    assert report["total_cost_usd"] == 0
    assert report["tool_definitions"] is None
    note = next(k["note"] for k in report["kinds"] if k["kind"] == "unused_tools")
    assert "does not record the tool definitions" in note
    assert "4 tools called" in note
    assert report["tools_called"] == ["Bash", "Edit", "Grep", "Read"]  # named, not guessed


def test_a_file_read_again_unchanged_is_found_and_not_one_edited_between(wasteful):
    result, messages = wasteful
    report = engine.waste_findings(as_result(result), messages)
    (found,) = of_kind(report, "reread")
    assert found["text"].startswith("/work/project/report.py")
    # parser.py was read again after an edit, and at another offset: not listed
    assert all("parser.py" not in f["text"] for f in report["findings"])
    first, again = found["requests"]
    assert first < again
    assert found["request_roles"] == ["read first by", "read again by"]
    rows = result["requests"]
    assert rows[again]["view"]["end"] > 0
    assert found["cost_usd"] > 0
    assert "2.1.100" in found["fix"]


def test_an_oversized_output_later_cleared_costs_what_it_paid_while_it_stayed(wasteful):
    result, messages = wasteful
    report = engine.waste_findings(as_result(result), messages)
    (found,) = of_kind(report, "cleared_output")  # the small cleared `ls` output is not listed
    assert found["text"].startswith("Bash output")
    assert found["tokens"] >= 4_000
    start, cleared = found["requests"]
    rows = result["requests"]
    assert any(e["step"] == "microcompact" for e in rows[cleared]["events"])
    held = cleared - start  # written once, then read at each later request it stayed
    price, _, _ = PRICES.price_for(rows[start]["model"])
    expected = found["tokens"] * (price.cache_write_5m + (held - 1) * price.cache_read) / 1e6
    assert found["cost_usd"] == pytest.approx(expected, rel=1e-4)
    assert "BASH_MAX_OUTPUT_LENGTH" in found["fix"]


def test_a_result_no_later_response_uses_is_found_and_a_used_one_is_not(wasteful):
    report = engine.waste_findings(as_result(wasteful[0]), wasteful[1])
    unused = of_kind(report, "unused_result")
    assert [f["text"].split()[0] for f in unused] == ["Grep"]
    # the "useful" grep is named by a later response; the Bash output and the reads are small
    # or referred to
    messages = wasteful[1]["main"]
    grep_results = [
        b["text"]
        for m in messages
        for b in m["blocks"]
        if b.get("tool_name") == "Grep" and b["type"] == "tool_result"
    ]
    assert len(grep_results) == 2
    assert unused[0]["tokens"] >= 1_000


def test_tools_defined_but_never_called_are_named_with_their_cost(wasteful):
    result, messages = wasteful
    report = engine.waste_findings(as_result(result), messages)
    found = of_kind(report, "unused_tools")
    assert sorted(f["text"].split()[0] for f in found) == waste_sessions.NEVER_CALLED
    assert report["tool_definitions"] == sorted(waste_sessions.DEFINED_TOOLS)
    rows = result["requests"]
    for f in found:
        price, _, _ = PRICES.price_for(rows[0]["model"])
        expected = f["tokens"] * (price.cache_write_5m + (len(rows) - 1) * price.cache_read) / 1e6
        assert f["cost_usd"] == pytest.approx(expected, rel=1e-4)
    mcp = next(f for f in found if f["text"].startswith("mcp__"))
    assert ".mcp.json" in mcp["fix"]


def _premium(rows: list[Any]) -> float:
    """The 1-hour cache's premium on every recorded 5-minute write."""
    total = 0.0
    for row in rows:
        price, _, _ = PRICES.price_for(row["model"])
        total += row["cache"]["write"] * (price.cache_write_1h - price.cache_write_5m)
    return total / 1e6


def test_cache_breaks_after_pauses_of_5_to_60_minutes_are_found_not_after_2_hours(wasteful):
    result, messages = wasteful
    report = engine.waste_findings(as_result(result), messages)
    found = of_kind(report, "cache_break")
    rows = result["requests"]
    gaps = engine.gaps(rows)
    assert len(found) == 4
    for f in found:
        before, after = f["requests"]
        assert 300 < gaps[after] <= 3600
        missed = (
            sum(rows[before]["cache"][k] for k in ("read", "write", "uncached"))
            - rows[after]["cache"]["read"]
        )
        price, _, _ = PRICES.price_for(rows[after]["model"])
        expected = missed * (price.cache_write_5m - price.cache_read) / 1e6
        assert f["cost_usd"] == pytest.approx(expected, rel=1e-3)
        assert "promptCacheTtl" in f["fix"]
        assert "ENABLE_PROMPT_CACHING_1H" in f["fix"]
    # the 2-hour pause also missed, but no TTL keeps an entry that long
    long = next(n for n, g in enumerate(gaps) if g and g > 3600)
    assert not rows[long]["cache"]["hit"]
    assert all(long not in f["requests"][-1:] for f in found)
    # the misses avoided outweigh the premium on every write: the setting pays
    avoided = sum(f["cost_usd"] for f in found)
    assert avoided > _premium(rows)
    note = next(k["note"] for k in report["kinds"] if k["kind"] == "cache_break")
    assert f"it pays (${avoided - _premium(rows):.4f} net)" in note


def test_a_break_the_premium_outweighs_says_to_keep_the_5_minute_cache(tmp_path):
    result, messages = replay(tmp_path, waste_sessions.one_break())
    report = engine.waste_findings(as_result(result), messages)
    (found,) = of_kind(report, "cache_break")
    assert found["cost_usd"] < _premium(result["requests"])
    assert "keep the 5-minute cache" in found["fix"]
    note = next(k["note"] for k in report["kinds"] if k["kind"] == "cache_break")
    assert note.endswith("it does not pay here.")


def test_a_one_hour_session_has_no_cache_break_to_avoid(tmp_path):
    b = waste_sessions.wasteful()
    for rec in b.records:
        usage = (rec.get("message") or {}).get("usage")
        if usage and "cache_creation" in usage:
            written = usage["cache_creation"]["ephemeral_5m_input_tokens"]
            usage["cache_creation"] = {
                "ephemeral_5m_input_tokens": 0,
                "ephemeral_1h_input_tokens": written,
            }
    result, messages = replay(tmp_path, b)
    assert {r["ttl"] for r in result["requests"]} == {"1h"}
    report = engine.waste_findings(as_result(result), messages)
    assert of_kind(report, "cache_break") == []


def test_idle_gaps_longer_than_the_ttl_are_priced_both_ways(wasteful):
    result = as_result(wasteful[0])
    answer = engine.idle_compaction(result)
    gaps = engine.gaps(result["requests"])
    assert [g["request"] for g in answer["gaps"]] == [
        n for n, g in enumerate(gaps) if g and g > 300
    ]
    *short, long = answer["gaps"]
    assert len(short) == 4  # the four 10–16 minute pauses
    assert all(g["one_hour_keeps_it"] for g in short)
    assert not long["one_hour_keeps_it"]
    for g in answer["gaps"]:
        assert g["saving_usd"] == pytest.approx(
            g["paid_usd"]
            - g["summary_call_usd"]
            - g["smaller_prompt_usd"]
            + g["later_reads_saved_usd"],
            abs=2e-6,
        )
    assert not answer["sizes_recorded"]  # the session never compacted: sizes assumed
    # each pause's later reads stop at the next pause: the pauses' figures add up
    for g, following in zip(answer["gaps"], answer["gaps"][1:], strict=False):
        assert g["request"] + g["later_requests"] < following["request"]
    assert answer["best_saving_usd"] == pytest.approx(
        sum(g["saving_usd"] for g in answer["gaps"] if g["saving_usd"] > 0)
    )
    assert answer["saving_usd"] == pytest.approx(sum(g["saving_usd"] for g in answer["gaps"]))
    assert engine.idle_compaction(as_result(replay_tidy_result(wasteful)))["gaps"] == []


def replay_tidy_result(wasteful: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, Any]:
    """The wasteful result with every timestamp one second apart: no idle gap left."""
    result = dict(wasteful[0])
    rows = []
    for n, row in enumerate(result["requests"]):
        rows.append({**row, "timestamp": f"2026-02-01T12:00:{n:02d}.000Z"})
    result["requests"] = rows
    return result


def test_compacting_at_a_long_pause_wins_when_a_big_context_goes_on_for_long(tmp_path):
    b = TranscriptBuilder(version="2.1.300")
    b.prompt("Start.")
    b.assistant([{"type": "text", "text": "Reading."}], grow=50)
    b.tool_call("Read", {"file_path": "/big.py"}, "x = 1\n" * 20000, grow=140_000)
    b.prompt("After lunch.", seconds=7200)
    b.assistant(
        [{"type": "text", "text": "Back."}],
        usage={**waste_sessions._usage(3000, b.usage_total - 3000)},
    )
    for n in range(40):
        b.assistant([{"type": "text", "text": f"Step {n}."}], grow=100)
    result, _ = replay(tmp_path, b)
    answer = engine.idle_compaction(as_result(result))
    (gap,) = answer["gaps"]
    assert gap["later_requests"] == 40
    assert gap["saving_usd"] > 0
    assert answer["compact_wins"] == 1
    assert answer["verdict"].startswith("Compacting at every pause saves")


@pytest.mark.slow
def test_a_corpus_session_cache_breaks_and_findings_hold_together():
    path = corpus_path("entireio__cli__a7_e6172c3842_0_full.jsonl")
    session = engine.load_session(str(path))
    config, preset = engine.resolve_config("auto", version=session.version)
    result = engine.replay(session, config, mode="recorded", preset_name=preset).to_json()
    report = engine.waste_findings(
        as_result(result), engine.expand_messages(engine.messages_json(session))
    )
    rows = result["requests"]
    gaps = engine.gaps(rows)
    breaks = of_kind(report, "cache_break")
    assert breaks, "this session has recorded misses after 5–60 minute pauses"
    for f in breaks:
        after = f["requests"][-1]
        assert 300 < gaps[after] <= 3600
        assert rows[after]["cache"]["source"] == "recorded"
        assert not rows[after]["cache"]["hit"]
    for f in report["findings"]:
        assert len(f["request_roles"]) == len(f["requests"])
        assert all(0 <= i < len(rows) for i in f["requests"])
        assert f["cost_usd"] >= 0
    assert report["total_cost_usd"] == pytest.approx(
        sum(f["cost_usd"] for f in report["findings"]), abs=1e-5
    )
    assert report["total_cost_usd"] < result["summary"]["session_cost_usd"]
    assert report["tool_definitions"] is None  # this version records no prompt snapshot


def test_every_setting_a_fix_names_is_in_the_versions_doc(wasteful):
    """A fix names only real Claude Code settings: each with its source in the versions doc."""
    from contextlab.engine.results import waste

    doc = (Path(__file__).resolve().parents[2] / "docs" / "claude-code-versions.md").read_text(
        encoding="utf-8"
    )
    report = engine.waste_findings(as_result(wasteful[0]), wasteful[1])
    fixes = [f["fix"] for f in report["findings"]]
    fixes += [waste._output_fix(tool) for tool in ("Bash", "mcp__x__y", "Read", "Grep", "Other")]
    names = {n for fix in fixes for n in re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", fix)}
    names |= {n for fix in fixes for n in re.findall(r'"([a-z]+[A-Z][A-Za-z]+)"', fix)}
    assert {"BASH_MAX_OUTPUT_LENGTH", "MAX_MCP_OUTPUT_TOKENS", "promptCacheTtl"} <= names
    for name in names:
        assert f"`{name}`" in doc, name


@pytest.mark.parametrize(("responses", "listed"), [(2, False), (3, True)])
def test_an_unused_result_needs_enough_later_responses_to_judge_by(tmp_path, responses, listed):
    b = TranscriptBuilder(version="2.1.300")
    b.prompt("Search.")
    b.tool_call("Grep", {"pattern": "x"}, waste_sessions._grep_output("stale", 150), grow=50)
    for n in range(responses):  # the recorded prompt grows by the result once, as it would
        b.assistant([{"type": "text", "text": f"Step {n}."}], grow=3000 if n == 0 else 50)
    result, messages = replay(tmp_path, b)
    report = engine.waste_findings(as_result(result), messages)
    assert bool(of_kind(report, "unused_result")) is listed


@pytest.mark.parametrize("source", ["wasteful", "corpus"])
def test_findings_from_rows_that_read_texts_back_equal_those_from_rows_holding_them(
    tmp_path, source
):
    """The worker works the findings out from rows whose texts are read back from the session
    when asked for (``texts_on_read``), not held all at once: the same findings."""
    if source == "wasteful":
        path = waste_sessions.wasteful().write(tmp_path / "t.jsonl")
    else:
        # re-reads and unused results, both found by comparing texts
        path = corpus_path("marot__spotter__8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")
    session = engine.load_session(str(path))
    config, preset = engine.resolve_config("auto", version=session.version)
    result = as_result(
        engine.replay(session, config, mode="recorded", preset_name=preset).to_json()
    )
    held = engine.expand_messages(engine.messages_json(session))
    on_read = engine.expand_messages(
        engine.messages_json(session, include_texts=False, texts_on_read=True)
    )
    block = next(b for rows in on_read.values() for row in rows for b in row["blocks"])
    assert "text" not in block
    assert isinstance(block.get("text"), str)
    assert block.get("absent", 7) == 7
    report = engine.waste_findings(result, held)
    assert report["findings"]
    assert engine.waste_findings(result, on_read) == report
