"""The share mode: "conversation" leaves tool outputs, thinking and written file contents out of
the snapshot before redaction runs, is chosen in the dialog or ``POST /api/shares``, is stored
with the link, and the shared pages say what was left out. And the banner's display name."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from contextlab.jobs import replay
from contextlab.sharing import services
from contextlab.sharing.models import ShareLink
from contextlab.transcripts import services as transcript_services
from tests.redaction import planted as p

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

PLANTED = p.make_planted()


@pytest.fixture
def session(tmp_path, user):
    path = p.planted_session(tmp_path / "planted.jsonl", PLANTED)
    with path.open("rb") as fh:
        transcript, _ = transcript_services.create_transcript(
            owner=user, name="planted.jsonl", content=fh
        )
    replay.execute_run(transcript.runs.get().pk)
    return transcript


def _blocks(snapshot):
    for messages in snapshot["messages"].values():
        for message in messages:
            for block in message.get("blocks") or []:
                yield message, block


def test_the_conversation_mode_leaves_out_tool_outputs_thinking_and_file_contents(
    session, alice_client
):
    response = alice_client.post(
        "/api/shares",
        json.dumps({"session_id": session.pk, "mode": "conversation"}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["mode"] == "conversation"
    link = ShareLink.objects.get(pk=response.json()["id"])
    assert link.mode == ShareLink.Mode.CONVERSATION
    snapshot = link.snapshot.data
    kinds = {block["type"] for _, block in _blocks(snapshot)}
    assert {"tool_result", "thinking", "tool_use", "text"} <= kinds
    for message, block in _blocks(snapshot):
        if block["type"] in ("tool_result", "thinking") or block.get("tool_name") == "Write":
            assert "[left out of this share:" in block["text"], block
            assert block["tokens"] > 0  # sizes stay
        if message.get("original_output") is not None:
            assert message["original_output"].startswith("[left out of this share:")
    left_out = {item["what"]: item["blocks"] for item in snapshot["left_out"]}
    assert set(left_out) == {"tool outputs", "thinking", "file contents"}
    # the prompts and replies are still there (redacted)
    assert any("Let me look at the config" in block["text"] for _, block in _blocks(snapshot))
    report = Client().get(response.json()["url"]).content.decode()
    assert 'id="share-mode-note"' in report
    assert "tool outputs" in report
    listed = alice_client.get("/api/shares").json()
    assert listed[0]["mode"] == "conversation"


def test_the_dialog_offers_the_mode_and_stores_it(session, alice_client):
    dialog = alice_client.get(f"/sessions/{session.pk}/share/").content.decode()
    assert 'name="mode" value="conversation"' in dialog
    response = alice_client.post(
        f"/sessions/{session.pk}/share/",
        {"audience": "link", "expires_in_days": "7", "mode": "conversation"},
    )
    assert response.status_code == 201
    assert ShareLink.objects.get().mode == ShareLink.Mode.CONVERSATION


def test_the_full_mode_stays_the_default(session, user):
    link, token = services.create_share(user=user, transcript=session)
    assert link.mode == ShareLink.Mode.FULL
    assert not any("[left out" in block["text"] for _, block in _blocks(link.snapshot.data))
    assert 'id="share-mode-note"' not in Client().get(f"/s/{token}/").content.decode()


def test_an_unknown_mode_is_a_field_error(session, alice_client):
    response = alice_client.post(
        "/api/shares",
        json.dumps({"session_id": session.pk, "mode": "everything"}),
        content_type="application/json",
    )
    assert response.status_code == 422


def test_the_banner_shows_a_display_name_never_a_raw_address(session, user):
    user.username = "jane.roe@corp-mail.io"
    user.save()
    _, token = services.create_share(user=user, transcript=session)
    banner = Client().get(f"/s/{token}/").content.decode()
    assert "jane.roe@corp-mail.io" not in banner
    assert "j…@….io" in banner
    user.first_name, user.last_name = "Jane", "Roe"
    user.save()
    assert services.display_name(user) == "Jane Roe"
