from __future__ import annotations

from django.contrib.auth.forms import UserCreationForm


class SignupForm(UserCreationForm):  # type: ignore[type-arg]
    """Username and password only: ContextLab sends no e-mail."""
