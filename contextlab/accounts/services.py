"""Account-side writes: API tokens and the demo user."""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from contextlab.accounts.models import ApiToken

TOKEN_PREFIX = "clb_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_api_token(*, username: str, name: str = "") -> tuple[ApiToken, str, bool]:
    """Create a token for ``username`` (creating the user if missing).

    Returns the row, the clear-text token (never stored) and whether the user was created.
    """
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=username)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(
        user=user, key_hash=hash_token(token), prefix=token[:12], name=name
    )
    return row, token, created


def user_for_token(token: str) -> AbstractBaseUser | None:
    row = (
        ApiToken.objects.select_related("user")
        .filter(key_hash=hash_token(token), user__is_active=True)
        .first()
    )
    if row is None:
        return None
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=timezone.now())
    return row.user
