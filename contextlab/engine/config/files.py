"""Settings files: a TOML or JSON file (or its text) read into one flat table of settings."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from .errors import FieldError

SettingsFormat = Literal["toml", "json"]


def read_settings(
    source: str | os.PathLike[str], fmt: SettingsFormat | None = None
) -> dict[str, Any]:
    """Read TOML or JSON settings from a path or from text into one flat mapping.

    Settings may sit at the top level or in a ``[pipeline]`` table (or both, without repeats).
    A ``preset`` key is kept: ``PipelineConfig.from_dict`` starts from that preset, and
    ``presets.resolve_config`` also understands ``"auto"``. ``fmt`` defaults to the file suffix,
    and for text to JSON when it starts with ``{``, else TOML. TOML has no null: write ``inf``
    for "no limit" in ``declared_max_result_size_chars`` and leave optional settings out.
    """
    text, label, suffix = _read_source(source)
    if fmt is None:
        if suffix in (".toml", ".json"):
            fmt = "json" if suffix == ".json" else "toml"
        else:
            fmt = "json" if text.lstrip().startswith("{") else "toml"
    data: Any
    if fmt == "toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise FieldError(label, f"invalid TOML: {exc}") from exc
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FieldError(
                label, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from exc
    if not isinstance(data, dict):
        raise FieldError(label, f"must hold a table of settings, got {type(data).__name__}")
    table = data.get("pipeline")
    if table is None:
        return data
    if not isinstance(table, dict):
        raise FieldError("pipeline", f"must be a table of settings, got {type(table).__name__}")
    top = {k: v for k, v in data.items() if k != "pipeline"}
    for name in top:
        if name in table:
            raise FieldError(name, "is set both at the top level and in [pipeline]")
    return {**top, **table}


def _read_source(source: str | os.PathLike[str]) -> tuple[str, str, str]:
    """``(text, label for errors, file suffix)``; a str is a path only if it names one."""
    if isinstance(source, str):
        one_line = bool(source.strip()) and "\n" not in source
        is_path = one_line and (source.endswith((".toml", ".json")) or os.path.isfile(source))
        if not is_path:
            return source, "config", ""
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise FieldError(str(path), "file not found") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise FieldError(str(path), f"cannot read: {exc}") from exc
    return text, str(path), path.suffix.lower()
