from __future__ import annotations

import hashlib
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from contextlab.accounts.models import ApiToken

pytestmark = pytest.mark.django_db


def test_create_api_token_creates_the_user_and_stores_only_a_hash():
    out = StringIO()
    call_command("create_api_token", "robot", stdout=out, stderr=StringIO())
    token = out.getvalue().strip()
    assert token.startswith("clb_")
    user = get_user_model().objects.get(username="robot")
    row = ApiToken.objects.get(user=user)
    assert row.key_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in {row.key_hash, row.prefix, row.name}


def test_token_authenticates_api_calls(client):
    out = StringIO()
    call_command("create_api_token", "robot", stdout=out, stderr=StringIO())
    token = out.getvalue().strip()
    assert client.get("/api/sessions", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200


def test_each_call_makes_a_new_token_for_an_existing_user(user):
    first, second = StringIO(), StringIO()
    call_command("create_api_token", user.username, stdout=first, stderr=StringIO())
    call_command("create_api_token", user.username, stdout=second, stderr=StringIO())
    assert first.getvalue() != second.getvalue()
    assert ApiToken.objects.filter(user=user).count() == 2


@pytest.mark.parametrize("header", [None, "Bearer nope", "Token abc", "Bearer "])
def test_missing_or_bad_tokens_get_401(client, header):
    kwargs = {"HTTP_AUTHORIZATION": header} if header is not None else {}
    response = client.get("/api/sessions", **kwargs)
    assert response.status_code == 401
    assert "Bearer" in response.json()["detail"]
