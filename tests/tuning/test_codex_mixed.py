"""A/B comparisons on a mixed set: a Codex session beside a Claude Code one, each replayed with
its own agent's "auto" preset, the report adding both up."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextlab.runs.models import Run
from contextlab.tuning import configs as tuning_configs
from contextlab.tuning import reports as tuning_reports
from contextlab.tuning import services
from contextlab.tuning.models import ComparisonRun

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media"), pytest.mark.slow]

ROLLOUT = (
    Path(__file__).resolve().parents[1] / "fixtures" / "codex" / "v0_64_remote_compaction.jsonl"
)


def test_a_comparison_over_codex_and_claude_code_sessions(user, session, make_transcript, finish):
    codex = make_transcript(ROLLOUT)
    assert codex.agent == "codex"
    comparison = services.create_comparison(
        owner=user,
        transcripts=[session, codex],
        a=tuning_configs.ConfigSpec(preset="auto", overrides={}),
        b=tuning_configs.ConfigSpec(preset="auto", overrides={"tool_output_limit_chars": 1_000}),
    )
    finish()
    runs = {
        (item.run.transcript_id, item.side): item.run
        for item in ComparisonRun.objects.filter(comparison=comparison).select_related("run")
    }
    assert {r.status for r in runs.values()} == {Run.Status.DONE}
    assert runs[(codex.pk, "a")].resolved_preset == "codex"
    assert runs[(session.pk, "a")].resolved_preset != "codex"
    report = tuning_reports.comparison_report(comparison)
    assert report["status"] == "done"
    assert report["done_sessions"] == 2
    per_session = [p.a_measures for p in report["pairs"]]
    assert report["a"]["summary"]["requests"] == sum(m["requests"] for m in per_session)
    # the tool-output limit cuts what the Codex session's later calls see
    codex_pair = next(p for p in report["pairs"] if p.b_measures and p.transcript.pk == codex.pk)
    assert codex_pair.b_measures["peak_model_tokens"] < codex_pair.a_measures["peak_model_tokens"]
