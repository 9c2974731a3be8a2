"""The settings as forms, the API and the CLI show them and send them back.

``field_specs`` describes every field for a form or the docs; ``setting_from_text`` reads a form
input's text as a field's value and ``parse_overrides`` a JSON box of overrides. Ranges and the
cross-field rules are checked when the values go into a ``PipelineConfig``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec.inspect as schema_info

from contextlab.engine.input.json_line import decode_json_line

from .errors import FieldError
from .fields import SCHEMA
from .knobs import counterpart
from .schema import Setting, to_json_value


def __getattr__(name: str) -> Any:
    # FIELD_DOCS and FIELD_RANGES are computed on first use, like SCHEMA.settings.
    if name == "FIELD_DOCS":
        # One-line documentation of every setting, in declaration order.
        return {name: setting.doc for name, setting in SCHEMA.settings.items()}
    if name == "FIELD_RANGES":
        # Allowed (min, max) of every numeric setting (for maps: of each value). A minimum is
        # exclusive where field_specs() says min_exclusive.
        return {
            name: (setting.lower, setting.upper)
            for name, setting in SCHEMA.settings.items()
            if setting.lower is not None and setting.upper is not None
        }
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def setting(name: str) -> Setting:
    """The schema of one field; ``FieldError`` (with a did-you-mean) for an unknown name."""
    return SCHEMA.setting(name)


def field_specs() -> list[dict[str, Any]]:
    """One dict per setting, in declaration order, for building forms and docs.

    Keys: ``name, type, default, doc, min, max, modeled`` plus ``min_exclusive, nullable,
    choices, group, source`` and ``counterpart`` (``knobs.counterpart``: whether Claude Code has
    a setting for it, which, from which version; ``experiment`` when it has none).
    """
    return [
        {
            "name": s.name,
            "type": s.label,
            "default": to_json_value(s.default),
            "doc": s.doc,
            "min": s.lower,
            "max": s.upper,
            "modeled": s.modeled,
            "min_exclusive": s.lower_exclusive,
            "nullable": s.nullable,
            "choices": list(s.choices),
            "group": s.group,
            "source": s.source,
            "counterpart": counterpart(s.name),
        }
        for s in SCHEMA.settings.values()
    ]


#: The longest overrides text a form may send (a full config is about 3,000 characters).
MAX_OVERRIDES_CHARS = 64 * 1024


def parse_overrides(text: str | None) -> dict[str, Any] | None:
    """The overrides typed into a form's JSON box (``None`` when empty); ``FieldError('config')``
    if it is not a JSON object. The values are checked later, with the preset."""
    text = (text or "").strip()
    if not text:
        return None
    if len(text) > MAX_OVERRIDES_CHARS:
        raise FieldError("config", f"at most {MAX_OVERRIDES_CHARS:,} characters of overrides")
    try:
        parsed, _ = decode_json_line(text)
    except json.JSONDecodeError as exc:
        raise FieldError(
            "config", f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except ValueError as exc:  # NaN/Infinity, too deeply nested
        raise FieldError("config", f"not accepted: {exc}") from None
    if not isinstance(parsed, dict):
        raise FieldError(
            "config",
            'must be a JSON object of field overrides, e.g. {"autocompact_pct_override": 80}',
        )
    return parsed


def setting_from_text(name: str, raw: str | None) -> Any:
    """A form input's text as the value of setting ``name`` (a checkbox: any of 1/true/on/yes).

    Only the type is read here; ranges and the cross-field rules are checked when the value
    goes into a ``PipelineConfig``. ``FieldError(name, …)`` if the text is not of the type.
    """
    spec = setting(name)
    kind = spec.kind
    text = (raw or "").strip()
    if isinstance(kind, schema_info.BoolType):
        return text.lower() in ("1", "true", "on", "yes")
    if text == "" and spec.nullable:
        return None
    if isinstance(kind, schema_info.DictType | schema_info.VarTupleType):
        empty = "{}" if isinstance(kind, schema_info.DictType) else "[]"
        try:
            return json.loads(text or empty)
        except json.JSONDecodeError as exc:
            raise FieldError(name, f"must be JSON ({exc.msg}, column {exc.colno})") from None
    if isinstance(kind, schema_info.IntType):
        try:
            return int(text)
        except ValueError:
            raise FieldError(name, f"must be a whole number, got {text!r}") from None
    if isinstance(kind, schema_info.FloatType):
        try:
            value = float(text)
        except ValueError:
            raise FieldError(name, f"must be a number, got {text!r}") from None
        if not math.isfinite(value):
            raise FieldError(name, "must be a finite number")
        return value
    return text
