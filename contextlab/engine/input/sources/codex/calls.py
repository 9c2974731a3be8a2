"""The rollout cut into model calls: one per de-duplicated ``token_count`` event.

Codex writes a ``token_count`` event after each model call, and many more that repeat the
previous figures (after a tool ran, at a turn's end): a call is an event whose cumulative
``total_token_usage`` differs from the previous one (``info: null`` events, the first of a
session among them, carry nothing). Its own figures are ``last_token_usage`` (else the
difference of the totals). The output items of the call (reasoning, messages, tool calls) are
written after its event by some versions and before it by others: an event is the call of the
open run of output items when that run has no figures yet, else of the next run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contextlab.engine.input.model import Usage

from .items import usage_of

USAGE_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


@dataclass
class CallFigures:
    """One model call's recorded figures (``last_token_usage``)."""

    line: int
    timestamp: str
    input: int
    cached: int
    output: int
    reasoning: int
    total: int
    window: int | None
    #: the event's cumulative ``total_token_usage``, where it has one
    cumulative: dict[str, int] | None = None
    #: input tokens by which the cumulative figures grew more than this call's own (figures
    #: carried in from elsewhere: a parent's, in a fork); 0 when they add up
    jump: int = 0

    def usage(self) -> Usage:
        """As the engine's usage: input without its cached part, the cached part as cache
        read (OpenAI's prefix cache has no write), output with its reasoning part."""
        cached = self.cached if self.cached < self.input else self.input  # (``min``)
        # positional (input, cache_write, cache_read, output): a call per model call
        return Usage(self.input - cached, 0, cached, self.output)

    def carried(self) -> dict[str, int]:
        """The cumulative usage before this call: its ``total_token_usage`` less its own
        figures. Nothing for a rollout's first call, unless its totals go on from another
        rollout's (a fork's parent's)."""
        own = {
            "input_tokens": self.input,
            "cached_input_tokens": self.cached,
            "output_tokens": self.output,
            "reasoning_output_tokens": self.reasoning,
            "total_tokens": self.total,
        }
        if self.cumulative is None:
            return dict.fromkeys(own, 0)
        return {k: max(0, self.cumulative[k] - v) for k, v in own.items()}

    @property
    def is_context_marker(self) -> bool:
        """No input and no output, only a ``total_tokens``: not a call but the size of the
        context after a remote compaction."""
        return self.input == 0 and self.output == 0


class TokenCounter:
    """De-duplicates ``token_count`` events and keeps the session's final totals."""

    def __init__(self) -> None:
        self.last_total: dict[str, int] | None = None
        self.final_total: dict[str, int] | None = None
        self.last_marker: dict[str, int] | None = None

    def read(self, info: Any, line: int, timestamp: str) -> CallFigures | None:
        """The figures of a new call (or context marker) in a ``token_count``'s ``info``;
        None for an event that repeats the previous one or carries nothing."""
        if not isinstance(info, dict):
            return None
        total = usage_of(info.get("total_token_usage"))
        last = usage_of(info.get("last_token_usage"))
        if total is None and last is None:
            return None
        if total is not None:
            if self.last_total is not None and _same(total, self.last_total):
                # the same cumulative figures: a repeat, unless ``last_token_usage`` carries
                # only a context size (the count after a remote compaction)
                marker = last is not None and _is_marker(last) and last != self.last_marker
                if not marker:
                    return None
                self.last_marker = last
            previous = self.last_total
            self.last_total = total
            self.final_total = total
            if last is None:
                last = {k: total[k] - (previous or {}).get(k, 0) for k in total}
        assert last is not None
        cumulative = total
        jump = 0
        if total is not None:
            before = (previous or {}).get("input_tokens", 0)
            jump = total["input_tokens"] - before - last["input_tokens"]
        window = info.get("model_context_window")
        window_ok = isinstance(window, int) and not isinstance(window, bool) and window > 0
        # positional, in the fields' order (a call per model call: keywords cost a third of
        # it), each figure at least 0 by a comparison (``max(0, …)``: a builtin call each)
        inp, cached, out = last["input_tokens"], last["cached_input_tokens"], last["output_tokens"]
        reasoning, total_tokens = last["reasoning_output_tokens"], last["total_tokens"]
        return CallFigures(
            line,
            timestamp,
            inp if inp > 0 else 0,
            cached if cached > 0 else 0,
            out if out > 0 else 0,
            reasoning if reasoning > 0 else 0,
            total_tokens if total_tokens > 0 else 0,
            window if window_ok else None,
            cumulative,
            jump if jump > 0 else 0,
        )


def _is_marker(last: dict[str, int]) -> bool:
    return last["input_tokens"] == 0 and last["output_tokens"] == 0 and last["total_tokens"] > 0


def _same(a: dict[str, int], b: dict[str, int]) -> bool:
    # every figure of ``USAGE_KEYS`` and the total, written out: most events repeat the previous
    # one, and this runs for each
    return (
        a["input_tokens"] == b["input_tokens"]
        and a["cached_input_tokens"] == b["cached_input_tokens"]
        and a["output_tokens"] == b["output_tokens"]
        and a["reasoning_output_tokens"] == b["reasoning_output_tokens"]
        and a["total_tokens"] == b["total_tokens"]
    )


def window_for_version(version: str | None) -> int | None:
    """The window Codex used for the gpt-5 family, for a rollout that records none: 272,000
    up to 0.47, then 258,400 (95 % of it); None for a version that is not ``0.N…``."""
    parts = (version or "").split(".")
    if len(parts) < 2 or parts[0] != "0" or not parts[1].isdigit():
        return None
    return 272_000 if int(parts[1]) <= 47 else 258_400


def usage_gap(final: dict[str, int], calls: list[Usage]) -> str | None:
    """Where the calls' recorded figures do not add up to the session's totals, a sentence
    saying by how much; None when they do."""
    summed = {
        "input_tokens": sum(u.input + u.cache_read for u in calls),
        "cached_input_tokens": sum(u.cache_read for u in calls),
        "output_tokens": sum(u.output for u in calls),
    }
    gaps = [k for k, v in summed.items() if v != final[k]]
    if not gaps:
        return None
    return (
        "the calls' recorded figures do not add up to the final total_token_usage "
        + ", ".join(f"{k}: {summed[k]:,} vs {final[k]:,}" for k in gaps)
        + " (session totals are the final total_token_usage)"
    )


def carried_in_note(jumped_in: int) -> str:
    """The sentence for cumulative figures that grew by more than the calls' own."""
    return (
        f"the cumulative figures grow by {jumped_in:,} input tokens more than the calls' own "
        "(usage carried in from another session: a fork or a copy whose session_meta does not "
        "say so?); the session totals are the final total_token_usage, which includes them"
    )
