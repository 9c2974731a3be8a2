"""The ``contextlab`` command, run as a user would run it (a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, corpus_path
from tests.engine.builders import TranscriptBuilder

pytestmark = pytest.mark.slow


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "contextlab.engine.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def sample(tmp_path: Path) -> Path:
    b = TranscriptBuilder()
    b.prompt("hello")
    b.tool_call("Bash", {"command": "ls"}, "a\nb")
    b.assistant([{"type": "text", "text": "done"}])
    return b.write(tmp_path / "s.jsonl")


def test_replay_prints_a_table(tmp_path):
    proc = cli("replay", str(sample(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert "calibration" in proc.stdout
    assert "requests 2, compactions 0" in proc.stdout


def test_replay_json_has_session_requests_summary(tmp_path):
    proc = cli(
        "replay", str(sample(tmp_path)), "--json", "--mode", "whatif", "--preset", "budget-on"
    )
    data = json.loads(proc.stdout)
    assert set(data) >= {"session", "requests", "summary"}
    assert data["session"]["mode"] == "whatif"
    assert data["session"]["preset"] == "budget-on"


def test_replay_json_is_labelled_with_the_result_version(tmp_path):
    from contextlab.engine import results

    data = json.loads(cli("replay", str(sample(tmp_path)), "--json").stdout)
    assert data["result_version"] == results.RESULT_VERSION
    # every object is exactly its declared shape (request rows: tests/runs/test_api.py)
    assert set(data) == set(results.ResultJson.__annotations__)
    assert set(data["session"]) == set(results.SessionInfo.__annotations__)
    assert set(data["session"]["threads"][0]) == set(results.ThreadInfo.__annotations__)
    assert set(data["session"]["calibration"]) == set(results.CalibrationJson.__annotations__)
    assert set(data["summary"]) == set(results.SessionSummary.__annotations__)
    assert set(data["views"]) == set(results.ViewLog.__annotations__)


def test_bad_lines_are_messages_and_the_rest_is_replayed(tmp_path):
    path = sample(tmp_path)
    path.write_text(path.read_text() + '{"broken": \n')
    proc = cli("replay", str(path))
    assert proc.returncode == 0
    assert "Traceback" not in proc.stderr
    assert "s.jsonl:5: not valid JSON" in proc.stderr


def test_unusable_file_exits_non_zero_with_one_clear_message(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("just some notes\n")
    proc = cli("replay", str(path))
    assert proc.returncode == 2
    assert "not a Claude Code transcript" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_invalid_config_file_names_the_field(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("autocompact_buffer_tokens = -5\n")
    proc = cli("replay", str(sample(tmp_path)), "--config", str(config))
    assert proc.returncode != 0
    assert "autocompact_buffer_tokens" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_preset_is_a_message(tmp_path):
    proc = cli("replay", str(sample(tmp_path)), "--preset", "warp-speed")
    assert proc.returncode != 0
    assert "warp-speed" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_fidelity_reports_the_three_measures():
    proc = cli(
        "fidelity",
        "--quiet",
        str(corpus_path("marot__spotter__8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")),
    )
    assert proc.returncode == 0, proc.stderr
    assert "fidelity:" in proc.stdout
    assert "cache:" in proc.stdout
    assert "compactions: 1 of 1" in proc.stdout


def test_fidelity_on_the_committed_fixtures():
    """The same command on two small real sessions committed under tests/fixtures/."""
    proc = cli(
        "fidelity",
        "--quiet",
        str(FIXTURES / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl"),
        str(FIXTURES / "Brads3290__cclogviewer__example.jsonl"),
    )
    assert proc.returncode == 0, proc.stderr
    assert "fidelity: 72 requests" in proc.stdout
    assert "cache:" in proc.stdout
    assert "compactions: 0 of 0" in proc.stdout


def test_json_output_is_the_same_under_any_hash_seed(tmp_path):
    """A session that switches models gets a calibration per model: listed in order of first
    use, never in a set's order (which follows PYTHONHASHSEED)."""
    b = TranscriptBuilder()
    models = ["claude-opus-4-6", "claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001"]
    for turn in range(9):
        b.prompt(f"step {turn}: " + "words " * (40 * turn + 10))
        b.assistant([{"type": "text", "text": "ok " * (30 + turn)}], model=models[turn % 3])
    path = b.write(tmp_path / "models.jsonl")
    outputs = set()
    for seed in ("1", "2", "3", "4"):
        proc = subprocess.run(
            [sys.executable, "-m", "contextlab.engine.cli", "replay", str(path), "--json"],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert proc.returncode == 0, proc.stderr
        outputs.add(proc.stdout)
    (output,) = outputs
    calibrations = json.loads(output)["session"]["threads"][0]["model_calibrations"]
    assert list(calibrations) == models
