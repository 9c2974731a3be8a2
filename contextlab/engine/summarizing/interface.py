"""What every summarizer shares: the request, the result, the protocol and the interruptions.

A summarizer writes one summary per ``SummaryRequest``. ``ReplayInterrupted`` (and its two kinds,
``SummaryPending`` in ``stored`` and ``ReplayStopped`` here) is never a failed summary: it pauses
or stops the whole replay, so no step degrades it to a fallback or counts it toward a breaker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from contextlab.engine.input.model import Message

from .prompts import codex_compact_prompt, collapse_prompt, compact_prompt

#: The summarizer backends a replay can use (the LLM ones have a module each in this package).
SUMMARIZER_NAMES = ("extractive", "anthropic", "openai")


@dataclass
class SummaryRequest:
    """What a summarizer gets: the messages to summarize and why."""

    messages: list[Message]
    kind: str = "compact"  # "compact" | "codex_compact" | "collapse" | "session_memory"
    model: str | None = None
    custom_instructions: str = ""
    prompt: str = field(default="")

    def __post_init__(self) -> None:
        if not self.prompt:
            if self.kind == "collapse":
                self.prompt = collapse_prompt(self.custom_instructions)
            elif self.kind == "codex_compact":
                self.prompt = codex_compact_prompt(self.custom_instructions)
            else:
                self.prompt = compact_prompt(self.custom_instructions)


@dataclass
class SummaryResult:
    """A summary, and who wrote it."""

    text: str
    backend: str
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    reused: bool = False
    fallback_reason: str | None = None
    #: wall-clock seconds the backend took, retries and back-off included (0 for offline ones)
    latency_s: float = 0.0
    #: prompt tokens the provider served from its cache (already included in ``input_tokens``)
    cache_read_tokens: int = 0


class Summarizer(Protocol):
    """Writes summaries; ``name`` says which backend, so results can say who wrote what."""

    name: str

    def summarize(self, request: SummaryRequest) -> SummaryResult: ...


class SummaryError(RuntimeError):
    """A summarizer gave up. The message says which backend, why, and after how many tries.

    ``kind`` is one of "retryable" (transient errors outlasted the SDK's retries),
    "prompt_too_long", "malformed", "fatal" (e.g. 401/404: retrying would not help) or "budget"
    (the server asked for a longer wait than ``LLMSettings.max_retry_after`` allows). ``status``
    is the last HTTP status, if any; ``attempts`` the HTTP requests of the last call.
    """

    def __init__(
        self,
        message: str,
        *,
        backend: str = "",
        kind: str = "fatal",
        status: int | None = None,
        attempts: int = 0,
    ) -> None:
        super().__init__(message)
        self.backend = backend
        self.kind = kind
        self.status = status
        self.attempts = attempts


class ReplayInterrupted(Exception):
    """Raised by a summarizer to pause or stop the whole replay: never a failed summary, so no
    step degrades it to a fallback or counts it toward a circuit breaker."""


class ReplayStopped(ReplayInterrupted):
    """A summarizer stops the whole replay (a spend cap, say)."""
