"""The report's fidelity panel gives the same figures as ``contextlab fidelity``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contextlab.jobs import replay as runner
from tests.conftest import corpus_file, corpus_path

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media"), pytest.mark.slow]


def cli_fidelity(path: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "contextlab.engine.cli", "fidelity", "--json", "--quiet", path],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize(
    ("name", "committed"),
    [
        # committed, so a clone without the corpus still checks the equality: two inline
        # sidechains beside the main conversation (three fits)
        ("d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl", True),
        # main conversation and five sidechains: each thread is fitted on its own
        ("d-kimuson__claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl", False),
        # a /model switch: one fit per model
        ("marot__spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl", False),
        # an abandoned branch, whose rows sit among the main conversation's in the JSON
        ("recent/gmeligio__flutter-docker-image__01KZH768K678RAGNB3HG3CFDS2_1_full.jsonl", False),
    ],
)
def test_report_fidelity_equals_the_cli_for_the_same_session(
    alice_client, make_transcript, name, committed
):
    path = corpus_file(name) if committed else corpus_path(name)
    transcript = make_transcript(path)
    run = transcript.runs.get()
    assert run.mode == "recorded"
    runner.execute_run(run.pk)
    response = alice_client.get(f"/sessions/{transcript.pk}/?run={run.pk}")
    assert response.status_code == 200
    report = response.context["fidelity"]
    cli = cli_fidelity(str(path))
    overall = cli["overall"]
    assert report["requests"] == overall["requests"] > 0
    # exactly equal, not approximately: one computation, one percentile definition
    assert report["median_rel_error"] == overall["median_rel_error"]
    assert report["p90_rel_error"] == overall["p90_rel_error"]
    cli_threads = [{k: v for k, v in row.items() if k != "file"} for row in cli["threads"]]
    assert report["threads"] == cli_threads
    assert len(cli_threads) >= 2  # the session really has several fits to pool
    # and the page shows them
    html = response.content.decode()
    for key in ("median_rel_error", "p90_rel_error"):
        assert f">{overall[key] * 100:.1f}%<" in html
