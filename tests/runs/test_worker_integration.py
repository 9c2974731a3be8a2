"""End to end through a real Celery worker process, PostgreSQL and Redis (no eager mode)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from contextlab import engine
from contextlab.jobs import tasks
from contextlab.jobs.replay import WASTE_KEY
from contextlab.runs import services
from contextlab.runs.models import Run, RunResult
from tests.conftest import wait_for_run

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]


def test_upload_over_http_is_replayed_by_the_worker(
    celery_worker_process, client, auth_header, tool_heavy_jsonl
):
    response = client.post(
        "/api/sessions",
        {"file": SimpleUploadedFile("th.jsonl", tool_heavy_jsonl.read_bytes())},
        **auth_header,
    )
    assert response.status_code == 201, response.content
    run_id = client.get(f"/api/sessions/{response.json()['id']}", **auth_header).json()["runs"][0][
        "id"
    ]
    run = wait_for_run(run_id)
    assert run.status == "done", run.error + celery_worker_process.output()
    body = client.get(f"/api/runs/{run_id}", **auth_header).json()
    assert body["status"] == "done"
    assert body["progress"] == 1.0
    page = client.get(f"/api/runs/{run_id}/requests?limit=2", **auth_header).json()
    assert page["count"] == body["summary"]["requests"]
    assert len(page["items"]) == min(2, page["count"])
    # the worker stored the report's waste findings and idle answer, and its engine version
    assert run.engine_version == engine.ENGINE_VERSION
    stored = RunResult.objects.get(run_id=run_id).data[WASTE_KEY]
    assert stored["engine_version"] == engine.ENGINE_VERSION
    waste = client.get(f"/api/runs/{run_id}/waste", **auth_header).json()
    assert (waste["waste"], waste["idle"]) == (stored["waste"], stored["idle"])


def test_whatif_run_through_the_api(
    celery_worker_process, client, auth_header, make_transcript, user, short_jsonl
):
    transcript = make_transcript(short_jsonl)
    wait_for_run(transcript.runs.get().pk)
    response = client.post(
        "/api/runs",
        {
            "session_id": transcript.pk,
            "mode": "whatif",
            "preset": "aggressive",
            "config": {"context_window": 300000},
        },
        content_type="application/json",
        **auth_header,
    )
    assert response.status_code == 201
    run = wait_for_run(response.json()["id"])
    assert run.status == "done", run.error
    data = RunResult.objects.get(run=run).data
    assert data["session"]["mode"] == "whatif"
    assert data["session"]["config"]["context_window"] == 300000


def test_deterministic_failure_is_stored_and_shown(
    celery_worker_process, alice_client, make_transcript, short_jsonl
):
    transcript = make_transcript(short_jsonl)
    run = wait_for_run(transcript.runs.get().pk)
    # the stored file disappears (disk cleaned behind our back): the replay cannot succeed
    import os

    os.unlink(transcript.path)
    retry = services.start_run(owner=transcript.owner, transcript=transcript, mode="whatif")
    run = wait_for_run(retry.pk)
    assert run.status == "failed"
    assert run.error
    html = alice_client.get(f"/sessions/{transcript.pk}/?run={run.pk}").content.decode()
    assert "This run failed" in html


def test_a_run_abandoned_by_a_dead_worker_is_requeued_and_finished(
    celery_worker_process, alice_client, make_transcript, short_jsonl
):
    transcript = make_transcript(short_jsonl)
    run = wait_for_run(transcript.runs.get().pk)
    # as a killed worker leaves it: "running", heartbeat stopped long ago, no message in the queue
    Run.objects.filter(pk=run.pk).update(
        status="running", attempts=1, heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    RunResult.objects.filter(run=run).delete()
    # the periodic recovery (beat's task, run here) requeues it, and the real worker finishes it
    tasks.recover()
    run = wait_for_run(run.pk)
    assert (run.status, run.attempts) == ("done", 2), run.error
