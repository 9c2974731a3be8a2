"""LLM summaries for what-if runs: one task per summary, cached, capped, failures visible.

The backend is the real Anthropic SDK talking to the stub server on loopback (tests/llm_stub.py).
Tasks are called directly here; tests/summaries/test_integration.py runs them on a real worker.
"""

from __future__ import annotations

import pytest

from contextlab import engine
from contextlab.runs import runner as run_runner
from contextlab.runs.models import Run, RunResult
from contextlab.summaries import runner, services
from contextlab.summaries.models import RunSummarizer, SummaryEntry
from tests.engine.conftest import ANTHROPIC_TEST_KEY
from tests.engine.test_pipeline import SMALL_WINDOW, long_session

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

SUMMARY = "<analysis>thinking it over</analysis><summary>1. Primary Request and Intent: keep going</summary>"


@pytest.fixture
def transcript(make_transcript, tmp_path):
    return make_transcript(long_session(30).write(tmp_path / "long.jsonl"))


def whatif_run(transcript, **summarizer):
    config = engine.get_preset("claude-code-2.1.88").replace(**SMALL_WINDOW)
    run = Run.objects.create(
        owner=transcript.owner,
        transcript=transcript,
        mode=Run.Mode.WHATIF,
        preset="claude-code-2.1.88",
        resolved_preset="claude-code-2.1.88",
        overrides=dict(SMALL_WINDOW),
        config=config.to_dict(),
    )
    services.configure_run(run=run, **summarizer)
    return run


def drive(run_id, django_capture_on_commit_callbacks, limit=30):
    """Replay, fetch the summary it asks for, replay again… until the run is finished."""
    for _ in range(limit):
        with django_capture_on_commit_callbacks(execute=False):
            run_runner.execute_run(run_id)
        run = Run.objects.get(pk=run_id)
        if run.status in (Run.Status.DONE, Run.Status.FAILED):
            return run
        with django_capture_on_commit_callbacks(execute=False):
            runner.fetch_summary(run_id)
    raise AssertionError("run did not finish")


def test_summaries_come_from_the_backend_one_call_each(
    transcript, llm_stub, django_capture_on_commit_callbacks
):
    for _ in range(10):
        llm_stub.ok(SUMMARY, input_tokens=30_000, output_tokens=900)
    run = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
    run = drive(run.pk, django_capture_on_commit_callbacks)
    assert run.status == Run.Status.DONE, run.error
    data = RunResult.objects.get(run=run).data
    summaries = [
        s for s in data["summaries"] if s.get("kind", "summary") == "summary" or s.get("backend")
    ]
    assert summaries
    assert all(s["backend"] == "anthropic" for s in summaries)
    texts = [s["text"] for s in data["views"]["synthetic"] if s["kind"] == "summary"]
    assert all(
        "Primary Request and Intent: keep going" in t and "thinking it over" not in t for t in texts
    )
    assert len(llm_stub.requests) == len(texts) == SummaryEntry.objects.count()
    settings = RunSummarizer.objects.get(run=run)
    assert settings.calls == len(texts)
    assert settings.spent_usd > 0


def test_rerunning_the_same_whatif_makes_no_summary_call(
    transcript, llm_stub, django_capture_on_commit_callbacks
):
    for _ in range(10):
        llm_stub.ok(SUMMARY)
    first = drive(
        whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6").pk,
        django_capture_on_commit_callbacks,
    )
    calls = len(llm_stub.requests)
    second = drive(
        whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6").pk,
        django_capture_on_commit_callbacks,
    )
    assert first.status == second.status == Run.Status.DONE
    assert len(llm_stub.requests) == calls  # all cached
    assert (
        RunResult.objects.get(run=second).data["summaries"]
        == RunResult.objects.get(run=first).data["summaries"]
    )


def test_spend_cap_stops_the_run_with_a_message(
    transcript, llm_stub, django_capture_on_commit_callbacks
):
    llm_stub.ok(SUMMARY)
    run = drive(
        whatif_run(
            transcript, backend="anthropic", model="claude-sonnet-4-6", spend_cap_usd=0.001
        ).pk,
        django_capture_on_commit_callbacks,
    )
    assert run.status == Run.Status.FAILED
    assert "spend cap is $0.00" in run.error
    assert llm_stub.requests == []  # stopped before the call


def test_a_failing_backend_falls_back_visibly_and_trips_the_breaker(
    transcript, llm_stub, django_capture_on_commit_callbacks, monkeypatch
):
    monkeypatch.setattr("time.sleep", lambda s: None)
    for _ in range(40):
        llm_stub.server_error(500)
    run = drive(
        whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6").pk,
        django_capture_on_commit_callbacks,
    )
    assert run.status == Run.Status.DONE, run.error
    data = RunResult.objects.get(run=run).data
    reasons = [
        s.get("fallback_reason") for s in data["views"]["synthetic"] if s["kind"] == "summary"
    ]
    assert reasons
    assert all(r for r in reasons)
    assert len(reasons) > 3
    assert not any("circuit breaker" in r for r in reasons[:3])
    assert all("circuit breaker" in r for r in reasons[3:])
    assert (
        len(llm_stub.requests) == 3 * 5
    )  # three attempts (each 1 + 4 retries), then no more calls
    assert SummaryEntry.objects.count() == 0  # fallbacks are never cached as the backend's
    assert ANTHROPIC_TEST_KEY not in str(data)


def test_invalid_summarizer_settings_name_the_field(transcript):
    run = Run.objects.filter(transcript=transcript).first()
    with pytest.raises(services.SummarizerConfigError) as info:
        services.configure_run(run=run, backend="gpt-magic")
    assert info.value.field == "summarizer"
    with pytest.raises(services.SummarizerConfigError) as info:
        services.configure_run(run=run, backend="openai")
    assert info.value.field == "summary_model"
    with pytest.raises(services.SummarizerConfigError) as info:
        services.configure_run(run=run, backend="anthropic", spend_cap_usd=-1)
    assert info.value.field == "spend_cap_usd"


def test_a_waiting_run_resumes_from_its_checkpoint_instead_of_replaying(
    transcript, llm_stub, django_capture_on_commit_callbacks, monkeypatch
):
    for _ in range(10):
        llm_stub.ok(SUMMARY)
    calls = {"replay": 0, "resume": 0}
    real_replay, real_resume = engine.replay, engine.resume

    def replay(*args, **kwargs):
        calls["replay"] += 1
        return real_replay(*args, **kwargs)

    def resume(*args, **kwargs):
        calls["resume"] += 1
        return real_resume(*args, **kwargs)

    monkeypatch.setattr(engine, "replay", replay)
    monkeypatch.setattr(engine, "resume", resume)
    run = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
    run = drive(run.pk, django_capture_on_commit_callbacks)
    assert run.status == Run.Status.DONE, run.error
    assert calls["replay"] == 1  # the session was replayed once, then resumed at each summary
    assert calls["resume"] == len(llm_stub.requests) >= 1
    assert not services.checkpoint_path(run).exists()
