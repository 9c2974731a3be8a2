"""Login and sign-up are rate-limited per client address (and login per username): past the
limit the page answers 429 with a message, and even the right password waits."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def low_limits(settings):
    settings.LOGIN_RATE = "5/m"
    settings.LOGIN_USER_RATE = "3/m"
    settings.SIGNUP_RATE = "2/h"
    cache.clear()
    yield
    cache.clear()


def login(client: Client, username: str, password: str, ip: str = "10.0.0.1"):
    return client.post(
        "/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=ip
    )


def test_guessing_one_password_is_stopped_after_the_user_limit(user):
    client = Client()
    statuses = [login(client, "alice", f"wrong-{i}").status_code for i in range(3)]
    assert statuses == [200, 200, 200]  # the form again, with its error
    blocked = login(client, "alice", "pw-alice-123")
    assert blocked.status_code == 429
    assert "Too many login attempts" in blocked.content.decode()
    assert "_auth_user_id" not in client.session  # not logged in, even with the right password


def test_many_usernames_from_one_address_hit_the_address_limit(user):
    client = Client()
    for i in range(5):
        assert login(client, f"user{i}", "x").status_code == 200
    assert login(client, "alice", "pw-alice-123").status_code == 429
    # another address is not affected
    assert login(Client(), "alice", "pw-alice-123", ip="10.0.0.2").status_code == 302


def test_a_right_password_under_the_limit_logs_in(user):
    client = Client()
    response = login(client, "alice", "pw-alice-123")
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(user.pk)


def test_signups_are_limited_per_address():
    client = Client()
    for i in range(2):
        response = client.post(
            "/accounts/signup/",
            {"username": f"new{i}", "password1": "a-Long-pass-123", "password2": "a-Long-pass-123"},
            REMOTE_ADDR="10.0.0.9",
        )
        assert response.status_code == 302, response.content[:300]
        Client().logout()
    third = Client().post(
        "/accounts/signup/",
        {"username": "new9", "password1": "a-Long-pass-123", "password2": "a-Long-pass-123"},
        REMOTE_ADDR="10.0.0.9",
    )
    assert third.status_code == 429
    assert "Too many sign-ups" in third.content.decode()
    assert not User.objects.filter(username="new9").exists()


def test_get_pages_are_not_counted(user):
    client = Client()
    for _ in range(20):
        assert client.get("/accounts/login/", REMOTE_ADDR="10.0.0.3").status_code == 200
    assert login(client, "alice", "pw-alice-123", ip="10.0.0.3").status_code == 302
