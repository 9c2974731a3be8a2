"""LLM summaries for what-if runs: one task per summary, cached, capped, failures visible.

The backend is the real Anthropic SDK talking to the stub server on loopback (tests/llm_stub.py).
Tasks are called directly here; tests/summaries/test_integration.py runs them on a real worker.
"""

from __future__ import annotations

import json

import pytest

from contextlab import blobs, engine
from contextlab.jobs import lifecycle, tasks
from contextlab.jobs import summary_fetch as runner
from contextlab.jobs import tasks as run_tasks
from contextlab.runs.models import Run, RunResult
from contextlab.summaries import services
from contextlab.summaries.models import RunSummarizer, SummaryEntry
from tests.engine.conftest import ANTHROPIC_TEST_KEY
from tests.engine.test_pipeline import SMALL_WINDOW, long_session
from tests.llm_stub import Reply

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


def queued_fetches(callbacks):
    """The fetch tasks queued on commit: [(run id, summary key, countdown)]."""
    out = []
    for c in callbacks:
        if getattr(c, "func", None) == lifecycle.publish:
            c = c.args[0]  # sent through publish: the broker down keeps the run due
        func = getattr(c, "func", None)
        if func == tasks.fetch_summary.apply_async:
            out.append((*c.args[0], c.keywords.get("countdown") or 0))
        elif func == tasks.fetch_summary.delay:
            out.append((*c.args, 0))
    return out


def queued_fetch(callbacks):
    """The arguments of the one fetch task a replay queued (run id, summary key), at once."""
    ((run_id, key, countdown),) = queued_fetches(callbacks)
    assert countdown == 0
    return run_id, key


def run_fetch(args):
    """What the fetch task does with its message (JSON-encoded like it)."""
    tasks.fetch_summary.run(*json.loads(json.dumps(args)))


def run_replay(run_id):
    """What the replay task does with a run's message."""
    run_tasks.run_replay.run(run_id)


def drive(run_id, django_capture_on_commit_callbacks, limit=30):
    """Replay; then run the fetch task it queues (which replays on)… until the run is finished."""
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_replay(run_id)
    for _ in range(limit):
        run = Run.objects.get(pk=run_id)
        if run.status in (Run.Status.DONE, Run.Status.FAILED):
            return run
        args = queued_fetch(callbacks)
        assert RunSummarizer.objects.get(run=run).pending_key == args[1]
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            run_fetch(args)
    raise AssertionError("run did not finish")


@pytest.mark.slow
def test_summaries_come_from_the_backend_one_call_each(
    transcript, llm_stub, django_capture_on_commit_callbacks, monkeypatch
):
    for _ in range(10):
        llm_stub.ok(SUMMARY, input_tokens=30_000, output_tokens=900)
    run = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
    first_start = []

    real_claim = lifecycle.claim

    def claim(run_id, **kw):
        claimed = real_claim(run_id, **kw)
        first_start.append(Run.objects.get(pk=run_id).started_at)
        return claimed

    monkeypatch.setattr(lifecycle, "claim", claim)
    run = drive(run.pk, django_capture_on_commit_callbacks)
    first_start = first_start[0]
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
    # going on after a summary is not a new attempt, nor a new start
    assert run.attempts == 1
    assert run.started_at == first_start


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
    assert all(r.startswith("anthropic failed: HTTP 500 after 4 retries") for r in reasons[:3])
    assert not any("circuit breaker" in r for r in reasons[:2])
    # the third failure opens the worker's breaker, although each fetch built its own wrapper
    assert "circuit breaker open after 3 consecutive failures" in reasons[2]
    assert all("circuit breaker" in r for r in reasons[3:])
    # three calls of 5 requests each (1 + the SDK's 4 retries), then no more calls
    assert [r.retry_count for r in llm_stub.requests] == [0, 1, 2, 3, 4] * 3
    assert SummaryEntry.objects.count() == 0  # fallbacks are never cached as the backend's
    assert ANTHROPIC_TEST_KEY not in str(data)


def test_the_breaker_a_run_tripped_spares_the_next_run_on_the_same_worker(
    transcript, llm_stub, django_capture_on_commit_callbacks, monkeypatch
):
    """The breaker is the worker process's, per backend endpoint and model: a second run's
    first summary does not call a backend that just failed three times in a row (its own
    run-level count in the database is still 0)."""
    monkeypatch.setattr("time.sleep", lambda s: None)
    llm_stub.default = Reply("server_error", status=500)
    first = drive(
        whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6").pk,
        django_capture_on_commit_callbacks,
    )
    assert first.status == Run.Status.DONE, first.error
    calls = len(llm_stub.requests)
    assert calls == 3 * 5
    # the same summaries again: fallbacks are never stored, so each one is fetched anew
    second = drive(
        whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6").pk,
        django_capture_on_commit_callbacks,
    )
    assert second.status == Run.Status.DONE, second.error
    assert len(llm_stub.requests) == calls  # not one more call
    data = RunResult.objects.get(run=second).data
    reasons = [
        s.get("fallback_reason") for s in data["views"]["synthetic"] if s["kind"] == "summary"
    ]
    assert reasons
    assert reasons[0].startswith("anthropic not called: circuit breaker open after 3")


def test_one_summary_call_fits_in_the_worker_time_limit():
    """The SDK retries of one call cannot outlast the task's soft time limit."""
    from django.conf import settings

    for backend in ("anthropic", "openai"):
        worst = engine.LLMSettings(backend=backend).worst_case_seconds
        assert worst < settings.CELERY_TASK_SOFT_TIME_LIMIT


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
    assert not blobs.exists(lifecycle.checkpoint_name(run.pk))


def test_a_fetch_message_without_a_key_makes_the_replay_ask_again(
    transcript, llm_stub, django_capture_on_commit_callbacks
):
    """A message queued by an older version (run id only): nothing is called blindly, the
    replay runs on to the same summary and queues a fetch for it."""
    llm_stub.ok(SUMMARY)
    run = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_replay(run.pk)
    run_id, key = queued_fetch(callbacks)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_fetch([run_id])
    assert llm_stub.requests == []
    assert queued_fetch(callbacks) == (run_id, key)
    assert RunSummarizer.objects.get(run=run).pending_key == key


def test_fetches_of_a_stored_or_stale_summary_call_nothing(
    transcript, llm_stub, django_capture_on_commit_callbacks
):
    """Redelivered messages: the first fetch stored the summary (then its worker died), or the
    run already moved on to another summary."""
    for _ in range(20):
        llm_stub.ok(SUMMARY)
    run = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_replay(run.pk)
    first = queued_fetch(callbacks)
    SummaryEntry.objects.create(key=first[1], backend="anthropic", text="stored by the first fetch")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_fetch(first)
    assert llm_stub.requests == []  # stored: not fetched again, the replay went on past it
    second = queued_fetch(callbacks)
    assert second[1] != first[1]
    assert RunSummarizer.objects.get(run=run).pending_key == second[1]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_fetch(first)  # stale: the run waits for another summary now
    assert llm_stub.requests == []
    assert callbacks == []
    assert RunSummarizer.objects.get(run=run).pending_key == second[1]
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED


def test_the_fetch_task_rebuilds_the_request_and_sends_what_claude_code_would(
    transcript, llm_stub, django_capture_on_commit_callbacks
):
    """No request travels between tasks: the resumed replay rebuilds it. The prompt sent is
    the one the engine's own Anthropic summarizer sends for the same input."""
    llm_stub.ok(SUMMARY)
    run = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_replay(run.pk)
    args = queued_fetch(callbacks)
    assert len(json.dumps(args)) < 600  # the message names the summary; it does not carry it
    with django_capture_on_commit_callbacks(execute=False):
        run_fetch(args)
    (sent,) = llm_stub.requests
    session = engine.load_session(run.transcript.path)
    config = engine.PipelineConfig.from_dict(run.config)
    seen = []

    def lookup(key):
        seen.append(key)
        return None

    with pytest.raises(engine.SummaryPending) as pending:
        engine.replay(
            session,
            config,
            mode="whatif",
            summarizer=engine.StoredSummarizer("anthropic", "claude-sonnet-4-6", lookup),
        )
    assert pending.value.key == args[1]
    llm_stub.ok(SUMMARY)
    engine.make_summarizer("anthropic", "claude-sonnet-4-6").summarize(pending.value.request)
    assert llm_stub.requests[-1].body == sent.body


def test_two_runs_needing_the_same_summary_pay_for_it_once(
    transcript, llm_stub, django_capture_on_commit_callbacks
):
    """An A/B pair on two workers reaches the same compaction input at once: while A's fetch
    holds the lease and calls the backend, B waits (looks again later), and A's stored
    summary wakes B, which reads it instead of calling."""
    from django.utils import timezone

    from contextlab.summaries.models import SummaryLease

    for _ in range(20):
        llm_stub.ok(SUMMARY)
    a = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
    b = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_replay(a.pk)
        run_replay(b.pk)
    (_, key, _), (_, key_b, _) = queued_fetches(callbacks)
    assert key == key_b  # the same input, so the same summary
    # A's fetch task is calling the backend right now
    Run.objects.filter(pk=a.pk).update(status=Run.Status.RUNNING, heartbeat_at=timezone.now())
    SummaryLease.objects.create(key=key, run=a, taken_at=timezone.now())
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_fetch((b.pk, key))
    assert llm_stub.requests == []
    assert queued_fetches(callbacks) == [(b.pk, key, runner.LEASE_POLL_SECONDS)]
    assert Run.objects.get(pk=b.pk).status == Run.Status.QUEUED
    # A's call comes back: stored once, and B is woken
    Run.objects.filter(pk=a.pk).update(status=Run.Status.QUEUED)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_fetch((a.pk, key))
    assert len(llm_stub.requests) == 1
    assert not SummaryLease.objects.filter(key=key).exists()
    assert (b.pk, key, 0) in queued_fetches(callbacks)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_fetch((b.pk, key))
    assert len(llm_stub.requests) == 1  # B read A's summary
    assert RunSummarizer.objects.get(run=b).calls == 0
    assert RunSummarizer.objects.get(run=b).pending_key != key


@pytest.mark.slow
def test_a_lease_whose_run_stopped_is_taken_over(
    transcript, llm_stub, django_capture_on_commit_callbacks
):
    """The lease holder's worker died (its run no longer heartbeats): the next run calls."""
    from datetime import timedelta

    from django.utils import timezone

    from contextlab.summaries.models import SummaryLease

    llm_stub.ok(SUMMARY)
    a = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
    b = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_replay(b.pk)
    (_, key, _) = queued_fetches(callbacks)[0]
    long_ago = timezone.now() - timedelta(hours=1)
    Run.objects.filter(pk=a.pk).update(status=Run.Status.RUNNING, heartbeat_at=long_ago)
    SummaryLease.objects.create(key=key, run=a, taken_at=long_ago)
    with django_capture_on_commit_callbacks(execute=False):
        run_fetch((b.pk, key))
    assert len(llm_stub.requests) == 1
    assert SummaryEntry.objects.filter(key=key).exists()
    assert not SummaryLease.objects.exists()
