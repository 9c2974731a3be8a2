"""API authentication: bearer tokens for scripts, the browser session for the pages' own calls."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja.security import APIKeyCookie, HttpBearer

from contextlab.accounts import services


class BearerTokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        user = services.user_for_token(token)
        if user is None:
            return None
        request.user = user  # type: ignore[assignment]
        return user


class SessionAuth(APIKeyCookie):
    """A logged-in browser session (CSRF-checked by ninja for unsafe methods)."""

    param_name = settings.SESSION_COOKIE_NAME

    def _get_key(self, request: HttpRequest) -> str | None:
        # A client that sent a bearer token is a script: a wrong token must answer 401 (and
        # say how to authenticate), not fall through to the browser session's CSRF check,
        # whose 403 "CSRF check Failed" would send its author after the wrong problem. Without
        # a session cookie there is no session to check either.
        if "HTTP_AUTHORIZATION" in request.META or self.param_name not in request.COOKIES:
            return None
        return super()._get_key(request)

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        # key is None unless the cookie was there and the CSRF check passed
        if key is not None and request.user.is_authenticated:
            return request.user
        return None
