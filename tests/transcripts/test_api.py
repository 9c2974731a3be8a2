from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from contextlab.transcripts.models import Transcript

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


def upload(client, headers, name, data):
    return client.post("/api/sessions", {"file": SimpleUploadedFile(name, data)}, **headers)


def test_post_session_returns_201_with_id_name_requests_problems(client, auth_header, short_jsonl):
    response = upload(client, auth_header, "short.jsonl", short_jsonl.read_bytes())
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["name"] == "short.jsonl"
    assert body["requests"] > 0
    assert body["problems"] == []
    assert Transcript.objects.filter(pk=body["id"]).exists()


def test_duplicate_upload_returns_the_existing_session(client, auth_header, short_jsonl):
    first = upload(client, auth_header, "short.jsonl", short_jsonl.read_bytes()).json()
    response = upload(client, auth_header, "again.jsonl", short_jsonl.read_bytes())
    assert response.status_code == 200
    assert response.json()["id"] == first["id"]
    assert response.json()["duplicate"] is True


def test_missing_file_field_is_a_422_naming_file(client, auth_header):
    response = client.post("/api/sessions", {"other": "x"}, **auth_header)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "file"]


def test_unusable_file_is_a_422_with_reason_and_problems(client, auth_header):
    response = upload(client, auth_header, "junk.jsonl", b"{not json\n")
    assert response.status_code == 422
    body = response.json()
    assert body["detail"][0]["loc"] == ["body", "file"]
    assert "not a Claude Code transcript" in body["detail"][0]["msg"]
    assert body["problems"][0]["line"] == 1
    assert not Transcript.objects.exists()


def test_oversize_upload_is_413_with_the_limit(client, auth_header, settings, short_jsonl):
    settings.UPLOAD_MAX_BYTES = 2048
    response = upload(client, auth_header, "big.jsonl", short_jsonl.read_bytes())
    assert response.status_code == 413
    assert "2.0 KB (2048 bytes)" in response.json()["detail"]
    assert not Transcript.objects.exists()


def test_list_get_delete_only_see_the_owners_sessions(
    client,
    auth_header,
    other_auth_header,
    make_transcript,
    other_user,
    short_jsonl,
    tool_heavy_jsonl,
):
    mine = make_transcript(short_jsonl)
    theirs = make_transcript(tool_heavy_jsonl, owner=other_user)
    listed = client.get("/api/sessions", **auth_header).json()
    assert [s["id"] for s in listed] == [mine.pk]
    detail = client.get(f"/api/sessions/{mine.pk}", **auth_header).json()
    assert detail["runs"][0]["status"] == "queued"
    assert detail["threads"][0]["kind"] == "main"
    assert client.get(f"/api/sessions/{theirs.pk}", **auth_header).status_code == 404
    assert client.delete(f"/api/sessions/{theirs.pk}", **auth_header).status_code == 404
    assert Transcript.objects.filter(pk=theirs.pk).exists()
    assert client.delete(f"/api/sessions/{mine.pk}", **auth_header).status_code == 204
    assert not Transcript.objects.filter(pk=mine.pk).exists()
    assert client.get(f"/api/sessions/{mine.pk}", **auth_header).status_code == 404


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/sessions"),
        ("post", "/api/sessions"),
        ("get", "/api/sessions/1"),
        ("delete", "/api/sessions/1"),
    ],
)
def test_anonymous_gets_401(client, method, path):
    assert getattr(client, method)(path).status_code == 401


def test_browser_session_can_use_the_api(alice_client):
    assert alice_client.get("/api/sessions").status_code == 200


def test_openapi_schema_lists_the_operations(client):
    schema = client.get("/api/openapi.json").json()
    operations = {op["operationId"] for item in schema["paths"].values() for op in item.values()}
    assert {
        "create_session",
        "list_sessions",
        "get_session",
        "delete_session",
        "create_run",
        "get_run",
        "list_run_requests",
    } <= operations
    assert client.get("/api/docs").status_code == 200


def test_half_finished_upload_says_it_was_interrupted(client, auth_header, short_jsonl):
    data = short_jsonl.read_bytes()
    body = (
        b'--XYZ\r\nContent-Disposition: form-data; name="file"; filename="s.jsonl"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\n" + data[: len(data) // 2]
    )  # the connection dropped: no end of part, no closing boundary
    response = client.generic(
        "POST",
        "/api/sessions",
        body,
        content_type="multipart/form-data; boundary=XYZ",
        **auth_header,
    )
    assert response.status_code == 400
    assert "s.jsonl stopped before the end" in response.json()["detail"]
    assert not Transcript.objects.exists()
