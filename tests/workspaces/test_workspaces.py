"""Workspaces, roles and the ownership gate, through the real services, pages and API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from contextlab.transcripts.models import Transcript
from contextlab.workspaces import access, services
from contextlab.workspaces.models import Invite, Membership, Role, Workspace

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="pw-bob-123")


@pytest.fixture
def team(user, bob):
    workspace = services.create_workspace(creator=user, name="Team")
    services.set_member(workspace=workspace, username="bob", role="viewer")
    return workspace


def test_every_user_gets_a_personal_workspace_they_own(user):
    workspace = Workspace.objects.get(personal_for=user)
    assert workspace.is_personal
    assert Membership.objects.get(workspace=workspace, user=user).role == Role.OWNER


def test_the_data_migration_gives_existing_users_a_personal_workspace(user, bob):
    from importlib import import_module

    Workspace.objects.filter(personal_for=bob).delete()  # as before the migration
    migration = import_module("contextlab.workspaces.migrations.0002_personal_workspaces")
    migration.create_personal_workspaces(apps, None)
    migration.create_personal_workspaces(apps, None)  # idempotent
    assert Workspace.objects.filter(personal_for=bob).count() == 1
    assert Workspace.objects.filter(personal_for=user).count() == 1
    assert Membership.objects.get(workspace__personal_for=bob, user=bob).role == "owner"


def test_uploads_go_to_the_personal_workspace_by_default(make_transcript, short_jsonl, user):
    transcript = make_transcript(short_jsonl)
    assert transcript.workspace == Workspace.objects.get(personal_for=user)


def test_roles_order():
    assert Role.OWNER.allows(Role.EDITOR)
    assert Role.EDITOR.allows(Role.VIEWER)
    assert not Role.VIEWER.allows(Role.EDITOR)
    assert access.roles_at_least(Role.EDITOR) == ["editor", "owner"]


def test_viewer_reads_but_cannot_run_or_delete(team, bob, make_transcript, short_jsonl, user):
    from contextlab.transcripts import services as transcript_services

    with short_jsonl.open("rb") as fh:
        transcript, _ = transcript_services.create_transcript(
            owner=user, name="t.jsonl", content=fh, workspace=team
        )
    client = login(bob)
    assert client.get(f"/sessions/{transcript.pk}/").status_code == 200
    assert client.get(f"/api/sessions/{transcript.pk}").status_code == 200
    assert client.post(f"/sessions/{transcript.pk}/runs/", {"preset": "auto"}).status_code == 403
    assert client.post(f"/sessions/{transcript.pk}/delete/").status_code == 403
    assert client.delete(f"/api/sessions/{transcript.pk}").status_code == 403
    assert Transcript.objects.filter(pk=transcript.pk).exists()
    # the list shows the team's session to its viewer
    assert "t.jsonl" in client.get("/sessions/").content.decode()


def test_losing_membership_ends_access_at_once(team, bob, user, short_jsonl):
    from contextlab.transcripts import services as transcript_services

    with short_jsonl.open("rb") as fh:
        transcript, _ = transcript_services.create_transcript(
            owner=user, name="t.jsonl", content=fh, workspace=team
        )
    client = login(bob)
    assert client.get(f"/sessions/{transcript.pk}/").status_code == 200
    owner = login(user)
    response = owner.delete(f"/api/workspaces/{team.pk}/members/bob")
    assert response.status_code == 204
    # the same logged-in session, the very next request
    assert client.get(f"/sessions/{transcript.pk}/").status_code == 404
    assert client.get(f"/api/sessions/{transcript.pk}").status_code == 404
    assert client.get(f"/runs/{transcript.runs.get().pk}/").status_code == 404
    assert "t.jsonl" not in client.get("/sessions/").content.decode()


def test_upload_form_and_api_take_a_workspace(team, user, bob, short_jsonl, tool_heavy_jsonl):
    editor = login(user)
    response = editor.post(
        "/sessions/upload/",
        {"file": SimpleUploadedFile("a.jsonl", short_jsonl.read_bytes()), "workspace": team.pk},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 201, response.content
    assert Transcript.objects.get(pk=response.json()["results"][0]["id"]).workspace == team
    response = editor.post(
        "/api/sessions",
        {
            "file": SimpleUploadedFile("b.jsonl", tool_heavy_jsonl.read_bytes()),
            "workspace_id": team.pk,
        },
    )
    assert response.status_code == 201, response.content
    assert response.json()["workspace_id"] == team.pk
    # the same bytes in another workspace are another session
    response = editor.post(
        "/api/sessions", {"file": SimpleUploadedFile("b.jsonl", tool_heavy_jsonl.read_bytes())}
    )
    assert response.status_code == 201
    assert response.json()["workspace_id"] == Workspace.objects.get(personal_for=user).pk


def test_a_viewer_cannot_upload_and_a_stranger_gets_404(team, bob, other_user, short_jsonl):
    data = short_jsonl.read_bytes()
    viewer = login(bob)
    response = viewer.post(
        "/api/sessions", {"file": SimpleUploadedFile("a.jsonl", data), "workspace_id": team.pk}
    )
    assert response.status_code == 403
    response = viewer.post(
        "/sessions/upload/",
        {"file": SimpleUploadedFile("a.jsonl", data), "workspace": team.pk},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 403
    stranger = login(other_user)
    response = stranger.post(
        "/api/sessions", {"file": SimpleUploadedFile("a.jsonl", data), "workspace_id": team.pk}
    )
    assert response.status_code == 404
    assert not Transcript.objects.filter(workspace=team).exists()


def test_workspace_api_create_add_remove(user, bob, client):
    owner = login(user)
    response = owner.post("/api/workspaces", {"name": "Agents"}, content_type="application/json")
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "Agents"
    assert body["role"] == "owner"
    wid = body["id"]
    response = owner.post(
        f"/api/workspaces/{wid}/members",
        {"username": "bob", "role": "editor"},
        content_type="application/json",
    )
    assert response.status_code == 201
    assert response.json() == {"username": "bob", "role": "editor"}
    response = owner.post(
        f"/api/workspaces/{wid}/members",
        {"username": "bob", "role": "boss"},
        content_type="application/json",
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "role"]
    response = owner.post(
        f"/api/workspaces/{wid}/members",
        {"username": "nobody", "role": "viewer"},
        content_type="application/json",
    )
    assert response.status_code == 422
    # an editor cannot manage members
    response = login(bob).delete(f"/api/workspaces/{wid}/members/{user.username}")
    assert response.status_code == 403
    # the last owner cannot leave
    response = owner.delete(f"/api/workspaces/{wid}/members/{user.username}")
    assert response.status_code == 422
    assert owner.delete(f"/api/workspaces/{wid}/members/bob").status_code == 204
    assert login(bob).get(f"/api/workspaces/{wid}").status_code == 404


def test_invite_is_one_use_and_expires(team, user, django_user_model):
    invite, token = services.create_invite(workspace=team, creator=user, role="editor")
    assert token not in invite.token_hash
    newcomer = django_user_model.objects.create_user(username="newcomer", password="pw-new-123")
    # logged out, the page asks to log in or sign up
    page = Client().get(f"/workspaces/invite/{token}/")
    assert page.status_code == 200
    assert b"sign up" in page.content
    client = login(newcomer)
    assert client.post(f"/workspaces/invite/{token}/").status_code == 302
    assert access.role_in(newcomer, team.pk) == Role.EDITOR
    other = django_user_model.objects.create_user(username="late", password="pw-late-123")
    response = login(other).post(f"/workspaces/invite/{token}/")
    assert response.status_code == 410
    assert b"already used" in response.content
    assert access.role_in(other, team.pk) is None
    expired, token2 = services.create_invite(workspace=team, creator=user, role="viewer")
    Invite.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert b"expired" in login(other).post(f"/workspaces/invite/{token2}/").content
    assert b"not valid" in login(other).post("/workspaces/invite/clw_wrong/").content


def test_workspaces_page_manages_members(team, user, bob):
    owner = login(user)
    page = owner.get("/workspaces/")
    assert page.status_code == 200
    assert b"Team" in page.content
    assert b"bob" in page.content
    response = owner.post(f"/workspaces/{team.pk}/members/", {"username": "bob", "role": "editor"})
    assert response.status_code == 302
    assert access.role_in(bob, team.pk) == Role.EDITOR
    response = owner.post(f"/workspaces/{team.pk}/invites/", {"role": "viewer"})
    page = owner.get("/workspaces/")
    assert b"/workspaces/invite/clw_" in page.content  # shown once
    assert b"/workspaces/invite/clw_" not in owner.get("/workspaces/").content
    # bob (now an editor) cannot manage
    assert (
        login(bob)
        .post(f"/workspaces/{team.pk}/members/remove/", {"username": user.username})
        .status_code
        == 403
    )


def test_leaving_a_workspace_takes_its_sessions_out_of_ones_comparisons(
    team, bob, user, short_jsonl
):
    from contextlab.jobs import replay as runner
    from contextlab.transcripts import services as transcript_services

    services.set_member(workspace=team, username="bob", role="editor")
    with short_jsonl.open("rb") as fh:
        transcript, _ = transcript_services.create_transcript(
            owner=user, name="t.jsonl", content=fh, workspace=team
        )
    runner.execute_run(transcript.runs.get().pk)
    bob_client = login(bob)
    response = bob_client.post(
        "/api/comparisons",
        {"session_ids": [transcript.pk], "a": {"preset": "auto"}, "b": {"preset": "auto"}},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    comparison_id = response.json()["id"]
    before = bob_client.get(f"/api/comparisons/{comparison_id}").json()
    assert before["a"]["run_ids"]
    assert b"t.jsonl" in bob_client.get(f"/compare/{comparison_id}/").content
    services.remove_member(workspace=team, username="bob")
    after = bob_client.get(f"/api/comparisons/{comparison_id}").json()
    assert after["a"]["run_ids"] == []
    assert after["b"]["run_ids"] == []
    page = bob_client.get(f"/compare/{comparison_id}/")
    assert page.status_code == 200
    assert b"t.jsonl" not in page.content
    assert bob_client.get(f"/compare/{comparison_id}/requests/0/").status_code == 404


def test_a_viewer_sees_no_controls_they_cannot_use(team, bob, user, short_jsonl):
    from contextlab.jobs import replay as runner
    from contextlab.transcripts import services as transcript_services

    with short_jsonl.open("rb") as fh:
        transcript, _ = transcript_services.create_transcript(
            owner=user, name="t.jsonl", content=fh, workspace=team
        )
    runner.execute_run(transcript.runs.get().pk)
    owner_page = login(user).get(f"/sessions/{transcript.pk}/").content
    for control in (b'id="run-form"', b'id="delete-form"', b'id="share-button"'):
        assert control in owner_page
    viewer_page = login(bob).get(f"/sessions/{transcript.pk}/").content
    for control in (b'id="run-form"', b'id="delete-form"', b'id="share-button"'):
        assert control not in viewer_page
    assert b'id="export-html"' in viewer_page  # reading includes downloading
