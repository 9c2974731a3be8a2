"""Rate limits on logging in and signing up (django-ratelimit, counted in the default cache).

A password guesser gets ``LOGIN_RATE`` attempts per client address and ``LOGIN_USER_RATE`` per
username from one address, a sign-up script ``SIGNUP_RATE`` accounts per address; past that the
page answers 429 with a message saying when to try again. The username limit counts per address
so that nobody can lock a named user out from everywhere by guessing their password; a guesser
spread over many addresses is held by the per-address limit of each. The counts live in the
default cache: Redis when the broker is Redis (shared by every web process), else the web
process's memory (the single-process dev server).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django_ratelimit.decorators import ratelimit as _ratelimit  # type: ignore[import-untyped]

from contextlab.accounts import views
from contextlab.http import client_address

View = Callable[[HttpRequest], HttpResponse]


def ratelimit(**options: Any) -> Callable[[View], View]:
    """``django_ratelimit``'s decorator, typed (the package ships no type information)."""
    decorator: Callable[[View], View] = _ratelimit(**options)
    return decorator


def _rate(name: str) -> Callable[[str, HttpRequest], str]:
    # read at request time, so settings (and tests) can change the limits
    def rate(group: str, request: HttpRequest) -> str:
        return str(getattr(settings, name))

    return rate


def _username_at_address(group: str, request: HttpRequest) -> str:
    return f"{request.POST.get('username', '').strip().lower()}@{client_address(request)}"


def _period(rate: str) -> str:
    """ "20/5m" → "5 minutes", "10/h" → "hour"."""
    per = rate.partition("/")[2]
    unit = {"s": "second", "m": "minute", "h": "hour", "d": "day"}.get(per[-1:], per)
    times = per[:-1]
    return f"{times} {unit}s" if times and times != "1" else unit


def _throttled(
    request: HttpRequest, template: str, form: Any, rate: str, what: str
) -> HttpResponse:
    messages.error(
        request,
        f"Too many {what} from here: at most {rate.partition('/')[0]} per "
        f"{_period(rate)}. Wait a little and try again.",
    )
    return render(request, template, {"form": form}, status=429)


_login_view = auth_views.LoginView.as_view(
    template_name="accounts/login.html", redirect_authenticated_user=True
)


@ratelimit(key="ip", rate=_rate("LOGIN_RATE"), method="POST", block=False, group="login-ip")
@ratelimit(
    key=_username_at_address,
    rate=_rate("LOGIN_USER_RATE"),
    method="POST",
    block=False,
    group="login-user",
)
def login(request: HttpRequest) -> HttpResponse:
    if getattr(request, "limited", False):
        from django.contrib.auth.forms import AuthenticationForm

        return _throttled(
            request,
            "accounts/login.html",
            AuthenticationForm(request),
            settings.LOGIN_RATE,
            "login attempts",
        )
    return cast(HttpResponse, _login_view(request))


@ratelimit(key="ip", rate=_rate("SIGNUP_RATE"), method="POST", block=False, group="signup-ip")
def signup(request: HttpRequest) -> HttpResponse:
    if getattr(request, "limited", False):
        from contextlab.accounts.forms import SignupForm

        return _throttled(
            request, "accounts/signup.html", SignupForm(), settings.SIGNUP_RATE, "sign-ups"
        )
    return views.signup(request)
