"""Sign up, log in, log out (the last two are Django's own views)."""

from __future__ import annotations

from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from contextlab.accounts.forms import SignupForm


def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("transcripts:list")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("transcripts:list")
    return render(
        request, "accounts/signup.html", {"form": form}, status=400 if form.errors else 200
    )
