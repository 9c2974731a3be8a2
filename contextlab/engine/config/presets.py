"""The named starting points (``data/presets.toml``) and which Claude Code version each matches.

Each preset is a table of settings over the defaults, with one sentence saying what it changes;
``fields.get_preset`` validates it into a ``PipelineConfig``. A transcript's Claude Code version
picks its preset (``preset_for_version``), and its recorded prompts show which window it ran
with (``ran_with_1m_window``, ``thread_window``).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import FieldError

#: Not a preset: "pick the preset matching the transcript's Claude Code version".
AUTO = "auto"
LATEST_PRESET = "claude-code-2.1.88"

PRESETS_FILE = Path(__file__).parent / "data" / "presets.toml"


def preset_entries() -> dict[str, tuple[dict[str, Any], str]]:
    """``{name: (settings, description)}`` in file order, each entry's shape checked (its
    settings are checked as a config by ``fields.get_preset``)."""
    where = PRESETS_FILE.name
    try:
        data = tomllib.loads(PRESETS_FILE.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise FieldError(where, f"invalid TOML: {exc}") from exc
    entries: dict[str, tuple[dict[str, Any], str]] = {}
    for name, entry in data.items():
        here = f"{where} [{name}]"
        if not isinstance(entry, dict) or set(entry) - {"description", "settings"}:
            raise FieldError(here, "must be a table with description and settings only")
        description = entry.get("description")
        if not isinstance(description, str) or not description.strip():
            raise FieldError(f"{here}.description", "must be a non-empty string")
        settings = entry.get("settings", {})
        if not isinstance(settings, dict):
            raise FieldError(f"{here}.settings", "must be a table of settings")
        entries[name] = (settings, description)
    return entries


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
