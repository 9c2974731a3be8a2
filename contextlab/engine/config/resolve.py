"""A preset plus overrides, resolved to the config a replay runs with."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .errors import FieldError
from .fields import PipelineConfig, preset_configs, preset_descriptions
from .presets import AUTO, ONE_MILLION_EVIDENCE_TOKENS, preset_for_version, ran_with_1m_window

PRESETS: dict[str, PipelineConfig] = preset_configs()

#: The preset of Codex sessions under "auto" (its name is the Codex adapter's agent name).
CODEX_PRESET = "codex"
#: A Codex session's recorded automatic compaction sets its what-if limit only from this share
#: of the window up: one below was not the limit (Codex's default limit is near 90 %).
CODEX_LIMIT_EVIDENCE = 0.5

PRESET_DESCRIPTIONS: dict[str, str] = preset_descriptions()

#: Every name ``resolve_config`` accepts, ``"auto"`` first (for a select box).
PRESET_NAMES: tuple[str, ...] = (AUTO, *PRESETS)


def resolve_config(
    preset: str = AUTO,
    overrides: Mapping[str, Any] | None = None,
    *,
    version: str | None = None,
    max_recorded_prompt: int | None = None,
    recorded_auto_compactions: Sequence[int] | None = None,
    recorded_window: int | None = None,
    agent: str | None = None,
) -> tuple[PipelineConfig, str]:
    """The config to run with and the name of the preset it started from.

    ``"auto"`` resolves through ``preset_for_version(version)``, and switches to the 1M window
    when ``max_recorded_prompt`` (the largest recorded prompt of the session) exceeds 200k,
    unless ``recorded_auto_compactions`` (the ``preTokens`` of the session's recorded automatic
    compactions, ``Session.recorded_auto_compactions``) show the 200k window
    (``ran_with_1m_window``).
    ``recorded_window`` (the window the agent itself recorded, ``Session.context_window``:
    Codex writes its ``model_context_window``) is ``"auto"``'s window when the overrides set none.
    ``agent`` (``Session.agent``): a Codex session's ``"auto"`` is the ``codex`` preset, its
    automatic compactions just under the smallest recorded one (``recorded_auto_compactions``,
    inferred from the rollout) when the overrides set no threshold.
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
    if auto and agent == CODEX_PRESET:
        name = CODEX_PRESET
        if recorded_window and "context_window" not in values:
            values["context_window"] = recorded_window
        window = values.get("context_window", recorded_window)
        # a compaction well under the window was no limit's (a /compact inferred as automatic)
        pre = [
            p
            for p in recorded_auto_compactions or ()
            if isinstance(window, int) and p >= window * CODEX_LIMIT_EVIDENCE
        ]
        own = {
            "autocompact_pct_override",
            "autocompact_buffer_tokens",
            "max_output_tokens_for_summary",
        }
        if pre and isinstance(window, int) and window > 1 and not own & set(values):
            # T = floor(E·pct/100) with E = W − 1 (the preset reserves one token)
            values["autocompact_pct_override"] = max(
                0.001, min(100.0, math.floor(min(pre) * 100_000 / (window - 1)) / 1000)
            )
    elif auto and "context_window" not in values and recorded_window:
        values["context_window"] = recorded_window
    elif auto and "context_window" not in values:
        if ran_with_1m_window(max_recorded_prompt, recorded_auto_compactions):
            values["context_window"] = 1_000_000
        if max_recorded_prompt is not None and max_recorded_prompt > ONE_MILLION_EVIDENCE_TOKENS:
            # the session's evidence sets the default; a thread that shows its own window keeps
            # it (a thread can only show one when some prompt passed 200k; below that "auto"
            # stays the version's preset, so equal runs are still recognised as equal)
            values.setdefault("window_from_records", True)
    return PipelineConfig.from_dict({**values, "preset": name}), name


class RecordedFacts(Protocol):
    """What ``"auto"`` reads of a session (``input.session.Session`` has these)."""

    @property
    def version(self) -> str | None: ...
    @property
    def max_recorded_prompt(self) -> int | None: ...
    @property
    def recorded_auto_compactions(self) -> Sequence[int]: ...
    @property
    def context_window(self) -> int | None: ...
    @property
    def agent(self) -> str: ...


def resolve_session_config(
    session: RecordedFacts, preset: str = AUTO, overrides: Mapping[str, Any] | None = None
) -> tuple[PipelineConfig, str]:
    """``resolve_config`` with everything ``"auto"`` reads taken from ``session``."""
    return resolve_config(
        preset,
        overrides,
        version=session.version,
        max_recorded_prompt=session.max_recorded_prompt,
        recorded_auto_compactions=session.recorded_auto_compactions,
        recorded_window=session.context_window,
        agent=session.agent,
    )


def resolve_request_config(
    preset: str | None,
    overrides: object,
    *,
    version: str | None = None,
    max_recorded_prompt: int | None = None,
    recorded_auto_compactions: Sequence[int] | None = None,
    recorded_window: int | None = None,
    agent: str | None = None,
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
            recorded_window=recorded_window,
            agent=agent,
        )
    except FieldError as exc:
        if exc.field == "preset":
            raise
        raise exc.within("config") from None
