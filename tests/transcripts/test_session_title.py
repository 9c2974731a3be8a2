"""A session's title is the one Claude Code shows: custom-title, else ai-title, else summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.utils.html import escape

from contextlab import engine
from tests.conftest import DEMO

SHORT = DEMO / "marot__spotter__short.jsonl"


def with_records(tmp_path: Path, *records: dict) -> Path:
    target = tmp_path / "titled.jsonl"
    extra = "".join(json.dumps(r) + "\n" for r in records)
    target.write_text(SHORT.read_text() + extra)
    return target


@pytest.mark.parametrize(
    ("records", "title"),
    [
        ([], None),
        ([{"type": "summary", "summary": "Old summary", "leafUuid": "x"}], "Old summary"),
        (
            [
                {"type": "summary", "summary": "Old summary", "leafUuid": "x"},
                {"type": "ai-title", "aiTitle": "Fix the login bug", "sessionId": "s"},
            ],
            "Fix the login bug",
        ),
        (
            [
                {"type": "custom-title", "customTitle": "My name for it", "sessionId": "s"},
                {"type": "ai-title", "aiTitle": "A later AI title", "sessionId": "s"},
                {"type": "ai-title", "aiTitle": "   ", "sessionId": "s"},
            ],
            "My name for it",
        ),
        (
            [
                {"type": "ai-title", "aiTitle": "First", "sessionId": "s"},
                {"type": "ai-title", "aiTitle": "Second", "sessionId": "s"},
            ],
            "Second",
        ),
    ],
)
def test_the_title_claude_code_would_show(tmp_path, records, title):
    assert engine.load_session(str(with_records(tmp_path, *records))).title == title


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_media")
def test_the_upload_stores_the_title_and_the_list_shows_it_escaped(
    tmp_path, make_transcript, alice_client
):
    hostile = 'Ship it <script>alert("x")</script>\u0007'
    path = with_records(tmp_path, {"type": "ai-title", "aiTitle": hostile, "sessionId": "s"})
    transcript = make_transcript(path)
    assert transcript.title == 'Ship it <script>alert("x")</script>'
    page = alice_client.get("/sessions/").content.decode()
    assert "Ship it &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "<script>alert" not in page


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_media")
def test_an_editor_renames_the_session_and_an_empty_title_falls_back(make_transcript, alice_client):
    transcript = make_transcript(SHORT)
    url = f"/sessions/{transcript.pk}/rename/"
    response = alice_client.post(
        url, {"title": "Login bug\u0000 <b>hunt</b>"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    transcript.refresh_from_db()
    assert transcript.title == "Login bug  <b>hunt</b>"
    assert "Login bug  &lt;b&gt;hunt&lt;/b&gt;" in response.content.decode()
    report = alice_client.get(f"/sessions/{transcript.pk}/").content.decode()
    assert "<h1>Login bug  &lt;b&gt;hunt&lt;/b&gt;</h1>" in report
    assert "Login bug  &lt;b&gt;hunt&lt;/b&gt;" in alice_client.get("/sessions/").content.decode()
    too_long = alice_client.post(url, {"title": "x" * 201}, HTTP_HX_REQUEST="true")
    assert too_long.status_code == 422
    assert "at most 200 characters" in too_long.content.decode()
    transcript.refresh_from_db()
    assert transcript.title == "Login bug  <b>hunt</b>"  # unchanged by the refused one
    alice_client.post(url, {"title": "  "})
    transcript.refresh_from_db()
    assert transcript.title == ""
    # no title: the session's first prompt names it (issue 21), the file name is a detail
    assert transcript.first_prompt
    assert transcript.display_name != transcript.name
    assert (
        f"<h1>{escape(transcript.display_name)}</h1>"
        in alice_client.get(f"/sessions/{transcript.pk}/").content.decode()
    )


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_media")
def test_someone_elses_session_cannot_be_renamed(make_transcript, mallory_client):
    transcript = make_transcript(SHORT)
    response = mallory_client.post(f"/sessions/{transcript.pk}/rename/", {"title": "mine now"})
    assert response.status_code == 404
    transcript.refresh_from_db()
    assert transcript.title == ""
