"""How the API authenticates: bearer tokens for scripts, the CSRF-checked session for pages."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.conftest import DEMO

pytestmark = pytest.mark.django_db

SHORT = DEMO / "marot__spotter__short.jsonl"


def post_upload(client: Client, **headers: str):
    with SHORT.open("rb") as fh:
        return client.post("/api/sessions", {"file": fh}, **headers)


def test_a_wrong_bearer_token_answers_401_with_how_to_authenticate():
    response = post_upload(Client(), HTTP_AUTHORIZATION="Bearer not-a-token")
    assert response.status_code == 401
    assert "Authorization: Bearer" in response.json()["detail"]


def test_a_wrong_bearer_token_beside_a_session_cookie_is_still_refused(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = post_upload(client, HTTP_AUTHORIZATION="Bearer not-a-token")
    assert response.status_code == 401


def test_the_browser_session_still_needs_its_csrf_token(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = post_upload(client)
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


@pytest.mark.usefixtures("clean_media")
def test_a_good_bearer_token_uploads(auth_header):
    assert post_upload(Client(), **auth_header).status_code == 201
