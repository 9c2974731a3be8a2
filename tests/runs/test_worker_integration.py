"""End to end through a real Celery worker process, PostgreSQL and Redis (no eager mode)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

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
    # the page that polls the run notices, requeues it, and the real worker finishes it
    alice_client.get(f"/runs/{run.pk}/", HTTP_HX_REQUEST="true")
    run = wait_for_run(run.pk)
    assert (run.status, run.attempts) == ("done", 2), run.error


def _backends(application: str) -> set[int]:
    """PostgreSQL backends on the test database opened by ``application``."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %s",
            [application],
        )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.parametrize("max_age", ["60", "0"])
def test_a_worker_keeps_its_database_connection_between_tasks_as_conn_max_age_says(
    max_age, tmp_path, make_transcript, short_jsonl
):
    """Celery's Django fix-up would close it around every task; Django's rules apply instead."""
    from tests.conftest import flush_broker, require_services, start_worker, worker_env

    require_services()
    flush_broker()
    application = f"contextlab-conn-test-{max_age}"
    url = f"{worker_env()['DATABASE_URL']}?application_name={application}"
    worker = start_worker(tmp_path, f"conn{max_age}", CONN_MAX_AGE=max_age, DATABASE_URL=url)
    try:
        transcript = make_transcript(short_jsonl)
        assert wait_for_run(transcript.runs.get().pk).status == "done", worker.output()
        after_first = _backends(application)
        run = services.start_run(
            owner=transcript.owner, transcript=transcript, mode="whatif", preset="aggressive"
        )
        assert wait_for_run(run.pk).status == "done", worker.output()
        after_second = _backends(application)
    finally:
        worker.stop()
    # (the worker's start-up check for abandoned runs may hold a connection of its own)
    if max_age == "60":
        assert after_first & after_second  # the same backend served both tasks
    else:
        assert not after_first & after_second  # closed after each task
