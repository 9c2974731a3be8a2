"""The report's what-if run form. What a value must be (a preset, overrides, a summarizer)
is the services' and the engine's to say; the form reads the fields, refuses NUL characters
(Django's ``CharField``: PostgreSQL cannot store them) and reads the spend cap as a number."""

from __future__ import annotations

from typing import Any

from django import forms

from contextlab.runs.models import Run

#: the fields the form shows again, as sent, after an error
ECHOED = ("preset", "config", "summarizer", "summary_model", "spend_cap_usd")


class RunForm(forms.Form):
    preset = forms.CharField(required=False, empty_value="auto", strip=False)
    config = forms.CharField(required=False)
    mode = forms.CharField(required=False, empty_value=Run.Mode.WHATIF)
    summarizer = forms.CharField(required=False, empty_value="extractive")
    summary_model = forms.CharField(required=False)
    spend_cap_usd = forms.FloatField(
        required=False, error_messages={"invalid": "must be a number of dollars, e.g. 2.50"}
    )

    def first_error(self) -> dict[str, str] | None:
        """``{"field", "message"}`` of the first field refused, as the form shows it."""
        for field, errors in self.errors.items():
            return {"field": field, "message": str(errors[0])}
        return None

    def echoed(self) -> dict[str, Any]:
        """The values as sent (stripped where the form strips them), to fill the form again."""
        return {name: str(self.data.get(name, "")).strip() for name in ECHOED} | {
            "preset": self.data.get("preset", "auto")
        }
