from __future__ import annotations

import pytest

from contextlab.runs import runner
from contextlab.runs.models import Run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


@pytest.fixture
def transcript(make_transcript, tool_heavy_jsonl):
    return make_transcript(tool_heavy_jsonl)


def post_run(client, headers, **payload):
    return client.post("/api/runs", payload, content_type="application/json", **headers)


def test_create_whatif_run_returns_201(client, auth_header, transcript):
    response = post_run(
        client,
        auth_header,
        session_id=transcript.pk,
        mode="whatif",
        preset="aggressive",
        config={"context_window": 300000},
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "queued"
    run = Run.objects.get(pk=body["id"])
    assert run.overrides == {"context_window": 300000}


@pytest.mark.parametrize(
    ("payload", "loc"),
    [
        ({"mode": "sideways"}, ["body", "payload", "mode"]),
        ({"session_id": "abc"}, ["body", "payload", "session_id"]),
        ({"preset": "nope"}, ["body", "preset"]),
        ({"config": {"context_window": "big"}}, ["body", "config", "context_window"]),
        ({"config": {"unknown_knob": 1}}, ["body", "config", "unknown_knob"]),
        ({"config": [1, 2]}, ["body", "payload", "config"]),
    ],
)
def test_validation_errors_are_422_naming_the_field(client, auth_header, transcript, payload, loc):
    body = {"session_id": transcript.pk, "mode": "whatif", **payload}
    response = post_run(client, auth_header, **body)
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"] == loc


def test_malformed_json_body_is_rejected(client, auth_header):
    response = client.post("/api/runs", "{not json", content_type="application/json", **auth_header)
    assert response.status_code in (400, 422)


def test_get_run_and_page_its_requests(client, auth_header, transcript):
    run = transcript.runs.get()
    response = client.get(f"/api/runs/{run.pk}/requests", **auth_header)
    assert response.status_code == 409
    assert "queued" in response.json()["detail"]
    runner.execute_run(run.pk)
    body = client.get(f"/api/runs/{run.pk}", **auth_header).json()
    assert (body["status"], body["progress"], body["error"]) == ("done", 1.0, "")
    page = client.get(f"/api/runs/{run.pk}/requests?offset=1&limit=2", **auth_header).json()
    assert page["count"] == body["summary"]["requests"]
    assert [item["index"] for item in page["items"]] == [1, 2]
    assert {"model_tokens", "repl_tokens", "cache", "events", "thresholds"} <= set(page["items"][0])
    assert client.get(f"/api/runs/{run.pk}/requests?limit=0", **auth_header).status_code == 422
    assert client.get(f"/api/runs/{run.pk}/requests?offset=-1", **auth_header).status_code == 422


def test_other_users_get_404_everywhere(client, other_auth_header, transcript):
    run = transcript.runs.get()
    assert (
        post_run(client, other_auth_header, session_id=transcript.pk, mode="whatif").status_code
        == 404
    )
    assert client.get(f"/api/runs/{run.pk}", **other_auth_header).status_code == 404
    assert client.get(f"/api/runs/{run.pk}/requests", **other_auth_header).status_code == 404


@pytest.mark.parametrize(
    ("method", "path"),
    [("post", "/api/runs"), ("get", "/api/runs/1"), ("get", "/api/runs/1/requests")],
)
def test_anonymous_gets_401(client, method, path):
    assert getattr(client, method)(path).status_code == 401
