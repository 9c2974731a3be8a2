"""Per-model limits: the max output Claude Code reserves, its window, and the cache minimum.

The numbers are data (``data/models.toml``, shipped with the package) so that a new model or a
corrected value needs no code change; ``load_model_table(path)`` reads an edited copy. A model id
is matched by substring, first match wins, like Claude Code's ``getModelMaxOutputTokens``.
"""

from __future__ import annotations

import functools
import os
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from contextlab.engine.config.errors import ConfigError

from .cost import _package_text

#: Window of any model id containing ``[1m]`` (utils/context.ts ``getContextWindowForModel``).
CONTEXT_WINDOW_1M = 1_000_000

_INT_KEYS = ("max_output_default", "max_output_upper", "context_window", "min_cacheable_tokens")
_KEYS = frozenset(("family", "display_name", *_INT_KEYS))


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the pipeline needs to know about one model id."""

    #: the table entry that matched (its substring), or the default entry's name
    family: str
    max_output_default: int
    max_output_upper: int
    #: 1,000,000 for an id containing ``[1m]``, else the family's plain-id window
    context_window: int
    min_cacheable_tokens: int
    display_name: str = ""


@dataclass(frozen=True, slots=True)
class ModelTable:
    """An ordered model table; ``lookup`` returns the first family whose name the id contains."""

    families: tuple[ModelInfo, ...]
    default: ModelInfo

    def lookup(self, model: str | None) -> ModelInfo:
        name = (model or "").lower()
        info = next((f for f in self.families if f.family in name), self.default)
        if is_1m_model(name):
            info = replace(info, context_window=CONTEXT_WINDOW_1M)
        return info


def is_1m_model(model: str | None) -> bool:
    """Whether Claude Code gives ``model`` the 1M window by its name (``[1m]``, any case)."""
    return model is not None and "[1m]" in model.lower()


def parse_model_table(text: str, source: str = "models.toml") -> ModelTable:
    """Build a table from TOML text; ``ConfigError`` names the entry and key that is wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, f"invalid TOML: {exc}") from exc
    default_data = data.get("default")
    if not isinstance(default_data, dict):
        raise ConfigError(f"{source} [default]", "missing: the table needs a [default] entry")
    default = _entry(default_data, f"{source} [default]", None)
    entries = data.get("family", [])
    if not isinstance(entries, list):
        raise ConfigError(f"{source} family", "must be an array of tables ([[family]])")
    families: list[ModelInfo] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"{source} family[{index}]"
        if not isinstance(entry, dict):
            raise ConfigError(where, "must be a table")
        info = _entry(entry, where, default)
        if info.family in seen:
            raise ConfigError(f"{where}.family", f"{info.family!r} is listed twice")
        seen.add(info.family)
        families.append(info)
    unknown = set(data) - {"default", "family"}
    if unknown:
        raise ConfigError(source, f"unknown top-level keys: {', '.join(sorted(unknown))}")
    return ModelTable(families=tuple(families), default=default)


def _entry(data: dict[str, Any], where: str, default: ModelInfo | None) -> ModelInfo:
    unknown = set(data) - _KEYS
    if unknown:
        raise ConfigError(where, f"unknown keys: {', '.join(sorted(unknown))}")
    family = data.get("family")
    if not isinstance(family, str) or not family.strip():
        raise ConfigError(f"{where}.family", f"must be a non-empty string, got {family!r}")
    display_name = data.get("display_name", "")
    if not isinstance(display_name, str):
        raise ConfigError(f"{where}.display_name", f"must be a string, got {display_name!r}")
    numbers: dict[str, int] = {}
    for key in _INT_KEYS:
        value = data.get(key)
        if value is None and default is not None and key == "context_window":
            value = default.context_window
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{where}.{key}", f"must be a positive integer, got {value!r}")
        numbers[key] = value
    if numbers["max_output_default"] > numbers["max_output_upper"]:
        raise ConfigError(
            f"{where}.max_output_default",
            f"must not exceed max_output_upper ({numbers['max_output_upper']}), "
            f"got {numbers['max_output_default']}",
        )
    # Matching lowercases the model id, so a mixed-case family name could never match.
    return ModelInfo(family=family.lower(), display_name=display_name, **numbers)


@functools.cache
def _packaged_table() -> ModelTable:
    return parse_model_table(_package_text("data/models.toml"))


def load_model_table(path: str | os.PathLike[str] | None = None) -> ModelTable:
    """The packaged table (read once, then cached), or the table in the TOML file ``path``."""
    if path is None:
        return _packaged_table()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(str(path), "file not found") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read: {exc}") from exc
    return parse_model_table(text, source=str(path))


def model_info(model: str | None, table: ModelTable | None = None) -> ModelInfo:
    """Limits for ``model`` from ``table`` (the packaged one by default); ``None`` → default."""
    return table.lookup(model) if table is not None else _packaged_info(model)


@functools.lru_cache(maxsize=1024)
def _packaged_info(model: str | None) -> ModelInfo:
    """``model``'s limits in the packaged table (a replay asks once per request)."""
    return load_model_table().lookup(model)
