"""API authentication: bearer tokens for scripts, the browser session for the pages' own calls."""

from __future__ import annotations

from typing import Any

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

    param_name = "sessionid"

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        if request.user.is_authenticated:
            return request.user
        return None
