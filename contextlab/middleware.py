"""Project-wide HTTP middleware."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from contextlab import errors


class ContentSecurityPolicyMiddleware:
    """Adds a strict Content-Security-Policy: transcripts are untrusted, scripts only from us."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy: str = settings.CONTENT_SECURITY_POLICY
        if policy:
            response.headers.setdefault("Content-Security-Policy", policy)
        permissions: str = settings.PERMISSIONS_POLICY
        if permissions:
            response.headers.setdefault("Permissions-Policy", permissions)
        return response


#: statuses whose bare responses (no body) get the friendly error page
FRIENDLY_STATUSES = frozenset({400, 403, 404, 410})


class FriendlyErrorPageMiddleware:
    """A view's bare ``HttpResponseGone()`` / ``HttpResponseNotFound()`` gets the error page
    (JSON under /api/); responses that carry their own body are left alone."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code in FRIENDLY_STATUSES
            and not response.streaming
            and not response.content
            and request.method != "HEAD"
        ):
            friendly = errors.error_response(request, response.status_code)
            for header in ("Vary", "Cache-Control"):
                if header in response.headers:
                    friendly.headers[header] = response.headers[header]
            return friendly
        return response
