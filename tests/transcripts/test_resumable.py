"""The tus server (``transcripts.resumable``): every bad input gets a clear answer and loses
nothing; a complete upload becomes the same session as a one-request upload."""

from __future__ import annotations

import base64
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from contextlab import blobs
from contextlab.jobs import uploads as job_uploads
from contextlab.transcripts import resumable
from contextlab.transcripts.models import ResumableUpload, Transcript

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

TUS = {"HTTP_TUS_RESUMABLE": "1.0.0"}


def meta(**values: str) -> str:
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in values.items())


def create(client, headers, length: int, name: str = "s.jsonl"):
    return client.post(
        "/api/uploads",
        HTTP_UPLOAD_LENGTH=str(length),
        HTTP_UPLOAD_METADATA=meta(filename=name),
        **TUS,
        **headers,
    )


def patch(client, headers, location: str, offset: int, data: bytes):
    return client.generic(
        "PATCH",
        location,
        data,
        content_type="application/offset+octet-stream",
        HTTP_UPLOAD_OFFSET=str(offset),
        **TUS,
        **headers,
    )


def upload_id_of(location: str) -> str:
    return location.rstrip("/").rsplit("/", 1)[-1]


def upload_id(response) -> str:
    return upload_id_of(response["Location"])


def test_pieces_in_order_make_the_session_a_single_upload_makes(client, auth_header, short_jsonl):
    data = short_jsonl.read_bytes()
    created = create(client, auth_header, len(data))
    assert created.status_code == 201, created.content
    assert created["Tus-Resumable"] == "1.0.0"
    location = created["Location"]
    half = len(data) // 2
    first = patch(client, auth_header, location, 0, data[:half])
    assert first.status_code == 204, first.content
    assert first["Upload-Offset"] == str(half)
    head = client.head(location, **TUS, **auth_header)
    assert (head.status_code, head["Upload-Offset"], head["Upload-Length"]) == (
        200,
        str(half),
        str(len(data)),
    )
    last = patch(client, auth_header, location, half, data[half:])
    assert last.status_code == 204
    upload = ResumableUpload.objects.get(pk=upload_id(created))
    assert upload.state == ResumableUpload.State.COMPLETE
    # what the worker's task does
    finished = resumable.finish(upload.pk)
    assert finished is not None
    assert finished.state == ResumableUpload.State.STORED
    transcript = Transcript.objects.get(pk=finished.transcript_id)
    assert blobs.read_bytes(transcript.file) == data
    assert transcript.request_count > 0
    assert blobs.listdir(f"incoming/{upload.pk}") == ([], [])
    state = client.get(location, **auth_header).json()
    assert state["state"] == "stored"
    assert state["session"]["id"] == transcript.pk


def test_a_wrong_offset_is_409_with_where_the_upload_stands(client, auth_header, short_jsonl):
    data = short_jsonl.read_bytes()
    location = create(client, auth_header, len(data))["Location"]
    assert patch(client, auth_header, location, 0, data[:100]).status_code == 204
    # a piece out of order (ahead), and the same piece sent twice (behind)
    for offset in (500, 0):
        response = patch(client, auth_header, location, offset, data[offset : offset + 100])
        assert response.status_code == 409
        assert response["Upload-Offset"] == "100"
        assert "not where this upload stands (100 bytes" in response.json()["detail"]
    assert ResumableUpload.objects.get().offset == 100


def test_too_large_totals_and_pieces_are_413(client, auth_header, settings):
    settings.UPLOAD_MAX_BYTES = 1000
    settings.UPLOAD_CHUNK_MAX_BYTES = 1024
    response = create(client, auth_header, 1001)
    assert response.status_code == 413
    assert "upload limit of 1000 bytes" in response.json()["detail"]
    location = create(client, auth_header, 900)["Location"]
    past_end = patch(client, auth_header, location, 0, b"x" * 950)
    assert past_end.status_code == 413
    assert "past the upload's declared length (900 bytes)" in past_end.json()["detail"]
    settings.UPLOAD_MAX_BYTES = 10_000
    big = create(client, auth_header, 5000)["Location"]
    too_big_piece = patch(client, auth_header, big, 0, b"x" * 2000)
    assert too_big_piece.status_code == 413
    # refused from its declared size before the body is read (the middleware), by the limit
    assert "over the limit of 1,024 bytes" in too_big_piece.json()["detail"]
    assert "pieces of at most UPLOAD_CHUNK_MAX_BYTES" in too_big_piece.json()["detail"]
    assert ResumableUpload.objects.get(pk=upload_id_of(big)).offset == 0


def test_bad_names_headers_and_strangers(client, auth_header, other_auth_header):
    assert create(client, auth_header, 10, name="notes.txt").status_code == 400
    no_version = client.post("/api/uploads", HTTP_UPLOAD_LENGTH="10", **auth_header)
    assert no_version.status_code == 412
    location = create(client, auth_header, 10)["Location"]
    assert patch(client, other_auth_header, location, 0, b"x").status_code == 404
    wrong_type = client.generic(
        "PATCH",
        location,
        b"x",
        content_type="text/plain",
        HTTP_UPLOAD_OFFSET="0",
        **TUS,
        **auth_header,
    )
    assert wrong_type.status_code == 415
    missing = f"/api/uploads/{uuid.uuid4()}"
    assert client.head(missing, **TUS, **auth_header).status_code == 404


def test_a_rejected_upload_says_why_and_keeps_nothing(client, auth_header):
    data = b"{not json\n"
    created = create(client, auth_header, len(data), name="junk.jsonl")
    patch(client, auth_header, created["Location"], 0, data)
    finished = resumable.finish(upload_id(created))
    assert finished is not None
    assert finished.state == ResumableUpload.State.REJECTED
    assert "not a Claude Code transcript" in finished.error
    assert not Transcript.objects.exists()
    assert blobs.listdir(f"incoming/{finished.pk}") == ([], [])


def test_the_recovery_removes_stale_partial_uploads(client, auth_header, settings, short_jsonl):
    data = short_jsonl.read_bytes()
    created = create(client, auth_header, len(data))
    patch(client, auth_header, created["Location"], 0, data[:100])
    fresh = create(client, auth_header, len(data))
    stale_id = upload_id(created)
    ResumableUpload.objects.filter(pk=stale_id).update(
        updated_at=timezone.now() - timedelta(seconds=settings.UPLOAD_RESUMABLE_STALE_AFTER + 5)
    )
    assert job_uploads.remove_stale_resumable() == [stale_id]
    assert blobs.listdir(f"incoming/{stale_id}") == ([], [])
    assert ResumableUpload.objects.filter(pk=upload_id(fresh)).exists()
    resumed = client.head(created["Location"], **TUS, **auth_header)
    assert resumed.status_code == 404  # a tus client starts again
