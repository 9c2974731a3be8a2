"""The Share dialog's form: who sees the link, its expiry, the redaction categories kept and
what the link shows (the share mode).
What each must be (an audience, an allowed expiry) is ``services.create_share``'s to say."""

from __future__ import annotations

from typing import Any

from django import forms

from contextlab.sharing.models import ShareLink
from contextlab.sharing.services import ShareError


class ShareForm(forms.Form):
    audience = forms.CharField(required=False, empty_value=ShareLink.Audience.LINK)
    expires_in_days = forms.CharField(required=False)
    keep = forms.MultipleChoiceField(required=False)
    mode = forms.ChoiceField(
        required=False, choices=ShareLink.Mode.choices, initial=ShareLink.Mode.FULL
    )

    def __init__(self, data: Any) -> None:
        super().__init__(data)
        keep = self.fields["keep"]
        assert isinstance(keep, forms.MultipleChoiceField)
        # any category may be named (one that redaction did not find keeps nothing), but
        # not with a NUL character, which the link's stored choices could not hold
        keep.choices = [(value, value) for value in data.getlist("keep") if "\x00" not in value]

    def choices(self) -> dict[str, Any]:
        """``audience``, ``days`` (None: never), ``keep`` and ``mode``; a refused field raises
        ``services.ShareError`` naming it."""
        if not self.is_valid():
            field, errors = next(iter(self.errors.items()))
            raise ShareError(field, str(errors[0]))
        raw_days = self.cleaned_data["expires_in_days"]
        return {
            "audience": self.cleaned_data["audience"],
            "days": int(raw_days) if raw_days.isdigit() else None,
            "keep": self.cleaned_data["keep"],
            "mode": self.cleaned_data["mode"] or ShareLink.Mode.FULL,
        }
