"""Deleting a comparison or sweep stops its queued and running work (runs no one else uses end
failed, "Cancelled"); a run can be cancelled through the API; a cancelled run's task, arriving
later, does nothing; a running replay stops at its next progress write."""

from __future__ import annotations

import pytest

from contextlab.jobs import lifecycle
from contextlab.jobs import replay as runner
from contextlab.runs.models import Run
from contextlab.tuning import configs as tuning_configs
from contextlab.tuning import services as tuning
from contextlab.tuning.models import Sweep

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


@pytest.fixture
def session(make_transcript, short_jsonl):
    return make_transcript(short_jsonl)


def make_sweep(user, session, values: str) -> Sweep:
    return tuning.create_sweep(
        owner=user,
        transcripts=[session],
        base=tuning_configs.ConfigSpec(),
        field_name="autocompact_pct_override",
        values=values,
    )


def sweep_runs(sweep: Sweep) -> list[Run]:
    return [item.run for item in sweep.items.select_related("run")]


def test_deleting_a_sweep_cancels_its_queued_runs_and_their_tasks_do_nothing(user, session):
    sweep = make_sweep(user, session, "50:70:10")
    runs = sweep_runs(sweep)
    assert {r.status for r in runs} == {Run.Status.QUEUED}
    tuning.delete_owned(sweep)
    for run in runs:
        run.refresh_from_db()
        assert run.status == Run.Status.FAILED
        assert run.error.startswith("Cancelled")
        # the task sent at creation arrives later: nothing to claim, nothing replayed
        assert runner.execute_run(run.pk) is None
        run.refresh_from_db()
        assert run.status == Run.Status.FAILED


def test_runs_another_sweep_uses_and_finished_runs_are_kept(user, session):
    first = make_sweep(user, session, "50, 60")
    second = make_sweep(user, session, "60, 70")  # reuses the 60 run
    done = next(r for r in sweep_runs(first) if r.config["autocompact_pct_override"] == 50)
    runner.execute_run(done.pk)
    tuning.delete_owned(first)
    shared = next(r for r in sweep_runs(second) if r.config["autocompact_pct_override"] == 60)
    shared.refresh_from_db()
    done.refresh_from_db()
    assert shared.status == Run.Status.QUEUED
    assert done.status == Run.Status.DONE


def test_a_running_replay_stops_at_its_next_progress_write(user, session, monkeypatch):
    run = session.runs.get()
    assert lifecycle.claim(run.pk)
    monkeypatch.setattr(lifecycle, "PROGRESS_EVERY", 0.0)
    progress = lifecycle.progress_writer(run.pk)
    progress(1, 10)  # still running: written
    lifecycle.cancel([run.pk], "Cancelled by its owner.")

    def replay_that_goes_on() -> dict:
        progress(2, 10)
        raise AssertionError("the replay went on after it was cancelled")

    outcome = lifecycle.conclude(Run.objects.get(pk=run.pk), replay_that_goes_on)
    assert isinstance(outcome, lifecycle.Failed)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error == "Cancelled by its owner."


def test_cancel_through_the_api(client, auth_header, other_auth_header, session):
    run = session.runs.get()
    assert client.post(f"/api/runs/{run.pk}/cancel", **other_auth_header).status_code == 404
    response = client.post(f"/api/runs/{run.pk}/cancel", **auth_header)
    assert response.status_code == 200
    assert response.json()["status"] == "failed"
    assert response.json()["error"] == "Cancelled by its owner."
    again = client.post(f"/api/runs/{run.pk}/cancel", **auth_header)
    assert again.status_code == 409


def test_a_finished_run_cannot_be_cancelled(client, auth_header, session):
    run = session.runs.get()
    runner.execute_run(run.pk)
    assert client.post(f"/api/runs/{run.pk}/cancel", **auth_header).status_code == 409
    run.refresh_from_db()
    assert run.status == Run.Status.DONE


def test_progress_of_an_uncancelled_run_goes_on(user, session, monkeypatch):
    run = session.runs.get()
    assert lifecycle.claim(run.pk)
    monkeypatch.setattr(lifecycle, "PROGRESS_EVERY", 0.0)
    lifecycle.progress_writer(run.pk)(3, 10)
    run.refresh_from_db()
    assert (run.progress_done, run.progress_total) == (3, 10)
    assert run.status == Run.Status.RUNNING
