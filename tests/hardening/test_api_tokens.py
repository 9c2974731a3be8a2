"""API tokens expire and can be revoked by their owner on /accounts/tokens/; an expired or
revoked token is refused (401); last_used_at is written at most once a minute."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from contextlab.accounts import services
from contextlab.accounts.models import ApiToken

pytestmark = pytest.mark.django_db


def api_status(client, token: str) -> int:
    return client.get("/api/sessions", HTTP_AUTHORIZATION=f"Bearer {token}").status_code


def test_a_new_token_expires_after_the_default_days(settings, user):
    settings.API_TOKEN_DAYS = 30
    row, _token = services.issue_token(user=user)
    assert row.expires_at is not None
    assert abs(row.expires_at - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)


def test_an_expired_token_is_refused(client, user):
    row, token = services.issue_token(user=user, days=1)
    assert api_status(client, token) == 200
    ApiToken.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert api_status(client, token) == 401
    row.refresh_from_db()
    assert row.status == "expired"


def test_days_zero_never_expires_and_out_of_range_is_refused(user):
    row, _ = services.issue_token(user=user, days=0)
    assert row.expires_at is None
    with pytest.raises(ValueError, match="between 0"):
        services.issue_token(user=user, days=-1)
    with pytest.raises(ValueError, match="between 0"):
        services.issue_token(user=user, days=10**6)


def test_command_takes_days_and_refuses_bad_ones_without_creating_the_user(django_user_model):
    out = StringIO()
    call_command("create_api_token", "robot", "--days", "7", stdout=out, stderr=StringIO())
    assert ApiToken.objects.get(user__username="robot").expires_at is not None
    with pytest.raises(CommandError, match="between 0"):
        call_command("create_api_token", "ghost", "--days", "-3", stdout=out, stderr=StringIO())
    assert not django_user_model.objects.filter(username="ghost").exists()


def test_owner_revokes_a_token_on_the_tokens_page(client, alice_client, user):
    row, token = services.issue_token(user=user, name="laptop")
    page = alice_client.get("/accounts/tokens/")
    assert page.status_code == 200
    html = page.content.decode()
    assert row.prefix in html
    assert "laptop" in html
    assert token not in html  # only the prefix is ever shown again
    response = alice_client.post(f"/accounts/tokens/{row.pk}/revoke/")
    assert response.status_code == 302
    assert api_status(client, token) == 401
    row.refresh_from_db()
    assert row.status == "revoked"
    assert "revoked" in alice_client.get("/accounts/tokens/").content.decode()


def test_others_cannot_revoke_or_see_a_token(alice_client, mallory_client, user):
    row, _token = services.issue_token(user=user)
    assert mallory_client.post(f"/accounts/tokens/{row.pk}/revoke/").status_code == 404
    assert row.prefix not in mallory_client.get("/accounts/tokens/").content.decode()
    row.refresh_from_db()
    assert row.revoked_at is None
    assert alice_client.get(f"/accounts/tokens/{row.pk}/revoke/").status_code == 405


def test_the_page_creates_a_token_shown_once(client, alice_client, user):
    response = alice_client.post("/accounts/tokens/", {"name": "ci", "days": "5"})
    assert response.status_code == 200
    html = response.content.decode()
    row = ApiToken.objects.get(user=user, name="ci")
    token = html.split('id="new-token">')[1].split("<")[0]
    assert token.startswith(row.prefix)
    assert api_status(client, token) == 200
    assert token not in alice_client.get("/accounts/tokens/").content.decode()


@pytest.mark.parametrize("days", ["-1", "abc", "99999999", "1e3"])
def test_the_page_refuses_bad_days_with_a_message(alice_client, user, days):
    response = alice_client.post("/accounts/tokens/", {"name": "x", "days": days})
    assert response.status_code == 400
    assert "Days:" in response.content.decode()
    assert not ApiToken.objects.filter(user=user).exists()


def test_the_page_needs_login(client):
    assert client.get("/accounts/tokens/").status_code == 302


def test_last_used_is_written_at_most_once_a_minute(client, user, django_assert_num_queries):
    row, token = services.issue_token(user=user)
    services.user_for_token(token)
    row.refresh_from_db()
    first = row.last_used_at
    assert first is not None
    with django_assert_num_queries(1):  # the lookup only, no write
        assert services.user_for_token(token) is not None
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=first - timedelta(minutes=2))
    services.user_for_token(token)
    row.refresh_from_db()
    assert row.last_used_at > first - timedelta(minutes=2)
