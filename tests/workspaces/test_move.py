"""Moving a session between workspaces: an editor of both moves it with its runs; its live
share links are revoked (their audience would change); comparisons of the old workspace keep
it, and members who cannot read the new workspace are told it is left out."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from contextlab.accounts.services import create_api_token
from contextlab.jobs import replay as runner
from contextlab.sharing import services as sharing
from contextlab.transcripts import services as transcript_services
from contextlab.tuning import configs as tuning_configs
from contextlab.tuning import services as tuning
from contextlab.workspaces import services

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


@pytest.fixture
def world(django_user_model, short_jsonl) -> dict[str, Any]:
    users = {
        name: django_user_model.objects.create_user(username=name, password="pw-123-xyz")
        for name in ("eddie", "vera", "bob", "olga")
    }
    source = services.create_workspace(creator=users["olga"], name="Source")
    target = services.create_workspace(creator=users["olga"], name="Target")
    services.set_member(workspace=source, username="eddie", role="editor")
    services.set_member(workspace=target, username="eddie", role="editor")
    services.set_member(workspace=source, username="vera", role="viewer")
    services.set_member(workspace=target, username="bob", role="viewer")
    with short_jsonl.open("rb") as fh:
        session, _ = transcript_services.create_transcript(
            owner=users["eddie"], name="moving.jsonl", content=fh, workspace=source
        )
    runner.execute_run(session.runs.get().pk)
    _, token = sharing.create_share(user=users["eddie"], transcript=session)
    comparison = tuning.create_comparison(
        owner=users["eddie"],
        transcripts=[session],
        a=tuning_configs.ConfigSpec(),
        b=tuning_configs.ConfigSpec(preset="aggressive"),
        workspace=source,
    )
    return {
        "users": users,
        "source": source,
        "target": target,
        "session": session,
        "token": token,
        "comparison": comparison,
    }


def client_of(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def move(user: Any, session_id: int, workspace_id: int) -> Any:
    token = create_api_token(username=user.username)[1]
    return Client().post(
        f"/api/sessions/{session_id}/move",
        {"workspace_id": workspace_id},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def test_an_editor_of_both_moves_the_session_with_its_runs(world):
    session, users = world["session"], world["users"]
    run_ids = set(session.runs.values_list("pk", flat=True))
    assert client_of(users["vera"]).get(session.get_absolute_url()).status_code == 200
    assert client_of(users["bob"]).get(session.get_absolute_url()).status_code == 404
    assert Client().get(f"/s/{world['token']}/").status_code == 200

    response = move(users["eddie"], session.pk, world["target"].pk)
    assert response.status_code == 200, response.content
    assert response.json() == {
        "id": session.pk,
        "workspace_id": world["target"].pk,
        "revoked_links": 1,
    }
    session.refresh_from_db()
    assert session.workspace == world["target"]
    # the runs belong to the session: they moved with it
    assert set(session.runs.values_list("pk", flat=True)) == run_ids
    bob = client_of(users["bob"])
    assert bob.get(session.get_absolute_url()).status_code == 200
    for run_id in run_ids:
        assert bob.get(f"/runs/{run_id}/").status_code in (200, 302)
    vera = client_of(users["vera"])
    assert vera.get(session.get_absolute_url()).status_code == 404
    assert vera.get(f"/runs/{min(run_ids)}/").status_code == 404
    # the link was made for the old workspace's audience
    assert Client().get(f"/s/{world['token']}/").status_code == 410


def test_the_old_workspaces_comparison_keeps_it_and_says_what_is_left_out(world):
    move(world["users"]["eddie"], world["session"].pk, world["target"].pk)
    url = world["comparison"].get_absolute_url()
    vera_page = client_of(world["users"]["vera"]).get(url)
    assert vera_page.status_code == 200
    text = vera_page.content.decode()
    assert 'id="hidden-sessions"' in text
    assert "moving.jsonl" not in text
    # eddie can read both workspaces: the comparison still has its session for him
    eddie_page = client_of(world["users"]["eddie"]).get(url).content.decode()
    assert 'id="hidden-sessions"' not in eddie_page
    assert "moving.jsonl" in eddie_page


@pytest.mark.parametrize(
    ("who", "where", "status", "says"),
    [
        ("vera", "target", 403, ""),  # a viewer of the source
        ("bob", "target", 404, ""),  # not a member of the source
        ("eddie", "source", 422, "already in Source"),
        ("eddie", "nowhere", 422, "no such workspace"),
    ],
)
def test_refusals(world, who, where, status, says):
    workspace_id = world[where].pk if where in world else 10**9
    response = move(world["users"][who], world["session"].pk, workspace_id)
    assert response.status_code == status, response.content
    assert says in response.content.decode()
    world["session"].refresh_from_db()
    assert world["session"].workspace == world["source"]


def test_a_viewer_of_the_target_cannot_move_there(world):
    services.set_member(workspace=world["target"], username="eddie", role="viewer")
    response = move(world["users"]["eddie"], world["session"].pk, world["target"].pk)
    assert response.status_code == 422
    assert "needs editor" in response.content.decode()


def test_the_target_already_holding_the_same_transcript_is_refused(world, short_jsonl):
    with short_jsonl.open("rb") as fh:
        transcript_services.create_transcript(
            owner=world["users"]["eddie"], name="copy.jsonl", content=fh, workspace=world["target"]
        )
    response = move(world["users"]["eddie"], world["session"].pk, world["target"].pk)
    assert response.status_code == 422
    assert "same transcript" in response.content.decode()


def test_the_report_offers_move_and_the_form_moves(world):
    eddie = client_of(world["users"]["eddie"])
    report = eddie.get(world["session"].get_absolute_url()).content.decode()
    assert 'id="move-button"' in report
    page = eddie.get(f"/workspaces/sessions/{world['session'].pk}/move/").content.decode()
    assert f'<option value="{world["target"].pk}">Target</option>' in page
    assert "1 live share link" in page
    response = eddie.post(
        f"/workspaces/sessions/{world['session'].pk}/move/", {"workspace_id": world["target"].pk}
    )
    assert response.status_code == 302
    world["session"].refresh_from_db()
    assert world["session"].workspace == world["target"]
    followed = eddie.get(response["Location"]).content.decode()
    assert "revoked 1 share link" in followed


def test_viewers_are_not_offered_the_move(world):
    vera = client_of(world["users"]["vera"])
    report = vera.get(world["session"].get_absolute_url()).content.decode()
    assert 'id="move-button"' not in report
    assert vera.get(f"/workspaces/sessions/{world['session'].pk}/move/").status_code == 403
