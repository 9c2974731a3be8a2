"""The comment rate limit: ``COMMENT_RATE`` writes (new comments and edits) per user, pages and
API counted together, in the default cache like the login limits (contextlab.accounts.throttle)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from django_ratelimit.core import is_ratelimited  # type: ignore[import-untyped]


def _user(group: str, request: HttpRequest) -> str:
    return str(request.user.pk)


def limited(request: HttpRequest) -> bool:
    """Count one comment write by the request's user; True once past the limit."""
    return bool(
        is_ratelimited(
            request, group="comments", key=_user, rate=settings.COMMENT_RATE, increment=True
        )
    )


def message() -> str:
    count, _, period = str(settings.COMMENT_RATE).partition("/")
    return f"Too many comments: at most {count} per {period}. Wait a little and try again."
