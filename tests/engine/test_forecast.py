"""Forecast (``--usage-until F``): later requests are estimated, never read off the recording.

Proved the way the issue asks: the same transcript with the later records' usage numbers (and
compaction counts) rewritten gives the very same output, while a replay that reads every
figure (F = 1) does change with them.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.results.usage_fidelity import estimate_of
from tests.conftest import FIXTURES
from tests.engine.builders import TranscriptBuilder
from tests.engine.test_cli import cli

SOURCE = FIXTURES / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl"


def _later_ids(records: list[dict[str, Any]], share: float) -> set[str]:
    """Message ids of the main chain's requests after the first ``share`` of them."""
    ids: list[str] = []
    for rec in records:
        mid = rec.get("message", {}).get("id") if rec.get("type") == "assistant" else None
        if mid and mid not in ids:
            ids.append(mid)
    return set(ids[math.ceil(share * len(ids)) :])


def _alter(records: list[dict[str, Any]], share: float) -> int:
    """Rewrite the usage of every later request and every later compaction's counts in place;
    how many records changed."""
    later = _later_ids(records, share)
    changed = 0
    seen_later = False
    for rec in records:
        message = rec.get("message") if isinstance(rec.get("message"), dict) else {}
        if rec.get("type") == "assistant" and message.get("id") in later:
            seen_later = True
            usage = message["usage"]
            usage["input_tokens"] = usage.get("input_tokens", 0) * 3 + 7
            usage["cache_read_input_tokens"] = usage.get("cache_read_input_tokens", 0) // 2
            usage["cache_creation_input_tokens"] = (
                usage.get("cache_creation_input_tokens", 0) * 2 + 11
            )
            usage["output_tokens"] = usage.get("output_tokens", 0) * 4 + 1
            usage.pop("cache_creation", None)
            changed += 1
        elif seen_later and isinstance(rec.get("compactMetadata"), dict):
            rec["compactMetadata"]["preTokens"] = rec["compactMetadata"]["preTokens"] * 2 + 5
            changed += 1
    return changed


def _copies(tmp_path: Path, records: list[dict[str, Any]], share: float) -> tuple[Path, Path]:
    """The transcript as recorded and with its later figures altered, under the same name."""
    name = "session.jsonl"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    original = tmp_path / "a" / name
    original.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert _alter(records, share) > 0
    altered = tmp_path / "b" / name
    altered.write_text("".join(json.dumps(r) + "\n" for r in records))
    return original, altered


def _json(path: Path, *args: str) -> dict[str, Any]:
    proc = cli("replay", str(path), "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_the_cli_prints_the_same_for_later_requests_whatever_they_recorded(tmp_path):
    records = [json.loads(line) for line in SOURCE.read_text().splitlines() if line.strip()]
    original, altered = _copies(tmp_path, records, 0.3)
    a = _json(original, "--usage-until", "0.3")
    b = _json(altered, "--usage-until", "0.3")
    assert a["session"]["usage_until"] == 0.3
    rows = a["requests"]
    keep = math.ceil(0.3 * len(rows))
    assert all(r["recorded"] is not None for r in rows[:keep])
    later = rows[keep:]
    assert later
    assert all(r["recorded"] is None for r in later)
    # estimated in the same fields: a prompt, a cache split adding up to it, a cost with output
    for r in later:
        assert r["model_tokens"] > 0
        assert r["decision_tokens"] > 0
        cache = estimate_of(r)
        assert cache["read"] + cache["write"] + cache["uncached"] == r["model_tokens"]
        assert r["cost_usd"] > 0
    assert a == b
    # the check can fail: reading every figure, the altered file replays differently
    full_a, full_b = _json(original), _json(altered)
    assert full_a["session"]["usage_until"] == 1
    assert [r["recorded"] for r in full_a["requests"]] != [
        r["recorded"] for r in full_b["requests"]
    ]
    assert full_a["summary"]["cost_usd"] != full_b["summary"]["cost_usd"]


def _compacting(b: TranscriptBuilder) -> TranscriptBuilder:
    b.prompt("start")
    for n in range(6):
        b.tool_call("Bash", {"command": f"cat part{n}"}, f"line {n}\n" * 400)
    b.assistant([{"type": "text", "text": "first half done"}])
    b.compact("Summary: the parts were read.", pre_tokens=160_000)
    b.prompt("go on")
    for n in range(6):
        b.tool_call("Bash", {"command": f"cat more{n}"}, f"more {n}\n" * 300)
    b.assistant([{"type": "text", "text": "done"}])
    return b


@pytest.mark.parametrize("mode", ["recorded", "whatif"])
def test_the_engine_option_reads_no_later_compaction_count(tmp_path, mode):
    records = _compacting(TranscriptBuilder()).records
    original, altered = _copies(tmp_path, records, 0.25)
    results = []
    for path in (original, altered):
        session = engine.load_session(str(path))
        config, preset = engine.resolve_config("claude-code-2.1.88")
        results.append(
            engine.replay(
                session, config, mode=mode, preset_name=preset, usage_until=0.25
            ).to_json()
        )
    assert results[0] == results[1]
    events = [e for r in results[0]["requests"] for e in r["events"] if e["step"] == "autocompact"]
    if mode == "recorded":
        # the recorded compaction is still there, its count left out
        assert events
        assert all(e.get("pre_tokens") is None for e in events)


def test_a_forecast_leaves_the_session_it_copies_as_it_was(tmp_path):
    session = engine.load_session(str(SOURCE))
    config, preset = engine.resolve_config("auto", version=session.version)
    before = engine.replay(session, config, preset_name=preset).to_json()
    forecast = engine.replay(session, config, preset_name=preset, usage_until=0.2).to_json()
    after = engine.replay(session, config, preset_name=preset).to_json()
    assert before == after
    assert forecast != before
    assert session.usage_until == 1


@pytest.mark.parametrize("value", ["0", "-0.5", "1.5", "nan", "inf", "abc", "", "0x1"])
def test_the_cli_refuses_a_share_outside_0_to_1(tmp_path, value):
    path = tmp_path / "s.jsonl"
    shutil.copy(SOURCE, path)
    proc = cli("replay", str(path), f"--usage-until={value}")
    assert proc.returncode == 64
    assert "error: --usage-until" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("value", [0, -1, 1.01, float("nan"), True, None, "half"])
def test_the_engine_refuses_a_share_outside_0_to_1(value):
    session = engine.load_session(str(SOURCE))
    config, _ = engine.resolve_config("auto", version=session.version)
    with pytest.raises(ValueError, match="usage_until"):
        engine.replay(session, config, usage_until=value)


@pytest.mark.slow
def test_fidelity_reports_what_users_act_on_and_the_forecast():
    proc = cli("fidelity", "--quiet", "--forecast", "0.2", "--json", str(SOURCE))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    (session,) = data["sessions"]
    assert session["prompt_median"] <= session["prompt_p90"]
    forecast = session["forecast"]
    n = data["overall"]["requests"]
    assert forecast["requests"] == n - math.ceil(0.2 * n)
    assert data["overall"]["forecast_prompt_median"] == statistics.median(forecast["prompt_errors"])
    table = cli("fidelity", "--quiet", "--forecast", "0.2", str(SOURCE))
    assert "forecast 0.2: " in table.stdout
    assert "as shown: prompt tokens median" in table.stdout
    bad = cli("fidelity", "--forecast", "0", str(SOURCE))
    assert bad.returncode == 64
    assert "error: --forecast" in bad.stderr


@pytest.mark.parametrize(("share", "limit"), [(0.5, 90.0), (0.8, 82.866), (1.0, 82.866)])
def test_a_codex_forecast_in_the_cli_resolves_the_sessions_own_config(share, limit):
    # the window Codex recorded, its preset and the limit its visible automatic compactions
    # show: what resolve_session_config gives for the forecast copy, never the Claude Code
    # version preset's 200k window
    path = FIXTURES / "codex" / "v0_104_desktop_remote_compaction.jsonl"
    proc = cli("replay", str(path), f"--usage-until={share}", "--json")
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)["session"]
    session = engine.load_session(str(path))
    copy = engine.forecast_session(session, share, engine.TiktokenCounter())
    config, preset = engine.resolve_session_config(copy)
    assert shown["preset"] == preset == "codex"
    assert shown["config"]["context_window"] == config.context_window == 258_400
    assert shown["config"]["autocompact_pct_override"] == config.autocompact_pct_override
    # the one automatic compaction (before request 3 of 5: the last call's 214,100 tokens and
    # the tool output after it, 214,125) sets the limit where the forecast reads it; the
    # preset's 90 % where it comes after the requests read
    assert config.autocompact_pct_override == pytest.approx(limit, abs=0.001)
    assert shown["usage_until"] == share


def test_the_fidelity_forecast_of_a_codex_rollout_replays_with_its_own_config():
    # ``fidelity --forecast`` resolved the copy's config from the Claude Code version alone: a
    # Codex rollout then replayed with Claude Code's preset and 200k window
    path = FIXTURES / "codex" / "v0_104_desktop_remote_compaction.jsonl"
    proc = cli("fidelity", "--quiet", "--forecast", "0.8", "--json", str(path))
    assert proc.returncode == 0, proc.stderr
    (figures,) = json.loads(proc.stdout)["sessions"]
    assert figures["forecast"]["preset"] == "codex"
    assert figures["forecast"]["context_window"] == 258_400
