"""Configs, comparisons and sweeps belong to a workspace: members read them, editors create
(in a workspace they pick, their personal one by default) and run, owners delete; leaving
the workspace ends access with the next request."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from contextlab.accounts.services import create_api_token
from contextlab.transcripts import services as transcript_services
from contextlab.tuning import configs as tuning_configs
from contextlab.tuning import services
from contextlab.tuning.models import Comparison, SavedConfig, Sweep
from contextlab.workspaces import services as workspaces
from tests.tuning.conftest import EARLY

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


def spec(preset: str = "auto", **overrides: Any) -> tuning_configs.ConfigSpec:
    return tuning_configs.ConfigSpec(preset=preset, overrides=overrides)


@pytest.fixture
def team(django_user_model, tool_heavy_jsonl) -> dict[str, Any]:
    users = {
        name: django_user_model.objects.create_user(username=name, password="pw-123-xyz")
        for name in ("olive", "eddie", "vera", "nina")
    }
    workspace = workspaces.create_workspace(creator=users["olive"], name="Team")
    workspaces.set_member(workspace=workspace, username="eddie", role="editor")
    workspaces.set_member(workspace=workspace, username="vera", role="viewer")
    with tool_heavy_jsonl.open("rb") as fh:
        session, _ = transcript_services.create_transcript(
            owner=users["eddie"], name="team.jsonl", content=fh, workspace=workspace
        )
    comparison = services.create_comparison(
        owner=users["eddie"],
        transcripts=[session],
        a=spec(),
        b=spec(**EARLY),
        workspace=workspace,
    )
    sweep = services.create_sweep(
        owner=users["eddie"],
        transcripts=[session],
        base=spec(),
        field_name="autocompact_pct_override",
        values=[50, 80],
        workspace=workspace,
    )
    version = services.save_config(
        owner=users["eddie"], name="team-early", preset="auto", overrides=EARLY, workspace=workspace
    )
    return {
        "users": users,
        "workspace": workspace,
        "session": session,
        "comparison": comparison,
        "sweep": sweep,
        "config": version.saved_config,
        "version": version,
    }


def client_of(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def bearer(user: Any) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {create_api_token(username=user.username)[1]}"}


def test_members_read_nonmembers_get_404(team):
    pages = [
        team["comparison"].get_absolute_url(),
        team["sweep"].get_absolute_url(),
        team["config"].get_absolute_url(),
    ]
    for name in ("olive", "eddie", "vera"):
        client = client_of(team["users"][name])
        for url in pages:
            assert client.get(url).status_code == 200, (name, url)
        index = client.get("/tune/").content.decode()
        assert f"#{team['comparison'].pk}" in index, name
        assert "team-early" in index, name
        assert client.get(f"/api/comparisons/{team['comparison'].pk}").json()["workspace_id"] == (
            team["workspace"].pk
        )
    nina = client_of(team["users"]["nina"])
    for url in pages:
        assert nina.get(url).status_code == 404, url
    assert f"#{team['comparison'].pk}" not in nina.get("/tune/").content.decode()
    assert nina.get("/api/comparisons").json() == []
    assert nina.get(f"/api/sweeps/{team['sweep'].pk}").status_code == 404


def test_only_owners_delete_and_pages_offer_the_buttons_by_role(team):
    comparison, sweep, config = team["comparison"], team["sweep"], team["config"]
    for name in ("vera", "eddie"):
        client = client_of(team["users"][name])
        page = client.get(comparison.get_absolute_url()).content.decode()
        assert 'id="delete-form"' not in page, name
        assert ('id="share-button"' in page) is (name == "eddie"), name
        assert client.post(f"/compare/{comparison.pk}/delete/").status_code == 403, name
        assert client.post(f"/sweeps/{sweep.pk}/delete/").status_code == 403, name
        assert client.post(f"/configs/{config.pk}/delete/").status_code == 403, name
        response = client.delete(f"/api/comparisons/{comparison.pk}", **bearer(team["users"][name]))
        assert response.status_code == 403, name
    assert Comparison.objects.filter(pk=comparison.pk).exists()
    olive = client_of(team["users"]["olive"])
    assert 'id="delete-form"' in olive.get(comparison.get_absolute_url()).content.decode()
    assert olive.post(f"/compare/{comparison.pk}/delete/").status_code == 302
    assert olive.post(f"/sweeps/{sweep.pk}/delete/").status_code == 302
    assert olive.post(f"/configs/{config.pk}/delete/").status_code == 302
    assert not Comparison.objects.filter(pk=comparison.pk).exists()
    assert not Sweep.objects.filter(pk=sweep.pk).exists()
    assert not SavedConfig.objects.filter(pk=config.pk).exists()


def test_viewers_cannot_save_a_new_version_of_a_team_config(team):
    vera = client_of(team["users"]["vera"])
    page = vera.get(team["config"].get_absolute_url()).content.decode()
    assert 'id="save-config"' not in page
    assert "you are a viewer here" in page
    editor_page = client_of(team["users"]["eddie"]).get(team["config"].get_absolute_url())
    assert 'id="save-config"' in editor_page.content.decode()
    response = vera.post(team["config"].get_absolute_url(), {"name": "x", "preset": "auto"})
    assert response.status_code == 403
    assert team["config"].versions.count() == 1


def test_leaving_the_workspace_ends_access_at_once(team):
    vera = client_of(team["users"]["vera"])
    url = team["comparison"].get_absolute_url()
    assert vera.get(url).status_code == 200
    workspaces.remove_member(workspace=team["workspace"], username="vera")
    assert vera.get(url).status_code == 404
    assert vera.get(team["sweep"].get_absolute_url()).status_code == 404
    assert vera.get(team["config"].get_absolute_url()).status_code == 404


def test_api_creates_in_the_named_workspace_or_the_personal_one(team):
    eddie = team["users"]["eddie"]
    body = {"session_ids": [team["session"].pk], "a": {}, "b": {"config": EARLY}}
    named = {**body, "workspace_id": team["workspace"].pk}
    response = Client().post(
        "/api/comparisons", named, content_type="application/json", **bearer(eddie)
    )
    assert response.status_code == 201, response.content
    assert Comparison.objects.get(pk=response.json()["id"]).workspace == team["workspace"]
    response = Client().post(
        "/api/comparisons", body, content_type="application/json", **bearer(eddie)
    )
    assert response.status_code == 201
    created = Comparison.objects.get(pk=response.json()["id"])
    assert created.workspace == workspaces.personal_workspace(eddie)
    sweep = {
        "session_ids": [team["session"].pk],
        "field": "autocompact_pct_override",
        "values": [60],
        "workspace_id": team["workspace"].pk,
    }
    response = Client().post("/api/sweeps", sweep, content_type="application/json", **bearer(eddie))
    assert response.status_code == 201
    assert Sweep.objects.get(pk=response.json()["id"]).workspace == team["workspace"]


def test_a_viewer_cannot_create_in_the_team_workspace(team, short_jsonl):
    vera = team["users"]["vera"]
    with short_jsonl.open("rb") as fh:
        own, _ = transcript_services.create_transcript(owner=vera, name="own.jsonl", content=fh)
    body = {
        "session_ids": [own.pk],
        "a": {},
        "b": {},
        "workspace_id": team["workspace"].pk,
    }
    response = Client().post(
        "/api/comparisons", body, content_type="application/json", **bearer(vera)
    )
    assert response.status_code == 422
    assert "workspace_id" in response.content.decode()
    assert "viewer" in response.content.decode()
    nina = team["users"]["nina"]
    response = Client().post(
        "/api/comparisons",
        {**body, "session_ids": [own.pk]},
        content_type="application/json",
        **bearer(nina),
    )
    assert response.status_code == 404  # not even the session is hers
    assert not Comparison.objects.filter(sessions=own).exists()


def test_a_viewer_may_use_a_team_config_in_their_own_comparison(team, short_jsonl):
    vera = team["users"]["vera"]
    with short_jsonl.open("rb") as fh:
        own, _ = transcript_services.create_transcript(owner=vera, name="own.jsonl", content=fh)
    body = {"session_ids": [own.pk], "a": {}, "b": {"version_id": team["version"].pk}}
    response = Client().post(
        "/api/comparisons", body, content_type="application/json", **bearer(vera)
    )
    assert response.status_code == 201, response.content
    created = Comparison.objects.get(pk=response.json()["id"])
    assert created.b_version == team["version"]
    assert created.workspace == workspaces.personal_workspace(vera)
    nina = team["users"]["nina"]
    response = Client().post(
        "/api/comparisons", body, content_type="application/json", **bearer(nina)
    )
    assert response.status_code == 404


def test_the_forms_offer_editable_workspaces_and_create_there(team):
    eddie = client_of(team["users"]["eddie"])
    form = eddie.get("/compare/new/").content.decode()
    assert 'name="workspace_id"' in form
    assert "Team" in form
    response = eddie.post(
        "/compare/new/",
        {
            "sessions": [team["session"].pk],
            "a_config": "preset:auto",
            "b_config": "preset:aggressive",
            "workspace_id": team["workspace"].pk,
        },
    )
    assert response.status_code == 302
    created = Comparison.objects.exclude(pk=team["comparison"].pk).get()
    assert created.workspace == team["workspace"]
    response = eddie.post(
        "/configs/new/", {"name": "eddie-own", "preset": "auto", "workspace_id": ""}
    )
    assert response.status_code == 302
    assert SavedConfig.objects.get(name="eddie-own").workspace == workspaces.personal_workspace(
        team["users"]["eddie"]
    )
    vera = client_of(team["users"]["vera"])
    assert ">Team<" not in vera.get("/compare/new/").content.decode()  # a viewer there
    response = vera.post(
        "/configs/new/", {"name": "v", "preset": "auto", "workspace_id": team["workspace"].pk}
    )
    assert response.status_code == 422
    assert "creating needs editor" in response.content.decode()
    assert not SavedConfig.objects.filter(name="v").exists()


def test_config_names_are_unique_per_workspace(team):
    eddie = team["users"]["eddie"]
    with pytest.raises(services.TuningError, match="Team already has"):
        services.save_config(
            owner=team["users"]["olive"],
            name="team-early",
            preset="auto",
            overrides={},
            workspace=team["workspace"],
        )
    # the same name in one's personal workspace is another config
    services.save_config(owner=eddie, name="team-early", preset="auto", overrides={})
    assert SavedConfig.objects.filter(name="team-early").count() == 2


def test_a_form_opened_for_a_team_session_defaults_to_the_team(team):
    eddie = client_of(team["users"]["eddie"])
    for url in ("/compare/new/", "/sweeps/new/"):
        form = eddie.get(f"{url}?session={team['session'].pk}").content.decode()
        assert f'<option value="{team["workspace"].pk}" selected>Team</option>' in form, url
        plain = eddie.get(url).content.decode()
        assert f'<option value="{team["workspace"].pk}" selected>' not in plain, url
