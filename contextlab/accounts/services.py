"""Account-side writes: API tokens and the demo user."""

from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, User
from django.db import DatabaseError
from django.db.models import Q
from django.utils import timezone

from contextlab.accounts.models import ApiToken

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "clb_"
#: last_used_at is written at most this often per token: every call writing it made a long
#: worker write on SQLite answer "database is locked" to API clients
LAST_USED_EVERY = timedelta(minutes=1)
#: the longest life a token can be given, days
MAX_TOKEN_DAYS = 3650


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_api_token(
    *, username: str, name: str = "", days: int | None = None
) -> tuple[ApiToken, str, bool]:
    """Create a token for ``username`` (creating the user if missing) that expires after
    ``days`` days (default API_TOKEN_DAYS; 0: never).

    Returns the row, the clear-text token (never stored) and whether the user was created.
    """
    token_days(days)  # refuse before creating the user
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=username)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return *issue_token(user=user, name=name, days=days), created


def issue_token(*, user: User, name: str = "", days: int | None = None) -> tuple[ApiToken, str]:
    """A new token of ``user``: the row and the clear text (shown once, never stored)."""
    days = token_days(days)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(
        user=user,
        key_hash=hash_token(token),
        prefix=token[:12],
        name=name[:100],
        expires_at=timezone.now() + timedelta(days=days) if days else None,
    )
    return row, token


def token_days(days: int | None) -> int:
    """The life of a new token in days (None: API_TOKEN_DAYS); ``ValueError`` out of range."""
    days = settings.API_TOKEN_DAYS if days is None else days
    if not 0 <= days <= MAX_TOKEN_DAYS:
        raise ValueError(f"days must be between 0 (never expires) and {MAX_TOKEN_DAYS}")
    return days


def revoke_token(*, owner: User, token_id: int) -> bool:
    """Revoke one of ``owner``'s tokens; False if they have no such active token."""
    updated = ApiToken.objects.filter(pk=token_id, user=owner, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    return updated == 1


def user_for_token(token: str) -> AbstractBaseUser | None:
    """The user of a valid token: not revoked, not expired, of an active user."""
    now = timezone.now()
    row = (
        ApiToken.objects.select_related("user")
        .filter(key_hash=hash_token(token), user__is_active=True, revoked_at__isnull=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .first()
    )
    if row is None:
        return None
    if row.last_used_at is None or row.last_used_at < now - LAST_USED_EVERY:
        try:
            ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
        except DatabaseError:
            # bookkeeping only: a busy database must not refuse a valid token
            logger.warning("could not record the use of API token %s", row.prefix)
    return row.user
