"""``bench/truth.py --fidelity-doc``: the figures per Claude Code version band and model."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.fidelity_doc import version_band
from tests.conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[2]
FILES = [
    "Brads3290__cclogviewer__example.jsonl",  # 1.0.61, opus-4 and sonnet-4
    "entireio__cli__9f_d2fc39aa5f_0_full.jsonl",  # 2.0.64, opus-4-5
    "entireio__cli__c9_883595c929_0_full.jsonl",  # 2.0.74, opus-4-5
]


@pytest.mark.parametrize(
    ("version", "band"),
    [
        ("1.0.61", "1.x and older"),
        ("2.0.64", "2.0.x"),
        ("2.1.0", "2.1.0–2.1.39"),
        ("2.1.39", "2.1.0–2.1.39"),
        ("2.1.42", "2.1.40–2.1.79"),
        ("2.1.143", "2.1.80–2.1.199"),
        ("2.1.227", "2.1.200 and later"),
        ("3.0.1", "2.1.200 and later"),
        (None, "unknown"),
        ("2.x", "unknown"),
    ],
)
def test_versions_fall_in_their_band(version, band):
    assert version_band(version) == band


@pytest.mark.slow
def test_truth_writes_the_page_with_the_sessions_behind_each_figure(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in FILES:
        shutil.copy(FIXTURES / name, corpus / name)
    doc = tmp_path / "fidelity.md"
    figures = tmp_path / "truth.json"
    proc = subprocess.run(
        [
            sys.executable,
            "bench/truth.py",
            "--quick",
            "--fidelity-doc",
            str(doc),
            "--json",
            str(figures),
        ],
        cwd=ROOT,
        env={"CONTEXTLAB_CORPUS": str(corpus), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "forecast 0.2 tokens median (≤ 2.5 %)" in proc.stdout
    page = doc.read_text()
    rows = {line.split(" | ")[0].strip("| "): line for line in page.splitlines()}
    # two 2.0.x sessions and one 1.x session, each group with its count of sessions
    assert rows["2.0.x"].split(" | ")[1] == "2"
    assert rows["1.x and older"].split(" | ")[1] == "1"
    assert rows["opus-4-5"].split(" | ")[1] == "2"
    assert rows["2.0.x · opus-4-5"].split(" | ")[1] == "2"
    assert all(name[:60] in page for name in FILES)
    whole = json.loads(figures.read_text())["whole"]
    assert whole["files"] == 3
    assert whole["forecast_requests"] > 0
    assert whole["forecast_median"] is not None
