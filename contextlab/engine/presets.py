"""Named starting points for a ``PipelineConfig``, and which one matches a Claude Code version.

Version presets follow what the published npm bundles of ``@anthropic-ai/claude-code`` compute
(``getEffectiveContextWindowSize`` and ``calculateTokenWarningState``, read in 2.1.20, 2.1.21,
2.1.22, 2.1.25, 2.1.29, 2.1.39, 2.1.63, 2.1.69, 2.1.72, 2.1.74, 2.1.75 and 2.1.88):

========================  =============================  ======================================
versions                  output reserve in E            blocking limit
========================  =============================  ======================================
≤ 2.1.20 (1.x, 2.0.x)     the model's whole max output   raw window W − 3,000
2.1.21 – 2.1.74           min(max output, 20,000)        raw window W − 3,000
2.1.75 and later          min(max output, 20,000)        effective window E − 3,000
========================  =============================  ======================================

The autocompact buffer (13,000), the warning/error buffers (20,000), the blocking buffer (3,000)
and the session-memory compaction defaults are the same in all of them.
``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` first appears in 2.1.75.

The feature presets (``budget-on``, ``snip-on``, …) are the 2.1.88 defaults with one mechanism
switched on; combine them with overrides rather than with each other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .config import ConfigError, PipelineConfig

AUTO = "auto"
LATEST_PRESET = "claude-code-2.1.88"

_BASE = PipelineConfig()

PRESETS: dict[str, PipelineConfig] = {
    "claude-code-2.1.88": _BASE,
    "claude-code-2.1.74": _BASE.replace(blocking_limit_base="window"),
    "claude-code-2.1.20": _BASE.replace(reserve_full_max_output=True, blocking_limit_base="window"),
    "1m-window": _BASE.replace(context_window=1_000_000),
    "otk-cap-on": _BASE.replace(otk_slot_cap_enabled=True),
    "budget-on": _BASE.replace(per_message_budget_enabled=True),
    "time-microcompact-on": _BASE.replace(time_based_mc_enabled=True),
    "sm-compact-on": _BASE.replace(sm_compact_enabled=True),
    "snip-on": _BASE.replace(snip_enabled=True),
    # Only collapse_enabled changes: Claude Code keeps the user's autocompact switch on and lets
    # shouldAutoCompact stand down while collapse is enabled. Turning autocompact_enabled off
    # instead would move the warning base to E and re-arm the blocking preempt, which Claude Code
    # skips while collapse and autocompact are both on (see thresholds.Thresholds).
    "collapse-on": _BASE.replace(collapse_enabled=True),
    "aggressive": _BASE.replace(
        per_message_budget_enabled=True,
        time_based_mc_enabled=True,
        time_based_mc_gap_threshold_minutes=5,
        time_based_mc_keep_recent=3,
        autocompact_pct_override=75.0,
    ),
}

PRESET_DESCRIPTIONS: dict[str, str] = {
    "claude-code-2.1.88": "Claude Code 2.1.75 and later (public 2.1.88 defaults): "
    "E = W − min(max output, 20k), autocompact at E − 13k, blocking at E − 3k.",
    "claude-code-2.1.74": "Claude Code 2.1.21 – 2.1.74: same reserve and autocompact threshold "
    "as 2.1.88, but the blocking limit is the raw window − 3k (197k on 200k).",
    "claude-code-2.1.20": "Claude Code 2.1.20 and older: the whole max output is reserved "
    "(autocompact at 155k for a 32k-output model), blocking at the raw window − 3k.",
    "1m-window": "2.1.88 with a 1,000,000-token window (a [1m] model or the 1M beta): "
    "E 980k, autocompact at 967k.",
    "otk-cap-on": "2.1.88 with the 8k output-slot cap (tengu_otk_slot_v1): E 192k, "
    "autocompact at 179k on a 200k window.",
    "budget-on": "2.1.88 with the 200k-character per-message tool-result budget on "
    "(tengu_hawthorn_steeple).",
    "time-microcompact-on": "2.1.88 with time-based microcompact on (tengu_slate_heron): after "
    "60 idle minutes only the last 5 compactable tool results are kept.",
    "sm-compact-on": "2.1.88 with session-memory compaction tried before full compaction "
    "(tengu_session_memory + tengu_sm_compact).",
    "snip-on": "2.1.88 plus the modeled snip step (ant-only in Claude Code): from 80 % of E, "
    "old middle messages are removed down to 60 %.",
    "collapse-on": "2.1.88 plus modeled context collapse (commit at 90 %, blocking at 95 % of E); "
    "autocompact and the blocking preempt stand down, as in Claude Code.",
    "aggressive": "Savers on: per-message budget, time-based microcompact after 5 idle minutes "
    "keeping 3 results, and autocompact at 75 % of E (135k on a 200k window).",
}

#: Every name ``resolve_config`` accepts, ``"auto"`` first (for a select box).
PRESET_NAMES: tuple[str, ...] = (AUTO, *PRESETS)

#: ``(last version, preset)`` in ascending order; a version gets the first preset whose last
#: version it does not exceed, and anything newer gets ``LATEST_PRESET``.
VERSION_PRESETS: tuple[tuple[tuple[int, int, int], str], ...] = (
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


def get_preset(name: str) -> PipelineConfig:
    """The preset called ``name``; ``ConfigError('preset', …)`` if there is none."""
    if not isinstance(name, str):
        raise ConfigError("preset", f"must be a preset name, got {name!r}")
    if name == AUTO:
        raise ConfigError(
            "preset",
            "'auto' is chosen from a transcript's Claude Code version; "
            "use resolve_config(..., version=...) or preset_for_version()",
        )
    try:
        return PRESETS[name]
    except KeyError:
        known = ", ".join(PRESET_NAMES)
        raise ConfigError("preset", f"unknown preset {name!r}; known: {known}") from None


#: A recorded prompt above this cannot fit a 200k window: the session ran with the 1M window
#: (the ``[1m]`` suffix is not visible in ``message.model``; facts (b) item 4).
ONE_MILLION_EVIDENCE_TOKENS = 200_000


def resolve_config(
    preset: str = AUTO,
    overrides: Mapping[str, Any] | None = None,
    *,
    version: str | None = None,
    max_recorded_prompt: int | None = None,
) -> tuple[PipelineConfig, str]:
    """The config to run with and the name of the preset it started from.

    ``"auto"`` resolves through ``preset_for_version(version)``, and switches to the 1M window
    when ``max_recorded_prompt`` (the largest recorded prompt of the session) exceeds 200k. ``overrides`` (settings, e.g.
    from ``config.read_settings``) are applied on top and validated. A ``preset`` key in the
    overrides replaces an ``"auto"`` argument, so a saved settings file keeps its base; naming two
    different presets is an error.
    """
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError("config", f"must be a table of settings, got {type(overrides).__name__}")
    values = dict(overrides or {})
    named = values.pop("preset", None)
    if named is not None:
        if not isinstance(named, str):
            raise ConfigError("preset", f"must be a preset name, got {named!r}")
        if preset not in (AUTO, named):
            raise ConfigError("preset", f"given twice: {preset!r} and {named!r} (in the overrides)")
        preset = named
    auto = preset == AUTO
    name = preset_for_version(version) if auto else preset
    if (
        auto
        and max_recorded_prompt is not None
        and max_recorded_prompt > ONE_MILLION_EVIDENCE_TOKENS
        and "context_window" not in values
    ):
        values["context_window"] = 1_000_000
    return PipelineConfig.from_dict({**values, "preset": name}), name
