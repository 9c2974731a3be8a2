from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

pytestmark = pytest.mark.django_db


def test_signup_creates_the_user_and_logs_in(client):
    response = client.post(
        "/accounts/signup/",
        {"username": "newbie", "password1": "a-long-pass-42", "password2": "a-long-pass-42"},
    )
    assert response.status_code == 302
    assert response["Location"] == "/sessions/"
    assert get_user_model().objects.filter(username="newbie").exists()
    assert client.get("/sessions/").status_code == 200


def test_signup_with_mismatched_passwords_says_so(client):
    response = client.post(
        "/accounts/signup/",
        {"username": "newbie", "password1": "a-long-pass-42", "password2": "other-pass-42"},
    )
    assert response.status_code == 400
    assert b"password fields didn" in response.content
    assert not get_user_model().objects.filter(username="newbie").exists()


def test_login_and_logout(client, user):
    response = client.post("/accounts/login/", {"username": "alice", "password": "pw-alice-123"})
    assert response.status_code == 302
    assert client.get("/sessions/").status_code == 200
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/sessions/").status_code == 302


def test_wrong_password_is_rejected(client, user):
    response = client.post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert b"correct username and password" in response.content


def test_root_redirects_to_the_session_list(client):
    assert client.get("/")["Location"] == "/sessions/"
