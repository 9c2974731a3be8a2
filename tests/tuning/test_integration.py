"""A comparison and a sweep through the API, replayed by a real Celery worker (no eager mode)."""

from __future__ import annotations

import time

import pytest

from contextlab.runs.models import Run
from tests.conftest import wait_for_run
from tests.tuning.conftest import EARLY

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]


def wait_for(client, url, headers, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(url, **headers).json()
        if body["status"] in ("done", "failed"):
            return body
        time.sleep(0.3)
    raise AssertionError(f"{url} still {body['status']} after {timeout}s")


def test_a_comparison_runs_on_the_real_worker(
    celery_worker_process, client, auth_header, make_transcript, tool_heavy_jsonl, short_jsonl
):
    sessions = [make_transcript(tool_heavy_jsonl), make_transcript(short_jsonl)]
    for transcript in sessions:
        wait_for_run(transcript.runs.get().pk)  # the upload's recorded run
    response = client.post(
        "/api/comparisons",
        {
            "session_ids": [t.pk for t in sessions],
            "a": {"preset": "auto"},
            "b": {"preset": "auto", "config": EARLY},
        },
        content_type="application/json",
        **auth_header,
    )
    assert response.status_code == 201, response.content
    body = wait_for(client, f"/api/comparisons/{response.json()['id']}", auth_header)
    assert body["status"] == "done", celery_worker_process.output()
    assert len(body["a"]["run_ids"]) == len(body["b"]["run_ids"]) == 2
    assert body["b"]["summary"]["compactions"] > body["a"]["summary"]["compactions"]
    assert body["delta"]["compactions"]["delta"] == (
        body["b"]["summary"]["compactions"] - body["a"]["summary"]["compactions"]
    )
    assert body["sessions"][0]["first_divergence"] == 1
    runs = Run.objects.filter(pk__in=body["a"]["run_ids"] + body["b"]["run_ids"])
    assert {r.status for r in runs} == {"done"}
    # the compare page and the A-vs-B request view render from the stored results
    client.force_login(sessions[0].owner)
    page = client.get(f"/compare/{body['id']}/")
    assert b'id="delta-table"' in page.content
    view = client.get(f"/compare/{body['id']}/requests/1/?session={sessions[0].pk}")
    assert view.status_code == 200
    assert b'class="row differs"' in view.content


def test_a_sweep_runs_on_the_real_worker_and_reuses_runs(
    celery_worker_process, client, auth_header, make_transcript, tool_heavy_jsonl
):
    transcript = make_transcript(tool_heavy_jsonl)
    wait_for_run(transcript.runs.get().pk)
    payload = {
        "session_ids": [transcript.pk],
        "field": "autocompact_pct_override",
        "values": "10:90:20",
    }
    response = client.post("/api/sweeps", payload, content_type="application/json", **auth_header)
    assert response.status_code == 201, response.content
    body = wait_for(client, f"/api/sweeps/{response.json()['id']}", auth_header)
    assert body["status"] == "done", celery_worker_process.output()
    assert [p["value"] for p in body["points"]] == [10.0, 30.0, 50.0, 70.0, 90.0]
    compactions = [p["summary"]["compactions"] for p in body["points"]]
    assert compactions[0] > compactions[-1]
    before = Run.objects.count()
    again = client.post("/api/sweeps", payload, content_type="application/json", **auth_header)
    assert Run.objects.count() == before
    assert client.get(f"/api/sweeps/{again.json()['id']}", **auth_header).json()["status"] == "done"
