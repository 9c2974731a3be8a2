"""Saved configs' content: a config named by preset, overrides or a saved version, checked
with the engine field by field (the editor's form and the API alike), and its diff from the preset."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User

from contextlab import engine
from contextlab.runs import services as run_services
from contextlab.tuning.models import (
    ConfigVersion,
    SavedConfig,
    config_label,
)
from contextlab.workspaces import access

# --- configs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigSpec:
    """A side of a comparison or the base of a sweep: a preset plus overrides."""

    preset: str = "auto"
    overrides: dict[str, Any] = field(default_factory=dict)
    version: ConfigVersion | None = None

    @property
    def label(self) -> str:
        if self.version is not None:
            return self.version.label
        return config_label(self.preset, self.overrides)


def prefixed(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def validate_config(
    preset: str, overrides: dict[str, Any] | None, *, prefix: str = ""
) -> engine.PipelineConfig:
    """The config a preset and overrides resolve to (latest Claude Code for "auto").

    Raises ``engine.FieldError`` naming ``<prefix>.preset`` or ``<prefix>.config.<field>``.
    """
    try:
        config, _ = engine.resolve_request_config(preset, overrides)
    except engine.FieldError as exc:
        raise exc.within(prefix) from None
    return config


def config_spec(
    *,
    owner: User,
    preset: str | None = None,
    overrides: dict[str, Any] | None = None,
    version_id: int | None = None,
    prefix: str = "",
) -> ConfigSpec:
    """A validated ``ConfigSpec``; a saved config version supplies the preset and overrides,
    and explicit overrides then apply on top of it."""
    version = None
    if version_id is not None:
        # any version of a config the user can read (viewers may use a team's configs)
        version = (
            ConfigVersion.objects.select_related("saved_config")
            .filter(
                pk=version_id,
                saved_config__in=access.items(owner, SavedConfig.objects.all()).values("pk"),
            )
            .first()
        )
        if version is None:
            raise engine.FieldError(prefixed(prefix, "version_id"), "no such saved config version")
        merged = {**version.overrides, **(overrides or {})}
        preset = preset or version.base_preset
        if merged != version.overrides or preset != version.base_preset:
            version = None  # edited on top: no longer exactly that version
        overrides = merged
    preset = preset or "auto"
    run_services.check_overrides_size(overrides, prefixed(prefix, "config"))
    validate_config(preset, overrides, prefix=prefix)
    return ConfigSpec(preset=preset, overrides=dict(overrides or {}), version=version)


def preset_base(preset: str) -> engine.PipelineConfig:
    """What a preset stands for before overrides ("auto" = the latest Claude Code)."""
    config, _ = engine.resolve_config(preset or "auto")
    return config


def config_diff(preset: str, overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """``[{field, preset, config}]``: where the config differs from the preset it came from."""
    base = preset_base(preset)
    config = validate_config(preset, overrides)
    return [
        {"field": name, "preset": ours, "config": theirs}
        for name, (ours, theirs) in sorted(base.diff(config).items())
    ]


def parse_field(spec: dict[str, Any], raw: str | None) -> Any:
    """A form value (always text) as the field's type; ``engine.FieldError`` names the field."""
    return engine.setting_from_text(spec["name"], raw)


def form_value(value: Any) -> str:
    """A config value as the text a form input holds."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "on" if value else ""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=isinstance(value, dict))
    return str(value)


@dataclass
class FormCheck:
    """The outcome of checking a config form: overrides, per-field errors and the diff."""

    preset: str
    overrides: dict[str, Any]
    errors: dict[str, str]
    diff: list[dict[str, Any]]


def check_form(preset: str, values: dict[str, str]) -> FormCheck:
    """Check every submitted field against the preset; overrides are the fields that differ.

    Each field is validated on its own (so every bad field gets its message, with its allowed
    range), then the whole config (so cross-field rules such as "buffer smaller than the
    window" name the field they fail on).
    """
    preset = preset or "auto"
    errors: dict[str, str] = {}
    try:
        base = preset_base(preset)
    except engine.FieldError as exc:
        return FormCheck(preset, {}, {exc.field: exc.message}, [])
    base_values = base.to_dict()
    overrides: dict[str, Any] = {}
    for spec in engine.field_specs():
        name = spec["name"]
        if name not in values:
            continue
        try:
            value = parse_field(spec, values.get(name))
            if value != base_values.get(name):
                normalized = base.replace(**{name: value}).to_dict()[name]
                if normalized != base_values.get(name):
                    overrides[name] = normalized
        except engine.FieldError as exc:
            # the field itself, or the one a cross-field rule failed on
            errors[exc.field or name] = exc.message
    diff: list[dict[str, Any]] = []
    if not errors:
        try:
            diff = config_diff(preset, overrides)
        except engine.FieldError as exc:
            errors[exc.field.removeprefix("config.")] = exc.message
    return FormCheck(preset, overrides, errors, diff)
