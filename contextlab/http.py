"""The request type of every authenticated view.

``login_required`` (pages) and the API's auth classes (routes) guarantee a real ``User`` on
``request.user``, and django-htmx's middleware puts ``HtmxDetails`` on ``request.htmx``; this
class says so to the type checker, once, instead of an ignore at each use.
"""

from __future__ import annotations

import ipaddress

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class AuthedRequest(HttpRequest):
    """An ``HttpRequest`` after login (pages) or token/session auth (API)."""

    user: User  # type: ignore[assignment]  # narrower than HttpRequest's User | AnonymousUser
    htmx: HtmxDetails


class HtmxRequest(HttpRequest):
    """An ``HttpRequest`` of a view that may be anonymous (share links), with htmx details."""

    htmx: HtmxDetails


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
