"""Login and sign-up are rate-limited per client address (and login per username): past the
limit the page answers 429 with a message, and even the right password waits."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def low_limits(settings, pinned_rate_clock):
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


def test_guessing_from_one_address_does_not_lock_the_user_out_elsewhere(user):
    for i in range(3):
        login(Client(), "alice", f"wrong-{i}", ip="10.0.0.66")
    assert login(Client(), "alice", "pw-alice-123", ip="10.0.0.66").status_code == 429
    # the user, from their own address, still logs in
    assert login(Client(), "alice", "pw-alice-123", ip="10.0.0.7").status_code == 302


@pytest.mark.parametrize(
    ("forwarded", "counted_as"),
    [
        ("203.0.113.5", "203.0.113.5"),
        ("198.51.100.1, 203.0.113.5", "203.0.113.5"),  # the proxy's own entry, not the claim
        ("not an address", "10.0.0.1"),
        ("", "10.0.0.1"),
    ],
)
def test_behind_a_proxy_clients_are_counted_by_the_forwarded_address(
    settings, rf, forwarded, counted_as
):
    from contextlab.http import client_address

    settings.CLIENT_ADDRESS_META_KEY = "HTTP_X_FORWARDED_FOR"
    request = rf.get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_address(request) == counted_as


def test_behind_a_proxy_one_clients_guesses_do_not_limit_another(settings, user):
    settings.CLIENT_ADDRESS_META_KEY = "HTTP_X_FORWARDED_FOR"
    proxy = "10.0.0.250"  # every request arrives from the proxy
    for i in range(5):
        Client().post(
            "/accounts/login/",
            {"username": f"user{i}", "password": "x"},
            REMOTE_ADDR=proxy,
            HTTP_X_FORWARDED_FOR="203.0.113.9",
        )
    other = Client().post(
        "/accounts/login/",
        {"username": "alice", "password": "pw-alice-123"},
        REMOTE_ADDR=proxy,
        HTTP_X_FORWARDED_FOR="203.0.113.10",
    )
    assert other.status_code == 302
