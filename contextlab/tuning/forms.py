"""The config editor's form: a name, a preset and one text field per pipeline setting.

What a setting's value must be (its type, range, choices) is the engine's to say
(``configs.check_form``); this form reads what was sent, refusing NUL characters (Django's
``CharField`` validator: PostgreSQL cannot store them) with an error on that field, and keeps
apart the settings the page showed from those it did not.
"""

from __future__ import annotations

from typing import Any

from django import forms

from contextlab import engine

#: the hidden marker each checkbox carries: an unchecked box is absent from the POST
PRESENT_SUFFIX = "__present"


class ConfigForm(forms.Form):
    name = forms.CharField(required=False, strip=False)
    preset = forms.CharField(required=False, empty_value="auto")

    def __init__(self, data: object) -> None:
        super().__init__(data)  # type: ignore[arg-type]
        self.setting_names = [str(spec["name"]) for spec in engine.field_specs()]
        for name in self.setting_names:
            self.fields[name] = forms.CharField(required=False, strip=False)

    def setting_values(self) -> dict[str, str]:
        """The settings the page sent, as text (a checkbox shown but unchecked: ""); a value
        the form refused is left out (its error is in ``setting_errors``)."""
        self.is_valid()
        sent = {
            name
            for name in self.setting_names
            if name in self.data or f"{name}{PRESENT_SUFFIX}" in self.data
        }
        return {name: self.cleaned_data[name] for name in sent if name in self.cleaned_data}

    def refused(self) -> dict[str, str]:
        """``{field: message}`` of every value the form refused (settings and preset)."""
        return {name: str(errors[0]) for name, errors in self.errors.items() if name != "name"}

    def name_error(self) -> str | None:
        return str(self.errors["name"][0]) if "name" in self.errors else None


class _BatchForm(forms.Form):
    """What a comparison's and a sweep's forms share: the workspace and the configs' fields
    (``<side>_config``: ``preset:<name>`` or ``version:<id>``; ``<side>_overrides``: JSON).
    The sessions are ids checked against what the user may read (``views.common``)."""

    workspace_id = forms.CharField(required=False)
    sides: tuple[str, ...] = ()

    def __init__(self, data: object) -> None:
        super().__init__(data)  # type: ignore[arg-type]
        for side in self.sides:
            self.fields[f"{side}_config"] = forms.CharField(
                required=False, empty_value="preset:auto"
            )
            self.fields[f"{side}_overrides"] = forms.CharField(required=False, strip=False)

    def values(self) -> dict[str, Any]:
        """The cleaned values; ``engine.FieldError`` naming the first field refused."""
        if not self.is_valid():
            field, errors = next(iter(self.errors.items()))
            raise engine.FieldError(field, str(errors[0]))
        return self.cleaned_data

    def workspace_id_value(self) -> int | None:
        raw = str(self.values()["workspace_id"])
        return int(raw) if raw.isdigit() else None


class ComparisonForm(_BatchForm):
    sides = ("a", "b")


class SweepForm(_BatchForm):
    sides = ("base",)
    field = forms.CharField(required=False)
    sweep_values = forms.CharField(required=False)
