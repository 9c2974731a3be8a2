"""Someone without an account opens an invite link, signs up from it and lands joined in the
workspace; ``next`` is followed only within the site."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from contextlab.workspaces import services
from contextlab.workspaces.models import Membership

pytestmark = pytest.mark.django_db

PASSWORD = {"password1": "a-long-pass-42", "password2": "a-long-pass-42"}


@pytest.fixture
def invite(user):
    team = services.create_workspace(creator=user, name="Team")
    _, token = services.create_invite(workspace=team, creator=user, role="editor")
    return team, token


def test_signing_up_from_an_invite_link_joins_the_workspace(invite):
    team, token = invite
    client = Client()
    page = client.get(f"/workspaces/invite/{token}/").content.decode()
    signup_href = html.unescape(re.search(r'href="(/accounts/signup/[^"]+)"', page).group(1))
    form = client.get(signup_href).content.decode()
    assert 'id="signup-invite"' in form
    hidden_next = html.unescape(re.search(r'name="next" value="([^"]+)"', form).group(1))
    assert hidden_next == f"/workspaces/invite/{token}/"
    response = client.post(
        "/accounts/signup/", {"username": "newcomer", "next": hidden_next, **PASSWORD}
    )
    assert response.status_code == 302
    newcomer = get_user_model().objects.get(username="newcomer")
    membership = Membership.objects.get(workspace=team, user=newcomer)
    assert membership.role == "editor"
    landed = client.get(response["Location"]).content.decode()
    assert "You joined “Team” as editor" in landed
    # the invite was used: it works once
    other = Client()
    other.post("/accounts/signup/", {"username": "second", "next": hidden_next, **PASSWORD})
    second = get_user_model().objects.get(username="second")
    assert not Membership.objects.filter(workspace=team, user=second).exists()
    assert "already used" in other.get("/sessions/").content.decode()


def test_signup_follows_a_next_on_this_site_only(client):
    response = client.post("/accounts/signup/", {"username": "a", "next": "/tune/", **PASSWORD})
    assert response["Location"] == "/tune/"
    for bad in ("https://evil.example/", "//evil.example/x"):
        other = Client()
        response = other.post(
            "/accounts/signup/", {"username": f"u{len(bad)}", "next": bad, **PASSWORD}
        )
        assert response.status_code == 302
        assert response["Location"] == "/sessions/", bad


def test_a_bad_signup_keeps_the_invite(invite):
    _, token = invite
    client = Client()
    response = client.post(
        "/accounts/signup/",
        {
            "username": "x",
            "password1": "a-long-pass-42",
            "password2": "other-pass-42",
            "next": f"/workspaces/invite/{token}/",
        },
    )
    assert response.status_code == 400
    assert f'name="next" value="/workspaces/invite/{token}/"' in response.content.decode()
