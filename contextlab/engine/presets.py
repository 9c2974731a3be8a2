"""Which preset matches a Claude Code version, and resolving a preset plus overrides to a config.

The presets themselves are data (``data/presets.toml``, read by ``config``): this module only
maps versions onto them, so ``config`` never imports it and the two modules form no cycle.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .config import (
    AUTO,
    FieldError,
    PipelineConfig,
    get_preset,
    preset_configs,
    preset_descriptions,
)

__all__ = [
    "AUTO",
    "LATEST_PRESET",
    "ONE_MILLION_EVIDENCE_TOKENS",
    "PRESETS",
    "PRESET_DESCRIPTIONS",
    "PRESET_NAMES",
    "VERSION_PRESETS",
    "get_preset",
    "parse_version",
    "preset_for_version",
    "ran_with_1m_window",
    "resolve_config",
    "resolve_request_config",
    "thread_window",
]

LATEST_PRESET = "claude-code-2.1.88"

PRESETS: dict[str, PipelineConfig] = preset_configs()

PRESET_DESCRIPTIONS: dict[str, str] = preset_descriptions()

#: Every name ``resolve_config`` accepts, ``"auto"`` first (for a select box).
PRESET_NAMES: tuple[str, ...] = (AUTO, *PRESETS)

#: ``(last version, preset)`` in ascending order; a version gets the first preset whose last
#: version it does not exceed, and anything newer gets ``LATEST_PRESET``. The table of what
#: each version computes is at the top of ``data/presets.toml``.
VERSION_PRESETS: tuple[tuple[tuple[int, int, int], str], ...] = (
    ((2, 0, 999), "claude-code-2.0"),
    ((2, 1, 20), "claude-code-2.1.20"),
    ((2, 1, 74), "claude-code-2.1.74"),
)

_VERSION_RE = re.compile(r"\s*v?(\d+)\.(\d+)\.(\d+)")


def parse_version(version: str | None) -> tuple[int, int, int] | None:
    """``"2.1.88"`` → ``(2, 1, 88)``; ``None`` for anything that does not start ``X.Y.Z``."""
    if not isinstance(version, str):
        return None
    match = _VERSION_RE.match(version)
    if match is None:
        return None
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def preset_for_version(version: str | None) -> str:
    """The version preset that reproduces Claude Code ``version``'s thresholds.

    Unknown or unparseable versions get ``LATEST_PRESET``: a transcript without a version is most
    likely recent, and the newest known behaviour is the least surprising guess.
    """
    parsed = parse_version(version)
    if parsed is None:
        return LATEST_PRESET
    for last, name in VERSION_PRESETS:
        if parsed <= last:
            return name
    return LATEST_PRESET


#: A recorded prompt above this cannot fit a 200k window: the session ran with the 1M window
#: (the ``[1m]`` suffix is not visible in ``message.model``; facts (b) item 4).
ONE_MILLION_EVIDENCE_TOKENS = 200_000


def ran_with_1m_window(
    max_recorded_prompt: int | None, recorded_auto_compactions: Sequence[int] | None
) -> bool:
    """Whether the recorded session ran with the 1M window.

    A prompt above 200k is the evidence for it, unless the session compacted automatically
    below 200k tokens: with the 1M window that fires near 967k, so such a compaction shows the
    200k window (a file that starts with an older session's history can exceed 200k before its
    first compaction).
    """
    if max_recorded_prompt is None or max_recorded_prompt <= ONE_MILLION_EVIDENCE_TOKENS:
        return False
    return not any(0 < pre < ONE_MILLION_EVIDENCE_TOKENS for pre in recorded_auto_compactions or ())


def thread_window(
    max_recorded_prompt: int, recorded_auto_compactions: Sequence[int], default: int
) -> int:
    """The window one thread ran with, from its own records (``window_from_records``).

    A recorded prompt above 200k with no automatic compaction below 200k shows the 1M window;
    an automatic compaction below 200k shows the 200k window (the 1M window compacts near
    967k); otherwise the thread shows neither and keeps ``default``.
    """
    if ran_with_1m_window(max_recorded_prompt, recorded_auto_compactions):
        return 1_000_000
    if any(0 < pre < ONE_MILLION_EVIDENCE_TOKENS for pre in recorded_auto_compactions):
        return min(default, 200_000)
    return default


def resolve_config(
    preset: str = AUTO,
    overrides: Mapping[str, Any] | None = None,
    *,
    version: str | None = None,
    max_recorded_prompt: int | None = None,
    recorded_auto_compactions: Sequence[int] | None = None,
) -> tuple[PipelineConfig, str]:
    """The config to run with and the name of the preset it started from.

    ``"auto"`` resolves through ``preset_for_version(version)``, and switches to the 1M window
    when ``max_recorded_prompt`` (the largest recorded prompt of the session) exceeds 200k,
    unless ``recorded_auto_compactions`` (the ``preTokens`` of the session's recorded automatic
    compactions, ``Session.recorded_auto_compactions``) show the 200k window
    (``ran_with_1m_window``).
    ``overrides`` (settings, e.g. from ``config.read_settings``) are applied on top and
    validated. A ``preset`` key in the overrides replaces an ``"auto"`` argument, so a saved
    settings file keeps its base; naming two different presets is an error.
    """
    if overrides is not None and not isinstance(overrides, Mapping):
        raise FieldError("config", f"must be a table of settings, got {type(overrides).__name__}")
    values = dict(overrides or {})
    named = values.pop("preset", None)
    if named is not None:
        if not isinstance(named, str):
            raise FieldError("preset", f"must be a preset name, got {named!r}")
        if preset not in (AUTO, named):
            raise FieldError("preset", f"given twice: {preset!r} and {named!r} (in the overrides)")
        preset = named
    auto = preset == AUTO
    name = preset_for_version(version) if auto else preset
    if auto and "context_window" not in values:
        if ran_with_1m_window(max_recorded_prompt, recorded_auto_compactions):
            values["context_window"] = 1_000_000
        if max_recorded_prompt is not None and max_recorded_prompt > ONE_MILLION_EVIDENCE_TOKENS:
            # the session's evidence sets the default; a thread that shows its own window keeps
            # it (a thread can only show one when some prompt passed 200k; below that "auto"
            # stays the version's preset, so equal runs are still recognised as equal)
            values.setdefault("window_from_records", True)
    return PipelineConfig.from_dict({**values, "preset": name}), name


def resolve_request_config(
    preset: str | None,
    overrides: object,
    *,
    version: str | None = None,
    max_recorded_prompt: int | None = None,
    recorded_auto_compactions: Sequence[int] | None = None,
) -> tuple[PipelineConfig, str]:
    """``resolve_config`` for a submitted form or API body, whose fields are ``preset`` and
    ``config``: a ``FieldError`` names ``preset``, ``config`` or ``config.<setting>``, the
    path the API reports in ``detail[].loc`` and a form attaches the message to."""
    if overrides is not None and not isinstance(overrides, dict):
        raise FieldError("config", "must be a JSON object of field overrides")
    try:
        return resolve_config(
            preset or AUTO,
            overrides or None,
            version=version,
            max_recorded_prompt=max_recorded_prompt,
            recorded_auto_compactions=recorded_auto_compactions,
        )
    except FieldError as exc:
        if exc.field == "preset":
            raise
        raise exc.within("config") from None
