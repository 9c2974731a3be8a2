"""The declared fields as msgspec reads them, and the wording of what is wrong with a value.

``ConfigSchema`` takes a config class whose every field is ``Annotated`` with a msgspec ``Meta``
(``fields.PipelineConfig``): msgspec decides whether a value is valid, in one call for a whole
config; this module only words the answer, so that the forms, the API and the CLI all report
``FieldError("<field>", "must be …, got …")`` the same way, and describes each field
(``Setting``) for forms and docs.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
import msgspec.inspect as schema_info

from .errors import FieldError


@dataclass(frozen=True, slots=True)
class Setting:
    """One field of a config class: its annotation (what msgspec validates) and its docs."""

    name: str
    #: the field's annotation, ranges included
    hint: Any
    #: msgspec's description of the type, without ``| None`` and the documentation wrapper
    kind: schema_info.Type
    default: Any
    nullable: bool
    doc: str
    source: str
    group: str
    modeled: bool
    #: a fraction (0.9 means 90 %); error messages say so
    fraction: bool
    #: the numeric range: of the value, or for a table of tools, of each value
    bounds: schema_info.IntType | schema_info.FloatType | None
    #: a table of tools whose values may be null (no limit)
    values_nullable: bool = False
    #: the allowed strings of a choice, in declaration order
    choices: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The type as forms and docs show it (``int | None``, ``map[str, int]``…)."""
        kind = self.kind
        if isinstance(kind, schema_info.DictType):
            text = "map[str, int | None]" if self.values_nullable else "map[str, int]"
        else:
            text = _LABELS[type(kind)]
        return text + " | None" if self.nullable else text

    @property
    def phrase(self) -> str:
        """What a valid value is, for "must be …" messages."""
        kind = self.kind
        if isinstance(kind, schema_info.LiteralType):
            text = "one of " + ", ".join(repr(c) for c in self.choices)
        elif isinstance(kind, schema_info.DictType):
            text = "a table of tool name → integer" + (
                " or null (no limit)" if self.values_nullable else ""
            )
        else:
            text = _PHRASES[type(kind)]
        return text + " or null" if self.nullable else text

    @property
    def lower(self) -> float | None:
        """The smallest allowed number (exclusive when ``lower_exclusive``)."""
        if self.bounds is None:
            return None
        return self.bounds.gt if self.bounds.gt is not None else self.bounds.ge

    @property
    def lower_exclusive(self) -> bool:
        return self.bounds is not None and self.bounds.gt is not None

    @property
    def upper(self) -> float | None:
        return None if self.bounds is None else self.bounds.le


_LABELS: dict[type, str] = {
    schema_info.IntType: "int",
    schema_info.FloatType: "float",
    schema_info.BoolType: "bool",
    schema_info.LiteralType: "str",
    schema_info.VarTupleType: "list[str]",
}
_PHRASES: dict[type, str] = {
    schema_info.IntType: "an integer",
    schema_info.FloatType: "a number",
    schema_info.BoolType: "true or false",
    schema_info.VarTupleType: "a list of tool names",
}


def _without_none(kind: schema_info.Type) -> tuple[schema_info.Type, bool]:
    if isinstance(kind, schema_info.UnionType):
        rest = [t for t in kind.types if not isinstance(t, schema_info.NoneType)]
        if len(rest) == 1:
            return rest[0], len(rest) < len(kind.types)
    return kind, False


def _literal_values(hint: Any) -> tuple[str, ...]:
    import typing

    while typing.get_origin(hint) is not Literal:
        hint = typing.get_args(hint)[0]
    return tuple(str(value) for value in typing.get_args(hint))


class ConfigSchema:
    """msgspec's reading of a config class's fields, in declaration order."""

    def __init__(self, config_class: type) -> None:
        self.config_class = config_class
        #: field name → annotation, in declaration order
        self.hints: dict[str, Any] = {f.name: f.type for f in dataclasses.fields(config_class)}
        #: Every field in one msgspec type, so a whole config is checked in one call (msgspec
        #: caches a struct's validators; converting field by field would rebuild them every time).
        self.struct: Any = msgspec.defstruct("PipelineSettings", list(self.hints.items()))

    def check(self, given: dict[str, Any]) -> Any:
        """``given`` (every field's value) as msgspec converts it, an instance of ``struct``;
        ``FieldError`` for the first field, in declaration order, that it rejects."""
        try:
            return msgspec.convert({k: plain(v) for k, v in given.items()}, self.struct)
        except msgspec.ValidationError as exc:
            raise self._first_invalid(given, exc) from None

    @functools.cached_property
    def settings(self) -> dict[str, Setting]:
        """msgspec's reading of every annotation, for forms, docs and error messages. Built on
        first use: a replay with valid settings never needs it, and start-up time counts for
        the CLI."""
        hints = self.hints
        info = schema_info.type_info(self.config_class)
        assert isinstance(info, schema_info.DataclassType)
        settings: dict[str, Setting] = {}
        for field in info.fields:
            kind, nullable = _without_none(field.type)
            if not isinstance(kind, schema_info.Metadata) or not kind.extra:
                raise TypeError(f"setting {field.name} is not declared with _setting(...)")
            doc = (kind.extra_json_schema or {}).get("description", "")
            extra, kind = kind.extra, kind.type
            bounds: schema_info.IntType | schema_info.FloatType | None = None
            values_nullable = False
            if isinstance(kind, schema_info.DictType):
                value_kind, values_nullable = _without_none(kind.value_type)
                if isinstance(value_kind, schema_info.IntType):
                    bounds = value_kind
            elif isinstance(kind, schema_info.IntType | schema_info.FloatType):
                bounds = kind
            # Every number a user can type gets explicit bounds; a new field without them is a bug.
            needs_range = isinstance(kind, schema_info.IntType | schema_info.FloatType)
            needs_range = needs_range or isinstance(kind, schema_info.DictType)
            if needs_range and (
                bounds is None or (bounds.ge is None and bounds.gt is None) or bounds.le is None
            ):
                raise TypeError(f"setting {field.name} has no allowed range")
            if type(kind) not in _LABELS and not isinstance(kind, schema_info.DictType):
                raise TypeError(f"unsupported setting type {hints[field.name]!r}")
            settings[field.name] = Setting(
                name=field.name,
                hint=hints[field.name],
                kind=kind,
                default=field.default,
                nullable=nullable,
                doc=doc,
                source=extra["source"],
                group=extra["group"],
                modeled=extra["modeled"],
                fraction=extra["fraction"],
                bounds=bounds,
                values_nullable=values_nullable,
                # msgspec reports a Literal's values sorted; forms list them as declared
                choices=_literal_values(hints[field.name])
                if type(kind) is schema_info.LiteralType
                else (),
            )
        return settings

    def setting(self, name: str) -> Setting:
        """The schema of one field; ``FieldError`` (with a did-you-mean) for an unknown name."""
        try:
            return self.settings[name]
        except KeyError:
            raise self.unknown(name) from None

    def unknown(self, name: str) -> FieldError:
        import difflib  # only for this message

        # Users often type the TypeScript constant (AUTOCOMPACT_BUFFER_TOKENS); lowercase first.
        close = difflib.get_close_matches(name.lower(), list(self.hints), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return FieldError(name, f"unknown setting{hint}")

    def _first_invalid(self, given: dict[str, Any], error: msgspec.ValidationError) -> FieldError:
        """The first field (in declaration order) msgspec rejects, with a message that says why."""
        for name, setting in self.settings.items():
            value = plain(given[name], setting.values_nullable)
            try:
                msgspec.convert(value, setting.hint)
            except msgspec.ValidationError:
                return _explain(setting, value)
        return FieldError("config", str(error))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def plain(value: Any, values_nullable: bool = True) -> Any:
    """What msgspec is given: a mapping as a dict, with ``inf`` values as null where a table's
    values may be null (TOML has no null, so "no limit" is written as inf there)."""
    if isinstance(value, Mapping):
        return {
            k: None if values_nullable and isinstance(v, float) and math.isinf(v) and v > 0 else v
            for k, v in value.items()
        }
    return value


def to_json_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: value[k] for k in sorted(value)}
    if isinstance(value, tuple):
        return list(value)
    return value


def _type_error(setting: Setting, value: Any) -> FieldError:
    return FieldError(
        setting.name, f"must be {setting.phrase}, got {value!r} ({type(value).__name__})"
    )


def _range_error(setting: Setting, value: Any, what: str = "") -> FieldError:
    lower, upper = _number(setting.lower or 0), _number(setting.upper or 0)
    noun = "a number" if isinstance(setting.kind, schema_info.FloatType) else "an integer"
    if setting.lower_exclusive:
        bounds = f"greater than {lower} and at most {upper}"
    else:
        bounds = f"between {lower} and {upper}"
    message = f"{what}must be {noun} {bounds}, got {value!r}"
    if setting.fraction:
        message += " (a fraction: 0.9 means 90 %)"
    return FieldError(setting.name, message)


def _explain(setting: Setting, value: Any) -> FieldError:
    """Why msgspec rejected ``value`` for ``setting``: wrong type, not finite, or out of range."""
    kind = setting.kind
    if isinstance(kind, schema_info.DictType):
        return _explain_table(setting, value)
    if value is not None and isinstance(kind, schema_info.IntType) and _is_int(value):
        return _range_error(setting, value)
    is_number = _is_int(value) or isinstance(value, float)
    if isinstance(kind, schema_info.FloatType) and is_number:
        value = float(value)  # what the field would hold: the message shows 100.0, not 100
        if not math.isfinite(value):
            return FieldError(setting.name, f"must be a finite number, got {value!r}")
        return _range_error(setting, value)
    if isinstance(kind, schema_info.VarTupleType) and isinstance(value, list):
        value = tuple(value)  # as the field would hold it
    return _type_error(setting, value)


def _explain_table(setting: Setting, value: Any) -> FieldError:
    if not isinstance(value, Mapping):
        return _type_error(setting, value)
    wanted = "an integer or null (no limit)" if setting.values_nullable else "an integer"
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            return FieldError(setting.name, f"tool names must be non-empty strings, got {key!r}")
        if item is None and setting.values_nullable:
            continue
        if not _is_int(item):
            return FieldError(
                setting.name,
                f"value for {key!r} must be {wanted}, got {item!r} ({type(item).__name__})",
            )
        if not _within(setting.bounds, item):
            return _range_error(setting, item, f"value for {key!r} ")
    return _type_error(setting, value)


def _within(bounds: schema_info.IntType | schema_info.FloatType | None, value: float) -> bool:
    """Whether ``value`` is inside the declared range (msgspec's own check, for one value)."""
    if bounds is None:
        return True
    if bounds.ge is not None and value < bounds.ge:
        return False
    if bounds.gt is not None and value <= bounds.gt:
        return False
    return bounds.le is None or value <= bounds.le
