"""The request type of every authenticated view, the answer after a page's POST, and the
API's JSON answer built by hand.

``login_required`` (pages) and the API's auth classes (routes) guarantee a real ``User`` on
``request.user``, and django-htmx's middleware puts ``HtmxDetails`` on ``request.htmx``; this
class says so to the type checker, once, instead of an ignore at each use.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django_htmx.http import HttpResponseClientRefresh
from django_htmx.middleware import HtmxDetails
from ninja.renderers import JSONRenderer


class AuthedRequest(HttpRequest):
    """An ``HttpRequest`` after login (pages) or token/session auth (API)."""

    user: User  # type: ignore[assignment]  # narrower than HttpRequest's User | AnonymousUser
    htmx: HtmxDetails


class HtmxRequest(HttpRequest):
    """An ``HttpRequest`` of a view that may be anonymous (share links), with htmx details."""

    htmx: HtmxDetails


def api_json(request: HttpRequest, body: Any, status: int = 200) -> HttpResponse:
    """``body`` rendered as the API renders its answers (django-ninja's JSON renderer: dates,
    decimals and UUIDs as it encodes them), for an operation that returns its rows as stored
    rather than validated again against its schema. The API object itself is not needed, so
    an app's router never imports the project's API module (which imports every router)."""
    renderer = JSONRenderer()
    return HttpResponse(
        renderer.render(request, body, response_status=status),
        status=status,
        content_type=f"{renderer.media_type}; charset={renderer.charset}",
    )


def back_to(request: AuthedRequest, url: str) -> HttpResponse:
    """After a POST from a page: htmx reloads the page (its messages show), a form redirects."""
    if request.htmx:
        response = HttpResponseClientRefresh()
        response.status_code = 204  # nothing to swap
        return response
    return redirect(url)


def client_address(request: HttpRequest) -> str:
    """The client's address as the rate limits count it (django-ratelimit's ``ip`` key).

    ``CLIENT_ADDRESS_META_KEY`` names where it is: ``REMOTE_ADDR`` when clients connect directly,
    a header such as ``HTTP_X_FORWARDED_FOR`` behind a proxy. A forwarded list
    (``client, proxy1``) is read from its right end, the address the trusted proxy itself saw
    (the left entries are whatever the client claimed); a missing or malformed header falls
    back to ``REMOTE_ADDR`` instead of failing the request.
    """
    from django.conf import settings

    remote = str(request.META.get("REMOTE_ADDR") or "0.0.0.0")
    raw = str(request.META.get(settings.CLIENT_ADDRESS_META_KEY) or "")
    candidate = raw.rsplit(",", 1)[-1].strip()
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote


def body_stalled(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a request body's read timing out: the client
    sent no byte for ``REQUEST_BODY_IDLE_TIMEOUT`` seconds (``BodyIdleTimeoutMiddleware``)."""
    seen: BaseException | None = exc
    for _ in range(8):  # Django wraps it (UnreadablePostError from TimeoutError)
        if seen is None:
            return False
        if isinstance(seen, TimeoutError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
