"""Claude Code's threshold arithmetic: window, output reserve, autocompact, warning, blocking.

Mirrors ``getEffectiveContextWindowSize``, ``getAutoCompactThreshold`` and
``calculateTokenWarningState`` (services/compact/autoCompact.ts; pipeline-spec §1.8, facts §6.1),
with the version differences of ``presets`` expressed as config fields. For a 200k window and a
model with ≥ 20k max output on 2.1.88: effective 180,000, autocompact 167,000, warning 147,000,
blocking 177,000.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, TypedDict

from contextlab.engine.input.jsutil import js_round
from contextlab.engine.measures.model_limits import (
    CONTEXT_WINDOW_1M,
    ModelTable,
    is_1m_model,
    model_info,
)

from .fields import PipelineConfig, check_effective_window, reserved_output


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Every token limit the pipeline compares a count against, for one config and model."""

    #: W after the ``[1m]`` rule and the ``auto_compact_window`` cap
    context_window: int
    #: M: the max output tokens Claude Code would request
    max_output: int
    #: tokens taken off W for the output (min(M, 20k), or M for ≤ 2.1.20)
    reserved: int
    #: E = W − reserved
    effective_window: int
    #: T: autocompact fires at a count ≥ this
    autocompact_threshold: int
    warning_threshold: int
    error_threshold: int
    #: the blocking preempt ends the turn at a count ≥ this
    blocking_limit: int
    #: the user's autocompact switch; it sets the warning base (T when on, E when off)
    autocompact_enabled: bool
    #: whether the autocompact step can fire: enabled and not standing down for context collapse
    autocompact_active: bool
    #: Claude Code skips the blocking preempt while collapse and autocompact are both enabled
    blocking_preempt_active: bool
    #: modeled: collapse commits / blocks at these counts (None when collapse is off)
    collapse_commit_threshold: int | None
    collapse_blocking_threshold: int | None
    #: modeled: snip fires at the trigger and cuts down to the target (None when snip is off)
    snip_trigger_threshold: int | None
    snip_target_tokens: int | None

    @property
    def warning_base(self) -> int:
        """The "threshold" of ``calculateTokenWarningState``: T, or E with autocompact off."""
        return self.autocompact_threshold if self.autocompact_enabled else self.effective_window

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class TokenWarningState(TypedDict):
    """``calculateTokenWarningState``'s result, in snake_case."""

    percent_left: int
    is_above_warning: bool
    is_above_error: bool
    is_above_autocompact: bool
    is_at_blocking: bool


def _fraction_of(value: int, fraction: float) -> int:
    # Rounded to 6 places first so 180,000 × 0.95 cannot floor to 170,999 through float noise;
    # these thresholds are modeled, so there is no JS arithmetic to mirror bit for bit.
    return math.floor(round(value * fraction, 6))


def compute_thresholds(
    config: PipelineConfig, model: str | None, *, table: ModelTable | None = None
) -> Thresholds:
    """All thresholds for ``config`` and ``model`` (a recorded ``message.model``; ``None`` = the
    fallback model). Raises ``ConfigError`` if this model's output reserve leaves no room."""
    info = model_info(model, table)
    window = CONTEXT_WINDOW_1M if is_1m_model(model) else config.context_window
    window_field = "context_window"
    if config.auto_compact_window is not None and config.auto_compact_window < window:
        window, window_field = config.auto_compact_window, "auto_compact_window"

    default_output = info.max_output_default
    if config.otk_slot_cap_enabled:
        default_output = min(default_output, config.capped_default_max_tokens)
    requested = config.max_output_tokens if config.max_output_tokens is not None else default_output
    max_output = min(requested, info.max_output_upper)

    effective = check_effective_window(config, window, max_output, window_field)
    reserved = reserved_output(config, max_output)

    threshold = effective - config.autocompact_buffer_tokens
    if config.autocompact_pct_override is not None:
        # Same operation order as the JS (E * (pct / 100)) so floor() sees the same double.
        by_percent = math.floor(effective * (config.autocompact_pct_override / 100))
        threshold = min(by_percent, threshold)

    base = threshold if config.autocompact_enabled else effective
    if config.blocking_limit_override is not None:
        blocking = config.blocking_limit_override
    elif config.blocking_limit_base == "window":
        blocking = window - config.manual_compact_buffer_tokens
    else:
        blocking = effective - config.manual_compact_buffer_tokens

    collapse = config.collapse_enabled
    snip = config.snip_enabled
    return Thresholds(
        context_window=window,
        max_output=max_output,
        reserved=reserved,
        effective_window=effective,
        autocompact_threshold=threshold,
        warning_threshold=base - config.warning_threshold_buffer_tokens,
        error_threshold=base - config.error_threshold_buffer_tokens,
        blocking_limit=blocking,
        autocompact_enabled=config.autocompact_enabled,
        autocompact_active=config.autocompact_enabled and not collapse,
        blocking_preempt_active=not (collapse and config.autocompact_enabled),
        collapse_commit_threshold=_fraction_of(effective, config.collapse_commit_pct)
        if collapse
        else None,
        collapse_blocking_threshold=_fraction_of(effective, config.collapse_blocking_pct)
        if collapse
        else None,
        snip_trigger_threshold=_fraction_of(effective, config.snip_trigger_pct) if snip else None,
        snip_target_tokens=_fraction_of(effective, config.snip_target_pct) if snip else None,
    )


def token_warning_state(count: int, thresholds: Thresholds) -> TokenWarningState:
    """Where ``count`` tokens stand against ``thresholds`` (``calculateTokenWarningState``).

    ``is_above_autocompact`` follows Claude Code in looking only at the user's switch; whether
    the autocompact step actually runs is ``thresholds.autocompact_active``.
    """
    base = thresholds.warning_base
    percent_left = max(0, js_round((base - count) / base * 100)) if base > 0 else 0
    return {
        "percent_left": percent_left,
        "is_above_warning": count >= thresholds.warning_threshold,
        "is_above_error": count >= thresholds.error_threshold,
        "is_above_autocompact": thresholds.autocompact_enabled
        and count >= thresholds.autocompact_threshold,
        "is_at_blocking": count >= thresholds.blocking_limit,
    }
