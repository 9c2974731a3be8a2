"""Which Claude Code setting or environment variable produces each what-if field (a declaration
table), and a config's overrides as a ``settings.json`` fragment plus environment lines.

Every field of ``PipelineConfig`` is one of three kinds:

* ``knob``: a user can set it in Claude Code: a ``settings.json`` key or an environment
  variable, from the version given, within its limits. Each name and version was read in the
  published npm packages (docs/claude-code-versions.md §9 gives the search strings);
* ``experiment``: Claude Code behaviour no user setting changes (a constant, a server-side
  GrowthBook flag, or a step ContextLab models): a what-if of it answers "what if Claude Code
  did this", not "what should I set";
* ``measurement``: how ContextLab reads the transcript (tokenizer anchors, cache-break
  detection, the window evidence): not Claude Code behaviour at all.

``claude_code_settings`` turns overrides into what a team can paste: only knobs, and it names
the fields it cannot express and why.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

KnobKind = Literal["env", "setting"]
FieldKind = Literal["knob", "experiment", "measurement"]

#: The newest package the names below were checked in (docs/claude-code-versions.md §9).
NEWEST_CHECKED = "2.1.319"


def version_key(version: str) -> tuple[int, ...]:
    """``"2.1.243"`` → ``(2, 1, 243)``; anything unparsable sorts first."""
    parts: list[int] = []
    for piece in version.strip().split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


@dataclass(frozen=True, slots=True)
class Knob:
    """One way to set a field in Claude Code."""

    kind: KnobKind
    #: the settings.json key (dotted for nested keys) or the environment variable
    name: str
    #: the first published version the name was found in (as far as the checked versions tell)
    since: str
    #: what the knob can and cannot do, in a sentence
    limits: str
    #: the field's value as the knob's value; None when this value cannot be expressed
    encode: Callable[[Any], Any] = field(repr=False, compare=False, default=str)
    #: the last version without it (the bracket the search found), "" when not checked
    absent_in: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "name": self.name,
            "since": self.since,
            "absent_in": self.absent_in,
            "limits": self.limits,
        }


def _not_flag(value: Any) -> str | None:
    return None if value else "1"


def _number(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    return str(int(value)) if float(value).is_integer() else str(value)


def _window_capped(value: Any) -> int | None:
    # settings.json validates 100,000 ≤ autoCompactWindow ≤ 1,000,000 (an integer)
    if value is None or isinstance(value, bool) or not 100_000 <= int(value) <= 1_000_000:
        return None
    return int(value)


def _window_env(value: Any) -> str | None:
    capped = _window_capped(value)
    return None if capped is None else str(capped)


def _only_200k(value: Any) -> str | None:
    return "1" if value == 200_000 else None


def _ttl_setting(value: Any) -> str | None:
    return value if value in ("5m", "1h") else None


def _ttl_1h(value: Any) -> str | None:
    return "1" if value == "1h" else None


def _ttl_5m(value: Any) -> str | None:
    return "1" if value == "5m" else None


#: field → its knobs, the preferred one first (a settings.json key before an env variable when
#: the target version has both).
KNOBS: dict[str, tuple[Knob, ...]] = {
    "autocompact_pct_override": (
        Knob(
            "env",
            "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
            since="2.0.64",
            absent_in="2.0.0",
            limits="0 < pct ≤ 100 of the effective window; it can only lower the threshold "
            "(T = min(floor(E·pct/100), E − 13,000)), never raise it",
            encode=_number,
        ),
    ),
    "auto_compact_window": (
        Knob(
            "setting",
            "autoCompactWindow",
            since="2.1.100",
            absent_in="2.1.88",
            limits="an integer from 100,000 to 1,000,000 (other values are ignored); caps the "
            "window before the output reserve is taken off; the environment variable wins "
            "over it",
            encode=_window_capped,
        ),
        Knob(
            "env",
            "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
            since="2.1.88",
            absent_in="2.1.20",
            limits="clamped to 100,000 – 1,000,000; only lowers the window (min with the model's)",
            encode=_window_env,
        ),
    ),
    "autocompact_enabled": (
        Knob(
            "env",
            "DISABLE_AUTO_COMPACT",
            since="2.1.88",
            limits="turns automatic compaction off (manual /compact still works); "
            "autoCompactEnabled in /config does the same per user",
            encode=_not_flag,
        ),
    ),
    "max_output_tokens": (
        Knob(
            "env",
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
            since="1.0.61",
            limits="capped at the model's upper limit; from 2.1.21 the window reserves at most "
            "20,000 of it",
            encode=_number,
        ),
    ),
    "blocking_limit_override": (
        Knob(
            "env",
            "CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE",
            since="2.1.0",
            absent_in="2.0.76",
            limits="the token count at which a request is refused until /compact",
            encode=_number,
        ),
    ),
    "context_window": (
        Knob(
            "env",
            "CLAUDE_CODE_DISABLE_1M_CONTEXT",
            since="2.1.88",
            limits="only 200,000: holds a 1M model ([1m] or native 1M) at 200K (from 2.1.223 by "
            "auto-compaction); other windows are the model's choice",
            encode=_only_200k,
        ),
    ),
    "cache_ttl": (
        Knob(
            "setting",
            "promptCacheTtl",
            since="2.1.242",
            absent_in="2.1.241",
            limits="'5m' or '1h' for the main conversation (subagentPromptCacheTtl for "
            "subagents; env CLAUDE_CODE_PROMPT_CACHE_TTL wins over both); a 1-hour write "
            "costs 2× input against 1.25× for 5 minutes",
            encode=_ttl_setting,
        ),
        Knob(
            "env",
            "ENABLE_PROMPT_CACHING_1H",
            since="2.1.108",
            absent_in="2.1.107",
            limits="asks for the 1-hour TTL (API-key and enterprise users; subscribers get it "
            "by default)",
            encode=_ttl_1h,
        ),
        Knob(
            "env",
            "FORCE_PROMPT_CACHING_5M",
            since="2.1.108",
            absent_in="2.1.107",
            limits="forces the 5-minute TTL where 1 hour would be the default",
            encode=_ttl_5m,
        ),
    ),
}

#: Fields that describe how ContextLab reads a session, not what Claude Code does.
MEASUREMENT_FIELDS = frozenset(
    {
        "window_from_records",
        "cache_lookback_blocks",
        "cache_lookback_enabled",
        "cache_global_prefix_warm",
        "cache_system_prefix_share",
        "cache_system_survival_seconds",
        "cache_recorded_server_misses",
        "cache_break_min_miss_tokens",
        "cache_break_min_drop_pct",
        "anchors_enabled",
        "whatif_recorded_counts",
        "anchor_selection",
        "anchor_margin_tokens",
        "anchor_margin_share",
        "anchor_ratio_min",
        "anchor_ratio_max",
        "unseen_prefix_prior_tokens",
    }
)


def field_kind(name: str) -> FieldKind:
    """``knob``, ``measurement`` or ``experiment`` (every other field)."""
    if name in KNOBS:
        return "knob"
    if name in MEASUREMENT_FIELDS:
        return "measurement"
    return "experiment"


def counterpart(name: str) -> dict[str, Any]:
    """What forms and the API show beside a field: its kind and its knobs."""
    kind = field_kind(name)
    return {
        "kind": kind,
        "experiment": kind == "experiment",
        "knobs": [knob.as_dict() for knob in KNOBS.get(name, ())],
    }


@dataclass(frozen=True, slots=True)
class ClaudeCodeSettings:
    """Overrides as Claude Code settings: what to paste, and what cannot be pasted."""

    #: settings.json keys (the environment variables also under ``env``, as settings.json takes)
    settings: dict[str, Any]
    #: environment variables, for a shell or the ``env`` block
    env: dict[str, str]
    #: field → why it has no Claude Code counterpart at this value or version
    not_expressible: dict[str, str]
    #: the oldest Claude Code version that understands every key given
    min_version: str

    def env_lines(self) -> list[str]:
        return [f"export {name}={value}" for name, value in sorted(self.env.items())]

    def settings_json(self) -> str:
        return json.dumps(self.settings, indent=2, sort_keys=True)

    def as_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "env": self.env,
            "env_lines": self.env_lines(),
            "not_expressible": self.not_expressible,
            "min_version": self.min_version,
        }


def claude_code_settings(
    overrides: Mapping[str, Any], *, version: str = NEWEST_CHECKED
) -> ClaudeCodeSettings:
    """The Claude Code settings that produce ``overrides`` on ``version`` (the newest checked by
    default): for each field the first knob the version has whose value can express it."""
    target = version_key(version)
    settings: dict[str, Any] = {}
    env: dict[str, str] = {}
    missing: dict[str, str] = {}
    needed: list[str] = []
    for name, value in overrides.items():
        knobs = KNOBS.get(name)
        if not knobs:
            kind = field_kind(name)
            missing[name] = (
                "an experiment: no Claude Code setting changes it"
                if kind == "experiment"
                else "how ContextLab measures the session, not a Claude Code setting"
            )
            continue
        for knob in knobs:
            if version_key(knob.since) > target:
                continue
            encoded = knob.encode(value)
            if encoded is None:
                continue
            if knob.kind == "env":
                env[knob.name] = str(encoded)
            else:
                settings[knob.name] = encoded
            needed.append(knob.since)
            break
        else:
            available = [k for k in knobs if version_key(k.since) <= target]
            if not available:
                first = min(knobs, key=lambda k: version_key(k.since))
                missing[name] = f"{first.name} needs Claude Code {first.since} or later"
            else:
                knob = available[-1]
                missing[name] = f"{value!r} is outside what {knob.name} can set: {knob.limits}"
    if env:
        settings["env"] = dict(sorted(env.items()))
    min_version = max(needed, key=version_key) if needed else ""
    return ClaudeCodeSettings(settings, env, missing, min_version)


def overrides_from_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The what-if overrides a settings.json fragment (with its ``env`` block) stands for: the
    inverse of ``claude_code_settings`` for the values it writes."""
    env: Mapping[str, Any] = settings.get("env") or {}
    out: dict[str, Any] = {}
    if "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE" in env:
        out["autocompact_pct_override"] = float(env["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"])
    if "CLAUDE_CODE_AUTO_COMPACT_WINDOW" in env:
        out["auto_compact_window"] = int(env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"])
    elif "autoCompactWindow" in settings:
        out["auto_compact_window"] = int(settings["autoCompactWindow"])
    if env.get("DISABLE_AUTO_COMPACT") == "1":
        out["autocompact_enabled"] = False
    if "CLAUDE_CODE_MAX_OUTPUT_TOKENS" in env:
        out["max_output_tokens"] = int(env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"])
    if "CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE" in env:
        out["blocking_limit_override"] = int(env["CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE"])
    if env.get("CLAUDE_CODE_DISABLE_1M_CONTEXT") == "1":
        out["context_window"] = 200_000
    if settings.get("promptCacheTtl") in ("5m", "1h"):
        out["cache_ttl"] = settings["promptCacheTtl"]
    elif env.get("ENABLE_PROMPT_CACHING_1H") == "1":
        out["cache_ttl"] = "1h"
    elif env.get("FORCE_PROMPT_CACHING_5M") == "1":
        out["cache_ttl"] = "5m"
    return out
