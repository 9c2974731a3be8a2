"""A resumed session uploaded as its own file is linked to the session it continues.

Claude Code writes a new file when a session is resumed: its first record's ``parentUuid`` is a
record of the older file. Uploaded apart (several files dropped at once, the older one days
later, a SessionEnd hook), the two are linked in the workspace, in either order, and the newer
one replays stitched to the older, as one conversation.
"""

from __future__ import annotations

import gzip
import itertools
import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from contextlab.jobs import replay as runner
from contextlab.runs import services as run_services
from contextlab.runs.models import Run, RunResult
from contextlab.transcripts import continuations, moving, services
from contextlab.transcripts.models import Transcript, TranscriptMessages
from contextlab.workspaces import services as workspaces
from tests.engine.builders import TranscriptBuilder

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

PARENT_PROMPTS = [f"parent step {n}: explain the module" for n in range(4)]
CHILD_PROMPTS = [f"child step {n}: go on" for n in range(2)]


def jsonl(builder: TranscriptBuilder) -> bytes:
    """The records as Claude Code writes them: compact JSON, one per line."""
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in builder.records).encode()


def parent_and_child() -> tuple[TranscriptBuilder, TranscriptBuilder]:
    """A session of 4 requests, and its resumption in a new file (2 requests) whose first
    record hangs from the older file's last record. The newer file's first prompt is far above
    the system/tools level, as the real history it continues is: alone, it carries an
    "earlier history" span."""
    parent = TranscriptBuilder(session_id="aaaaaaaa-1111-4111-8111-111111111111")
    for text in PARENT_PROMPTS:
        parent.prompt(text)
        parent.assistant([{"type": "text", "text": "a long answer " * 2000}], grow=8000)
    child = TranscriptBuilder(
        session_id="bbbbbbbb-2222-4222-8222-222222222222",
        _ids=itertools.count(50_000),
        last_uuid=parent.last_uuid,
        clock=parent.clock,
        usage_total=parent.usage_total,
    )
    for n, text in enumerate(CHILD_PROMPTS):
        child.prompt(text)
        child.assistant(
            [{"type": "text", "text": "a short answer " * 200}],
            grow=1000,
            message_id=f"msg_child_{n}",
        )
    return parent, child


def store(user: Any, name: str, data: bytes, workspace: Any = None) -> Transcript:
    transcript, stored = services.store_upload(
        owner=user, name=name, content=[data], workspace=workspace
    )
    assert stored is services.Stored.CREATED
    return transcript


def replay(transcript: Transcript) -> dict[str, Any]:
    """Run the session's recorded replay (queued by the upload, or again by a link) and return
    its result."""
    run = transcript.runs.get(mode=Run.Mode.RECORDED)
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE, run.error
    data = run_services.result_data(run)
    assert data is not None
    return data


def earlier_history(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in result["session"]["threads"][0]["anchors"] if a["kind"] == "earlier_history"]


def prompts(transcript: Transcript) -> list[str]:
    assert TranscriptMessages.objects.filter(transcript=transcript).exists()
    messages = run_services.session_messages(transcript)
    return [
        "".join(b["text"] for b in m["blocks"] if b["type"] == "text")
        for m in messages["main"]
        if m["kind"] == "prompt"
    ]


def assert_stitched(child: Transcript) -> None:
    result = replay(child)
    assert earlier_history(result) == []
    assert all(r["earlier_history_tokens"] == 0 for r in result["requests"])
    assert len(result["requests"]) == len(PARENT_PROMPTS) + len(CHILD_PROMPTS)
    assert prompts(child) == PARENT_PROMPTS + CHILD_PROMPTS


def assert_alone(child: Transcript) -> None:
    result = replay(child)
    assert len(earlier_history(result)) == 1
    assert len(result["requests"]) == len(CHILD_PROMPTS)
    assert prompts(child) == CHILD_PROMPTS


def test_the_parent_uploaded_later_links_the_child_and_replays_it_stitched(
    user, django_capture_on_commit_callbacks
):
    parent_file, child_file = parent_and_child()
    child = store(user, "child.jsonl", jsonl(child_file))
    assert child.continues_uuid == parent_file.last_uuid
    assert child.continues is None
    assert_alone(child)
    run = child.runs.get()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        parent = store(user, "parent.jsonl", jsonl(parent_file))
    child.refresh_from_db()
    assert child.continues == parent
    assert list(parent.continued_by.all()) == [child]
    assert parent.continues is None
    # the child's replay was read without its history: it goes, and is queued again
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert not RunResult.objects.filter(run=run).exists()
    assert not TranscriptMessages.objects.filter(transcript=child).exists()
    assert callbacks, "the replays were not sent"
    assert_stitched(child)
    # the parent itself is as it was: its own file, its own replay
    assert len(replay(parent)["requests"]) == len(PARENT_PROMPTS)


def test_a_child_uploaded_after_its_parent_is_linked_at_once(user):
    parent_file, child_file = parent_and_child()
    parent = store(user, "parent.jsonl", jsonl(parent_file))
    child = store(user, "child.jsonl", jsonl(child_file))
    assert child.continues == parent
    assert child.runs.count() == 1  # its first replay is already the stitched one
    assert_stitched(child)


@pytest.mark.parametrize("parent_first", [True, False], ids=["parent-first", "child-first"])
def test_a_gzipped_parent_links_in_either_order(user, parent_first):
    parent_file, child_file = parent_and_child()
    uploads = [
        ("parent.jsonl.gz", gzip.compress(jsonl(parent_file))),
        ("child.jsonl", jsonl(child_file)),
    ]
    stored = {
        name: store(user, name, data) for name, data in (uploads if parent_first else uploads[::-1])
    }
    child = Transcript.objects.get(pk=stored["child.jsonl"].pk)
    assert child.continues_id == stored["parent.jsonl.gz"].pk
    assert_stitched(child)


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_the_record_is_found_wherever_a_read_splits_it(user, monkeypatch, chunk):
    monkeypatch.setattr(continuations, "_SCAN_CHUNK", chunk)
    parent_file, child_file = parent_and_child()
    parent = store(user, "parent.jsonl", jsonl(parent_file))
    child = store(user, "child.jsonl", jsonl(child_file))
    assert child.continues == parent


def test_a_parent_written_with_spaces_after_colons_is_found(user):
    parent_file, child_file = parent_and_child()
    parent = store(user, "parent.jsonl", parent_file.text().encode())  # json.dumps' default
    child = store(user, "child.jsonl", jsonl(child_file))
    assert child.continues == parent


def test_an_unrelated_session_is_not_linked(user, alice_client):
    parent_file, child_file = parent_and_child()
    other = TranscriptBuilder(session_id="cccccccc-3333-4333-8333-333333333333")
    other.prompt("something else")
    other.assistant([{"type": "text", "text": "ok"}])
    # the same project and the child's own text quoting the parent's uuid do not make a link
    other.prompt(f'the record "uuid": "{parent_file.last_uuid}" is mentioned here')
    other.assistant([{"type": "text", "text": f'uuid":"{parent_file.last_uuid}'}])
    unrelated = store(user, "other.jsonl", jsonl(other))
    child = store(user, "child.jsonl", jsonl(child_file))
    assert child.continues is None
    unrelated.refresh_from_db()
    assert unrelated.continues is None
    assert not unrelated.continued_by.exists()
    page = alice_client.get(child.get_absolute_url()).content.decode()
    assert 'id="continues-missing"' in page
    assert "Upload the earlier session file to this workspace" in page


@pytest.mark.parametrize(
    "hostile",
    [
        "0" * 10_000,  # far past any uuid (and the column)
        'x","uuid":"{parent}',  # quotes: a record of its own inside the value
        "{parent_prefix}",  # the start of a real uuid
        ".*",  # regular-expression characters
        '(?:.*)+\\"[0-9a-f-]{{36}}',  # a backslash and a quote too
    ],
    ids=["very-long", "quotes", "prefix", "regex", "regex-backslash"],
)
@pytest.mark.parametrize("parent_first", [True, False], ids=["parent-first", "child-first"])
def test_a_hostile_parent_uuid_links_nothing(user, hostile, parent_first):
    parent_file, child_file = parent_and_child()
    value = hostile.format(parent=parent_file.last_uuid, parent_prefix=parent_file.last_uuid[:-2])
    child_file.records[0]["parentUuid"] = value
    uploads = [("parent.jsonl", jsonl(parent_file)), ("child.jsonl", jsonl(child_file))]
    stored = {
        name: store(user, name, data) for name, data in (uploads if parent_first else uploads[::-1])
    }
    child = Transcript.objects.get(pk=stored["child.jsonl"].pk)
    assert child.continues is None
    assert child.continues_uuid == ("" if len(value) > 100 else value)
    assert_alone(child)


def test_deleting_the_parent_unlinks_the_child_and_replays_it(user, alice_client):
    parent_file, child_file = parent_and_child()
    parent = store(user, "parent.jsonl", jsonl(parent_file))
    child = store(user, "child.jsonl", jsonl(child_file))
    assert_stitched(child)
    run = child.runs.get()

    response = alice_client.post(f"/sessions/{parent.pk}/delete/")
    assert response.status_code == 302
    child.refresh_from_db()
    assert child.continues is None
    assert child.continues_uuid == parent_file.last_uuid
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert not TranscriptMessages.objects.filter(transcript=child).exists()
    assert_alone(child)


def test_a_chain_of_resumes_is_followed_to_its_start(user):
    parent_file, child_file = parent_and_child()
    grandchild_file = TranscriptBuilder(
        session_id="dddddddd-4444-4444-8444-444444444444",
        _ids=itertools.count(90_000),
        last_uuid=child_file.last_uuid,
        clock=child_file.clock,
        usage_total=child_file.usage_total,
    )
    grandchild_file.prompt("grandchild step")
    grandchild_file.assistant([{"type": "text", "text": "fine"}], message_id="msg_grandchild")
    # the newest first: each earlier one arrives later
    grandchild = store(user, "grandchild.jsonl", jsonl(grandchild_file))
    child = store(user, "child.jsonl", jsonl(child_file))
    grandchild.refresh_from_db()
    assert grandchild.continues == child
    replay(grandchild)
    parent = store(user, "parent.jsonl", jsonl(parent_file))
    child.refresh_from_db()
    assert child.continues == parent
    # the grandchild's history grew by the parent: it replays again too
    assert grandchild.runs.get().status == Run.Status.QUEUED
    result = replay(grandchild)
    assert len(result["requests"]) == len(PARENT_PROMPTS) + len(CHILD_PROMPTS) + 1
    assert prompts(grandchild)[0] == PARENT_PROMPTS[0]


def test_files_that_hang_from_each_other_make_no_loop(user):
    first = TranscriptBuilder(session_id="eeeeeeee-5555-4555-8555-555555555555")
    first.prompt("first")
    first.assistant([{"type": "text", "text": "one"}])
    second = TranscriptBuilder(
        session_id="ffffffff-6666-4666-8666-666666666666", _ids=itertools.count(70_000)
    )
    second.prompt("second")
    second.assistant([{"type": "text", "text": "two"}], message_id="msg_second")
    first.records[0]["parentUuid"] = second.last_uuid
    second.records[0]["parentUuid"] = first.last_uuid
    a = store(user, "a.jsonl", jsonl(first))
    b = store(user, "b.jsonl", jsonl(second))
    a.refresh_from_db()
    b.refresh_from_db()
    assert (a.continues, b.continues) in ((None, a), (b, None))
    replay(a)
    replay(b)


def test_another_workspaces_session_is_never_linked(user, other_user):
    parent_file, child_file = parent_and_child()
    theirs = store(other_user, "parent.jsonl", jsonl(parent_file))
    child = store(user, "child.jsonl", jsonl(child_file))
    assert child.continues is None
    # nor the other way round: their child, our parent
    _, their_child_file = parent_and_child()
    their_child_file.records[0]["sessionId"] = "99999999-9999-4999-8999-999999999999"
    their_child = store(other_user, "their-child.jsonl", jsonl(their_child_file))
    assert their_child.continues == theirs  # linked in their own workspace
    ours = Transcript.objects.get(pk=store(user, "parent.jsonl", jsonl(parent_file)).pk)
    child.refresh_from_db()
    assert child.continues == ours
    their_child.refresh_from_db()
    assert their_child.continues == theirs
    assert not theirs.continued_by.filter(workspace=child.workspace).exists()


def test_a_moved_session_leaves_its_links_and_finds_them_in_its_new_workspace(user):
    team = workspaces.create_workspace(creator=user, name="Team")
    parent_file, child_file = parent_and_child()
    parent = store(user, "parent.jsonl", jsonl(parent_file))
    child = store(user, "child.jsonl", jsonl(child_file), workspace=team)
    assert child.continues is None  # another workspace
    replay(child)

    moving.move_session(user=user, transcript=parent, workspace_id=team.pk)
    child.refresh_from_db()
    assert child.continues == parent
    assert_stitched(child)

    personal = workspaces.personal_workspace(user)
    moving.move_session(user=user, transcript=parent, workspace_id=personal.pk)
    child.refresh_from_db()
    assert child.continues is None
    assert_alone(child)


# --- over HTTP ---------------------------------------------------------------------------------

JSON = {"HTTP_ACCEPT": "application/json"}


def test_files_dropped_together_on_the_page_are_linked(alice_client):
    parent_file, child_file = parent_and_child()
    response = alice_client.post(
        "/sessions/upload/",
        {
            "file": [
                SimpleUploadedFile("child.jsonl", jsonl(child_file)),
                SimpleUploadedFile("parent.jsonl", jsonl(parent_file)),
            ]
        },
        **JSON,
    )
    assert response.status_code == 201
    child_id, parent_id = (r["id"] for r in response.json()["results"])
    child = Transcript.objects.get(pk=child_id)
    assert child.continues_id == parent_id
    assert_stitched(child)


def test_the_api_uploads_link_and_say_so(client, auth_header, user):
    parent_file, child_file = parent_and_child()

    def post(name: str, data: bytes) -> dict[str, Any]:
        response = client.post(
            "/api/sessions", {"file": SimpleUploadedFile(name, data)}, **auth_header
        )
        assert response.status_code == 201
        body: dict[str, Any] = response.json()
        return body

    parent = post("parent.jsonl", jsonl(parent_file))
    child = post("child.jsonl", jsonl(child_file))
    assert parent["continues"] is None
    assert child["continues"] == parent["id"]
    detail = client.get(f"/api/sessions/{child['id']}", **auth_header).json()
    assert detail["continues"] == parent["id"]
    listed = {s["id"]: s["continues"] for s in client.get("/api/sessions", **auth_header).json()}
    assert listed == {parent["id"]: None, child["id"]: parent["id"]}


def test_the_reports_link_both_ways_and_escape_the_names(user, alice_client, other_user):
    parent_file, child_file = parent_and_child()
    parent_file.records.append(
        {"type": "custom-title", "customTitle": "<script>alert(1)</script>", "sessionId": "s"}
    )
    # the link names a session by its display name: the child's is its title, hostile too
    child_file.records.append(
        {"type": "custom-title", "customTitle": "<img src=x onerror=alert(1)>", "sessionId": "s"}
    )
    parent = store(user, "parent.jsonl", jsonl(parent_file))
    child = store(user, "<img src=x onerror=alert(1)>.jsonl", jsonl(child_file))
    child_page = alice_client.get(child.get_absolute_url()).content.decode()
    assert "Continues" in child_page
    assert f'href="{parent.get_absolute_url()}"' in child_page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in child_page
    assert "<script>alert(1)</script>" not in child_page
    assert 'id="continues-missing"' not in child_page
    parent_page = alice_client.get(parent.get_absolute_url()).content.decode()
    assert "Continued in" in parent_page
    assert f'href="{child.get_absolute_url()}"' in parent_page
    assert "&lt;img src=x onerror=alert(1)&gt;" in parent_page
    assert "<img src=x" not in parent_page
    # someone outside the workspace sees neither page
    stranger = Client()
    stranger.force_login(other_user)
    assert stranger.get(child.get_absolute_url()).status_code == 404
