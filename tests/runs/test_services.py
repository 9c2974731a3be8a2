from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from contextlab import engine
from contextlab.jobs import tasks
from contextlab.runs import services
from contextlab.runs.models import Run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


@pytest.fixture
def transcript(make_transcript, short_jsonl):
    return make_transcript(short_jsonl)


def test_whatif_run_is_queued_with_the_resolved_config(
    user, transcript, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        run = services.start_run(
            owner=user, transcript=transcript, mode="whatif", preset="aggressive", overrides={}
        )
    assert run.status == Run.Status.QUEUED
    assert run.preset == "aggressive"
    assert run.config
    assert len(callbacks) == 1  # the task is published only once the row is committed


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"mode": "sideways"}, "mode"),
        ({"mode": "whatif", "preset": "no-such-preset"}, "preset"),
        ({"mode": "whatif", "overrides": {"no_such_field": 1}}, "config.no_such_field"),
        ({"mode": "whatif", "overrides": {"context_window": -5}}, "config.context_window"),
        ({"mode": "recorded", "overrides": {"context_window": 300000}}, "config"),
    ],
)
def test_bad_run_requests_name_the_field(user, transcript, kwargs, field):
    with pytest.raises(engine.FieldError) as exc:
        services.start_run(owner=user, transcript=transcript, **kwargs)
    assert exc.value.field == field
    assert exc.value.message
    assert not Run.objects.filter(mode="whatif").exists()


def _stale(run: Run, attempts: int) -> None:
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        attempts=attempts,
        heartbeat_at=timezone.now() - timedelta(hours=1),
    )


def test_a_polled_fresh_running_run_is_left_alone(transcript):
    run = transcript.runs.get()
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, attempts=1, heartbeat_at=timezone.now()
    )
    assert services.refresh_run(run).status == Run.Status.RUNNING


def test_the_periodic_recovery_requeues_a_stale_run_a_page_only_reads(transcript):
    run = transcript.runs.get()
    _stale(run, attempts=1)
    assert services.refresh_run(run).status == Run.Status.RUNNING
    tasks.recover()
    assert services.refresh_run(run).status == Run.Status.QUEUED


def test_default_run_prefers_the_finished_recorded_run(user, transcript):
    recorded = transcript.runs.get()
    whatif = services.start_run(owner=user, transcript=transcript, mode="whatif")
    assert services.default_run(transcript) == whatif  # nothing finished: the newest
    Run.objects.filter(pk=recorded.pk).update(status=Run.Status.DONE)
    assert services.default_run(transcript) == recorded


def test_old_error_names_are_the_engine_field_error():
    # one type for "this field is wrong": forms and the API catch engine.FieldError only
    from contextlab.summaries import services as summaries
    from contextlab.tuning import services as tuning

    assert services.RunConfigError is tuning.TuningError is summaries.SummarizerConfigError
    assert services.RunConfigError is engine.FieldError
