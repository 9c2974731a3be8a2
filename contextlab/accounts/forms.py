from __future__ import annotations

from django import forms
from django.contrib.auth.forms import UserCreationForm


class SignupForm(UserCreationForm):  # type: ignore[type-arg]
    """Username and password only: ContextLab sends no e-mail."""


class TokenForm(forms.Form):
    """A new API token: an optional name, and its life in days (blank: API_TOKEN_DAYS; the
    service says the allowed range). ``CharField`` refuses NUL, which PostgreSQL cannot store."""

    name = forms.CharField(required=False)
    days = forms.IntegerField(
        required=False, error_messages={"invalid": "a whole number (0: never)"}
    )
