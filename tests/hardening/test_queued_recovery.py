"""A queued run whose task was lost (a dropped message, a pool frozen after a kill -9) is sent
to the workers again by the recovery loop and by a page polling it; a run queued recently, or
parked for a summary recently, is left alone; one parked too long gets its summary's fetch
task again; each is sent again at most once per period."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

import pytest
from django.utils import timezone

from contextlab.jobs import tasks
from contextlab.runs import services
from contextlab.runs.models import Run
from contextlab.summaries.models import RunSummarizer

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


def sent_runs(callbacks: list) -> list[int]:
    """The run ids the captured after-commit callbacks send to the workers."""
    return [
        cb.args[0] for cb in callbacks if isinstance(cb, partial) and cb.func == tasks.send_replay
    ]


def deliver(callbacks: list) -> None:
    """What a worker does with each message: the task itself, in this process."""
    for run_id in sent_runs(callbacks):
        tasks.run_replay(run_id)


@pytest.fixture
def lost_run(make_transcript, short_jsonl) -> Run:
    """A queued run whose message never reached a worker, queued an hour ago."""
    run = make_transcript(short_jsonl).runs.get()
    Run.objects.filter(pk=run.pk).update(updated_at=timezone.now() - timedelta(hours=1))
    return run


def test_recovery_sends_a_lost_queued_run_again(lost_run, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as sent:
        tasks.recover_runs()
    assert sent_runs(sent) == [lost_run.pk]
    deliver(sent)
    lost_run.refresh_from_db()
    assert lost_run.status == Run.Status.DONE


def test_a_page_polling_a_lost_run_leaves_it_to_the_periodic_recovery(
    lost_run, django_capture_on_commit_callbacks
):
    # one trigger: beat's recovery task, not every page that polls the run
    with django_capture_on_commit_callbacks(execute=False) as sent:
        run = services.refresh_run(lost_run)
    assert sent_runs(sent) == []
    with django_capture_on_commit_callbacks(execute=False) as sent:
        tasks.recover()
    assert sent_runs(sent) == [lost_run.pk]
    deliver(sent)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE


def test_a_run_queued_recently_is_not_sent_again(
    make_transcript, short_jsonl, django_capture_on_commit_callbacks
):
    run = make_transcript(short_jsonl).runs.get()
    with django_capture_on_commit_callbacks(execute=False) as sent:
        tasks.recover_runs()
    assert sent == []
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def fetches_sent(callbacks: list) -> list[tuple[int, str]]:
    """(run id, summary key) of the summary fetch tasks the callbacks publish."""
    from contextlab.jobs import lifecycle
    from contextlab.jobs import tasks as summary_tasks

    return [
        tuple(cb.args[0].args)
        for cb in callbacks
        if isinstance(cb, partial)
        and cb.func == lifecycle.publish
        and cb.args[0].func == summary_tasks.fetch_summary.delay
    ]


def test_a_run_parked_for_a_summary_recently_is_left_to_its_fetch_task(
    make_transcript, short_jsonl, django_capture_on_commit_callbacks
):
    run = make_transcript(short_jsonl).runs.get()
    RunSummarizer.objects.update_or_create(run=run, defaults={"pending_key": "k1"})
    with django_capture_on_commit_callbacks(execute=False) as sent:
        tasks.recover_runs()
    assert sent == []


def test_a_run_parked_for_a_summary_too_long_gets_its_fetch_task_again(
    lost_run, django_capture_on_commit_callbacks
):
    """Its fetch task was lost (the broker down when it was sent, a frozen pool): the
    recovery sends that fetch again, not a replay from the start, once per period."""
    RunSummarizer.objects.update_or_create(run=lost_run, defaults={"pending_key": "k1"})
    with django_capture_on_commit_callbacks(execute=False) as sent:
        tasks.recover_runs()
        tasks.recover_runs()
    assert fetches_sent(sent) == [(lost_run.pk, "k1")]
    assert sent_runs(sent) == []
    lost_run.refresh_from_db()
    assert lost_run.status == Run.Status.QUEUED


def test_a_lost_run_is_sent_once_per_period(lost_run, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as sent:
        tasks.recover_runs()
        tasks.recover_runs()
    assert sent_runs(sent) == [lost_run.pk]
    lost_run.refresh_from_db()
    assert lost_run.status == Run.Status.QUEUED  # sending again changes no status


def test_a_claimed_run_is_not_sent_again(lost_run, django_capture_on_commit_callbacks):
    from contextlab.jobs import lifecycle

    assert lifecycle.claim(lost_run.pk)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        tasks.recover_runs()
    assert sent == []
