"""The workspace pages' forms. Django's ``CharField`` refuses NUL characters (its
``ProhibitNullCharactersValidator``), which PostgreSQL cannot store; what a value must be
beyond that (a name, a known user, a role) is the services' to say, in their own words."""

from __future__ import annotations

from django import forms


def first_error(form: forms.Form) -> str:
    """``"<field>: <message>"`` of the form's first error, as the pages show it."""
    field, errors = next(iter(form.errors.items()))
    return f"{field}: {errors[0]}"


class WorkspaceForm(forms.Form):
    name = forms.CharField(required=False)


class MemberForm(forms.Form):
    username = forms.CharField(required=False)
    role = forms.CharField(required=False, empty_value="viewer")


class MemberRemoveForm(forms.Form):
    username = forms.CharField(required=False, strip=False)


class InviteForm(forms.Form):
    role = forms.CharField(required=False, empty_value="viewer")
