"""A session's project is the folder Claude Code ran in: the main conversation's first cwd."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextlab import engine
from tests.conftest import DEMO

SHORT = DEMO / "marot__spotter__short.jsonl"


def with_cwds(tmp_path: Path, first: str | None, later: str) -> Path:
    """The demo transcript with its first message's cwd set to ``first`` (removed when None)
    and every later record's to ``later``."""
    lines = []
    seen_first = False
    for line in SHORT.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") in ("user", "assistant"):
            if seen_first:
                record["cwd"] = later
            elif first is None:
                record.pop("cwd", None)
            else:
                record["cwd"] = first
            seen_first = True
        lines.append(json.dumps(record))
    target = tmp_path / "project.jsonl"
    target.write_text("\n".join(lines) + "\n")
    return target


def test_the_project_is_the_first_recorded_cwd(tmp_path):
    session = engine.load_session(str(with_cwds(tmp_path, "/home/ann/code/spotter", "/tmp")))
    assert session.project == "/home/ann/code/spotter"


def test_a_session_without_a_first_cwd_takes_the_next_one(tmp_path):
    session = engine.load_session(str(with_cwds(tmp_path, None, "/home/ann/code/later")))
    assert session.project == "/home/ann/code/later"


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_media")
def test_the_list_shows_the_project_name_with_its_path_escaped(
    tmp_path, make_transcript, alice_client
):
    hostile = '/home/ann/<img src=x onerror="alert(1)">/spotter\u0007'
    transcript = make_transcript(with_cwds(tmp_path, hostile, "/tmp"))
    assert transcript.project == '/home/ann/<img src=x onerror="alert(1)">/spotter'
    assert transcript.project_name == "spotter"
    page = alice_client.get("/sessions/").content.decode()
    assert (
        '<span title="/home/ann/&lt;img src=x onerror=&quot;alert(1)&quot;&gt;/spotter">spotter</span>'
        in page
    )
    assert "<img src=x" not in page


def test_the_project_name_of_a_windows_path():
    from contextlab.transcripts.models import Transcript

    assert Transcript(project="C:\\Users\\ann\\code\\spotter\\").project_name == "spotter"
    assert Transcript(project="").project_name == ""


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_media")
def test_the_api_lists_title_and_project(tmp_path, make_transcript, alice_client):
    transcript = make_transcript(with_cwds(tmp_path, "/srv/app", "/tmp"))
    listed = alice_client.get("/api/sessions").json()
    (row,) = [r for r in listed if r["id"] == transcript.pk]
    assert row["project"] == "/srv/app"
    assert row["title"] == transcript.title
