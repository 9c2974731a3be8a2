"""Limits that keep one user from crowding out the others: a cap on a user's queued and running
runs (a message naming ``runs``; uploads still accepted), per-user and per-workspace upload
quotas (a 413 naming the quota, nothing kept), and the existing caps (sweep runs, comparison
sessions, config size, page size) each answering a message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile

from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript
from contextlab.tuning.models import Comparison, Sweep
from tests.conftest import DEMO

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


def _post(client: Any, url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    return client.post(url, json.dumps(body), content_type="application/json", **headers)


def _uploads() -> list[Path]:
    folder = Path(django_settings.MEDIA_ROOT) / "uploads"
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_a_users_active_runs_are_capped_with_a_message_and_others_are_not(
    client: Any,
    auth_header: dict[str, str],
    other_auth_header: dict[str, str],
    make_transcript: Any,
    other_user: Any,
    short_jsonl: Path,
    settings: Any,
) -> None:
    settings.RUN_MAX_ACTIVE_PER_USER = 3
    session = make_transcript(short_jsonl)  # its recorded run is queued: 1 of 3
    run = {"session_id": session.pk, "mode": "whatif"}
    for preset in ("aggressive", "budget-on"):
        response = _post(client, "/api/runs", {**run, "preset": preset}, auth_header)
        assert response.status_code == 201, response.content
    refused = _post(client, "/api/runs", {**run, "preset": "snip-on"}, auth_header)
    assert refused.status_code == 422
    (problem,) = refused.json()["detail"]
    assert problem["loc"][-1] == "runs"
    assert "3 runs queued or running" in problem["msg"]
    assert "at most 3" in problem["msg"]
    # a sweep past the cap is refused whole: no sweep, no run of it
    sweep = _post(
        client,
        "/api/sweeps",
        {"session_ids": [session.pk], "field": "context_window", "values": [150000, 250000]},
        auth_header,
    )
    assert sweep.status_code == 422, sweep.content
    assert "queued or running" in json.dumps(sweep.json())
    assert not Sweep.objects.exists()
    assert Run.objects.filter(owner=session.owner).count() == 3
    # an upload is never refused by the cap: its recorded run is queued past it
    upload = client.post(
        "/api/sessions",
        {
            "file": SimpleUploadedFile(
                "th.jsonl", (DEMO / "marot__spotter__tool_heavy.jsonl").read_bytes()
            )
        },
        **auth_header,
    )
    assert upload.status_code == 201, upload.content
    # another user is not affected
    theirs = make_transcript(short_jsonl, owner=other_user)
    response = _post(
        client,
        "/api/runs",
        {"session_id": theirs.pk, "mode": "whatif", "preset": "aggressive"},
        other_auth_header,
    )
    assert response.status_code == 201, response.content
    # a finished run frees its place
    Run.objects.filter(owner=session.owner, mode="whatif").update(status=Run.Status.DONE)
    again = _post(client, "/api/runs", {**run, "preset": "snip-on"}, auth_header)
    assert again.status_code == 201, again.content


def test_the_run_form_shows_the_cap_message(
    alice_client: Any, make_transcript: Any, short_jsonl: Path, settings: Any
) -> None:
    settings.RUN_MAX_ACTIVE_PER_USER = 1
    session = make_transcript(short_jsonl)
    comparison = alice_client.post(
        "/compare/new/",
        {"sessions": [session.pk], "a_config": "preset:aggressive", "b_config": "preset:budget-on"},
    )
    assert comparison.status_code in (200, 400, 422), comparison.status_code
    assert "queued or running" in comparison.content.decode()
    assert not Comparison.objects.exists()


@pytest.mark.parametrize(
    ("setting", "value", "says"),
    [
        ("UPLOAD_QUOTA_USER_FILES", 1, "your uploads already hold 1 sessions"),
        ("UPLOAD_QUOTA_USER_BYTES", 20_000, "your uploads use"),
        ("UPLOAD_QUOTA_WORKSPACE_FILES", 1, "already hold 1 sessions"),
        ("UPLOAD_QUOTA_WORKSPACE_BYTES", 20_000, "would pass it"),
    ],
)
def test_upload_quotas_refuse_with_a_message_and_keep_nothing(
    setting: str,
    value: int,
    says: str,
    client: Any,
    auth_header: dict[str, str],
    settings: Any,
) -> None:
    setattr(settings, setting, value)
    first = client.post(
        "/api/sessions",
        {
            "file": SimpleUploadedFile(
                "s.jsonl", (DEMO / "marot__spotter__short.jsonl").read_bytes()
            )
        },
        **auth_header,
    )
    assert first.status_code == 201, first.content  # 10 KB: within every quota above
    kept = _uploads()
    second = client.post(
        "/api/sessions",
        {
            "file": SimpleUploadedFile(
                "th.jsonl", (DEMO / "marot__spotter__tool_heavy.jsonl").read_bytes()
            )
        },
        **auth_header,
    )
    assert second.status_code == 413, second.content
    detail = second.json()["detail"]
    assert says in detail
    assert "th.jsonl was not kept" in detail
    assert Transcript.objects.count() == 1
    assert _uploads() == kept  # no partial or final file left


def test_the_browser_upload_says_which_quota(alice_client: Any, settings: Any) -> None:
    settings.UPLOAD_QUOTA_USER_FILES = 1
    for name in ("marot__spotter__short.jsonl", "marot__spotter__tool_heavy.jsonl"):
        with (DEMO / name).open("rb") as fh:
            response = alice_client.post(
                "/sessions/upload/", {"file": fh}, HTTP_ACCEPT="application/json"
            )
    assert response.status_code == 413
    (result,) = response.json()["results"]
    assert result["ok"] is False
    assert "the most allowed (1)" in result["message"]


def test_the_existing_caps_answer_messages(
    client: Any, auth_header: dict[str, str], make_transcript: Any, short_jsonl: Path
) -> None:
    session = make_transcript(short_jsonl)
    too_many = _post(
        client,
        "/api/comparisons",
        {"session_ids": list(range(1, 300)), "a": {}, "b": {}},
        auth_header,
    )
    assert too_many.status_code == 422
    assert too_many.json()["detail"][0]["loc"][-1] == "session_ids"
    huge = _post(
        client,
        "/api/runs",
        {"session_id": session.pk, "mode": "whatif", "config": {"x" * 70_000: 1}},
        auth_header,
    )
    assert huge.status_code == 422
    assert "characters of overrides" in json.dumps(huge.json())
    sweep = _post(
        client,
        "/api/sweeps",
        {"session_ids": [session.pk], "field": "context_window", "values": "100000:400000:1000"},
        auth_header,
    )
    assert sweep.status_code == 422
    assert "per sweep" in json.dumps(sweep.json())
    run_id = session.runs.get().pk
    page = client.get(f"/api/runs/{run_id}/requests?limit=5000", **auth_header)
    assert page.status_code == 422
    assert page.json()["detail"][0]["loc"][-1] == "limit"
