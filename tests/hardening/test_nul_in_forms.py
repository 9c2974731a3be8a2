"""A NUL character in a web form field is refused with an error on that field, never a 500
(PostgreSQL cannot store NUL: before the forms were Django forms, each of these pages crashed
saving it). Django's ``CharField`` refuses it: "Null characters are not allowed."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages

from contextlab.accounts.models import ApiToken
from contextlab.tuning.models import SavedConfig
from contextlab.workspaces import services as workspaces
from contextlab.workspaces.models import Membership, Workspace

pytestmark = pytest.mark.django_db

NUL_REFUSED = "Null characters are not allowed"


def shown_messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def team(user):
    return workspaces.create_workspace(creator=user, name="Team")


def test_a_new_workspace_named_with_nul_is_refused(alice_client, user):
    response = alice_client.post("/workspaces/new/", {"name": "Te\x00am"})
    assert response.status_code == 302
    assert any(NUL_REFUSED in m and "name" in m for m in shown_messages(response))
    assert not Workspace.objects.filter(name__startswith="Te").exists()


def test_adding_a_member_named_with_nul_is_refused(alice_client, team, other_user):
    response = alice_client.post(
        f"/workspaces/{team.pk}/members/", {"username": "bo\x00b", "role": "editor"}
    )
    assert response.status_code == 302
    assert any(NUL_REFUSED in m and "username" in m for m in shown_messages(response))
    assert Membership.objects.filter(workspace=team).count() == 1


def test_a_member_role_with_nul_is_refused(alice_client, team, other_user):
    response = alice_client.post(
        f"/workspaces/{team.pk}/members/", {"username": other_user.username, "role": "ed\x00"}
    )
    assert any(NUL_REFUSED in m and "role" in m for m in shown_messages(response))


def test_removing_a_member_named_with_nul_is_refused(alice_client, team, other_user):
    workspaces.set_member(workspace=team, username=other_user.username, role="viewer")
    response = alice_client.post(
        f"/workspaces/{team.pk}/members/remove/", {"username": other_user.username + "\x00"}
    )
    assert response.status_code == 302
    assert any(NUL_REFUSED in m and "username" in m for m in shown_messages(response))
    assert Membership.objects.filter(workspace=team, user=other_user).exists()


def test_a_new_config_named_with_nul_is_refused_beside_its_field(alice_client):
    response = alice_client.post("/configs/new/", {"name": "ear\x00ly", "preset": "auto"})
    assert response.status_code == 422
    body = response.content.decode()
    assert 'id="name-error"' in body
    assert NUL_REFUSED in body
    assert not SavedConfig.objects.exists()


def test_a_config_setting_with_nul_is_refused_beside_its_field(alice_client):
    response = alice_client.post(
        "/configs/new/",
        {"name": "early", "preset": "auto", "cache_ttl": "5\x00m"},
    )
    assert response.status_code == 422
    body = response.content.decode()
    assert 'data-field="cache_ttl"' in body
    assert NUL_REFUSED in body
    assert not SavedConfig.objects.exists()


def test_a_new_api_token_named_with_nul_is_refused(alice_client, user):
    response = alice_client.post("/accounts/tokens/", {"name": "lap\x00top", "days": "7"})
    assert response.status_code == 400
    assert NUL_REFUSED in response.content.decode()
    assert not ApiToken.objects.filter(user=user).exists()


def test_share_dialog_choices_with_nul_are_refused(alice_client, make_transcript, short_jsonl):
    from contextlab.jobs import replay
    from contextlab.sharing.models import ShareLink

    transcript = make_transcript(short_jsonl)
    replay.execute_run(transcript.runs.get().pk)
    for choices in ({"audience": "li\x00nk"}, {"audience": "link", "keep": ["email\x00"]}):
        response = alice_client.post(
            f"/sessions/{transcript.pk}/share/", {"expires_in_days": "7", **choices}
        )
        assert response.status_code == 422, choices
    assert not ShareLink.objects.exists()
