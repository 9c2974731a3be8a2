from __future__ import annotations

import pytest
from celery.exceptions import Retry, SoftTimeLimitExceeded
from django.db import OperationalError

from contextlab import engine
from contextlab.jobs import batches as runner
from contextlab.jobs import lifecycle, tasks
from contextlab.jobs import tasks as run_tasks
from contextlab.runs.models import Run
from contextlab.tuning import configs as tuning_configs
from contextlab.tuning import services


def test_task_calls_the_batch_runner_with_the_ids(monkeypatch):
    seen: list[list[int]] = []
    monkeypatch.setattr(runner, "execute_batch", lambda ids, **_: seen.append(ids))
    tasks.replay_batch([1, 2, 3])
    assert seen == [[1, 2, 3]]


def test_task_retries_transient_database_errors(monkeypatch):
    def flaky(run_ids, **_):
        raise OperationalError("connection refused")

    monkeypatch.setattr(runner, "execute_batch", flaky)
    monkeypatch.setattr(tasks.replay_batch, "retry", lambda *a, **k: (_ for _ in ()).throw(Retry()))
    with pytest.raises(Retry):
        tasks.replay_batch.apply(args=([1],), throw=True).get()


@pytest.mark.parametrize(
    "stop",
    [runner.BatchOutOfTime("batch stopped at run 7"), SoftTimeLimitExceeded()],
    ids=["inside-a-run", "between-runs"],
)
def test_a_batch_out_of_time_hands_the_rest_to_single_run_tasks(monkeypatch, stop):
    def slow(run_ids, **_):
        raise stop

    queued: list[int] = []
    monkeypatch.setattr(runner, "execute_batch", slow)
    monkeypatch.setattr(runner, "unstarted", lambda ids: ids[1:])
    monkeypatch.setattr(run_tasks.run_replay, "delay", queued.append)
    tasks.replay_batch([7, 8, 9])
    assert queued == [8, 9]


def test_task_options_suit_long_jobs():
    assert tasks.replay_batch.acks_late is True


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_media")
def test_a_failing_run_does_not_stop_the_batch(user, session, monkeypatch):
    sweep = services.create_sweep(
        owner=user,
        transcripts=[session],
        base=tuning_configs.ConfigSpec(),
        field_name="autocompact_pct_override",
        values=[30, 60],
    )
    ids = list(sweep.items.order_by("pk").values_list("run_id", flat=True))
    real = engine.replay
    calls = []

    def first_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "replay", first_fails)
    outcomes: list[lifecycle.Outcome] = []
    runner.execute_batch(ids, on_outcome=outcomes.append)
    first, second = (Run.objects.get(pk=i) for i in ids)
    assert [type(o) for o in outcomes] == [lifecycle.Failed, lifecycle.Done]
    assert first.status == "failed"
    assert "RuntimeError: boom" in first.error
    assert second.status == "done"
    assert runner.unstarted(ids) == []


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_media")
def test_a_batch_run_that_needs_an_llm_summary_waits_for_it_as_a_single_run_does(
    make_transcript, tmp_path, django_capture_on_commit_callbacks
):
    """The batch ends its runs as single runs end: a missing summary parks the run and queues
    its fetch task; it is not a failure."""
    from contextlab.summaries.models import RunSummarizer
    from tests.engine.test_pipeline import long_session
    from tests.summaries.test_runner import queued_fetch, whatif_run

    transcript = make_transcript(long_session(30).write(tmp_path / "long.jsonl"))
    run = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        tasks.replay_batch([run.pk])
    run.refresh_from_db()
    assert (run.status, run.error) == (Run.Status.QUEUED, "")
    run_id, key = queued_fetch(callbacks)
    assert run_id == run.pk
    assert RunSummarizer.objects.get(run=run).pending_key == key
