"""Sign up, log in, log out (the last two are Django's own views), and the API tokens page."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from contextlab.accounts import services
from contextlab.accounts.forms import SignupForm, TokenForm
from contextlab.accounts.models import ApiToken
from contextlab.http import AuthedRequest
from contextlab.workspaces import services as workspaces


def _safe_next(request: HttpRequest) -> str:
    """The ``next`` the signup form carries, if it is a path of this site (else "")."""
    wanted = str(request.POST.get("next") or request.GET.get("next") or "")
    if wanted and url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return wanted
    return ""


def _after_signup(request: HttpRequest, user: User, wanted: str) -> HttpResponse:
    """Where a new account lands: an invite link in ``next`` is accepted at once (the person
    signed up to join), any other ``next`` is followed, else the sessions list."""
    if not wanted:
        return redirect("transcripts:list")
    try:
        match = resolve(urlsplit(wanted).path)
    except Resolver404:
        return redirect(wanted)
    if match.view_name != "workspaces:invite":
        return redirect(wanted)
    try:
        membership = workspaces.accept_invite(token=match.kwargs["token"], user=user)
    except workspaces.WorkspaceError as exc:
        messages.error(
            request, f"Your account is ready, but the invite did not work: {exc.message}."
        )
        return redirect("transcripts:list")
    messages.success(
        request, f"Welcome! You joined “{membership.workspace.name}” as {membership.role}."
    )
    return redirect("transcripts:list")


def signup(request: HttpRequest) -> HttpResponse:
    wanted = _safe_next(request)
    if request.user.is_authenticated:
        return redirect(wanted or "transcripts:list")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return _after_signup(request, user, wanted)
    return render(
        request,
        "accounts/signup.html",
        {"form": form, "next": wanted},
        status=400 if form.errors else 200,
    )


@login_required
def tokens(request: AuthedRequest) -> HttpResponse:
    """The user's API tokens (active, expired, revoked) and a form to create one; a new
    token's clear text is shown on this answer only."""
    new_token = ""
    error = ""
    status = 200
    if request.method == "POST":
        form = TokenForm(request.POST)
        if not form.is_valid():
            field, errors = next(iter(form.errors.items()))
            error = f"{field.capitalize()}: {errors[0]}"
            status = 400
        else:
            try:
                _row, new_token = services.issue_token(
                    user=request.user,
                    name=form.cleaned_data["name"],
                    days=form.cleaned_data["days"],
                )
            except ValueError as exc:  # the allowed range of days
                error = f"Days: {exc}"
                status = 400
    rows = ApiToken.objects.filter(user=request.user)
    return render(
        request,
        "accounts/tokens.html",
        {"tokens": rows, "new_token": new_token, "error": error},
        status=status,
    )


@login_required
@require_POST
def revoke_token(request: AuthedRequest, pk: int) -> HttpResponse:
    if not services.revoke_token(owner=request.user, token_id=pk):
        raise Http404("no such active token")
    messages.success(request, "Token revoked: it no longer works.")
    return redirect("accounts:tokens")
