"""The request type of every authenticated view.

``login_required`` (pages) and the API's auth classes (routes) guarantee a real ``User`` on
``request.user``, and django-htmx's middleware puts ``HtmxDetails`` on ``request.htmx``; this
class says so to the type checker, once, instead of an ignore at each use.
"""

from __future__ import annotations

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
