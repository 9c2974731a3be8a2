"""A failing backend degrades to the offline summary, and one circuit breaker stops calling it.

``FallbackSummarizer`` turns any failure of its primary into the fallback's summary, marked with
the reason (``SummaryResult.fallback_reason``); ``ReplayInterrupted`` passes through untouched.

The circuit breaker is Claude Code's autocompact breaker (spec §4.6.9: 3 consecutive failures
and it stops trying), kept per backend endpoint rather than per wrapper: ``breaker_for`` hands
out one ``CircuitBreaker`` per (backend, base URL, model) for the whole process. A worker that
builds a new ``FallbackSummarizer`` for every summary (``summaries/runner.py`` does) therefore
still stops calling a backend that failed 3 times in a row, across calls and runs. Because a
worker lives for days, an open breaker lets one trial call through after ``cooldown_s``: a
success closes it, a failure opens it for another cool-down.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable

from .extractive import ExtractiveSummarizer
from .interface import ReplayInterrupted, Summarizer, SummaryError, SummaryRequest, SummaryResult

log = logging.getLogger(__name__)

#: Consecutive failures that open a breaker (Claude Code's MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES).
BREAKER_THRESHOLD = 3
#: Seconds an open breaker waits before it lets one trial call through.
BREAKER_COOLDOWN_S = 300.0


class CircuitBreaker:
    """Counts consecutive failures of one backend; open at ``threshold`` until ``cooldown_s``
    has passed, then half-open: calls go through until the next outcome decides.

    Thread-safe: a threaded Celery pool shares one per process.
    """

    def __init__(
        self,
        threshold: int = BREAKER_THRESHOLD,
        cooldown_s: float = BREAKER_COOLDOWN_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = max(1, threshold)
        self.cooldown_s = cooldown_s
        self.consecutive_failures = 0
        self.last_failure: str | None = None
        self._opened_at: float | None = None
        self._clock = clock
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        """Open and still cooling down: the backend must not be called."""
        with self._lock:
            return self._opened_at is not None and (
                self._clock() - self._opened_at < self.cooldown_s
            )

    def record_failure(self, reason: str) -> bool:
        """Count a failure; True when this one opened the breaker."""
        with self._lock:
            self.consecutive_failures += 1
            self.last_failure = reason
            if self.consecutive_failures >= self.threshold:
                self._opened_at = self._clock()  # (re)opened: a failed trial waits again
                return True
            return False

    def record_success(self) -> None:
        with self._lock:
            self.consecutive_failures = 0
            self._opened_at = None

    def __repr__(self) -> str:
        return (
            f"CircuitBreaker(threshold={self.threshold}, cooldown_s={self.cooldown_s:g}, "
            f"consecutive_failures={self.consecutive_failures})"
        )


_BREAKERS: dict[Hashable, CircuitBreaker] = {}
_BREAKERS_LOCK = threading.Lock()


def breaker_for(
    identity: Hashable,
    *,
    threshold: int = BREAKER_THRESHOLD,
    cooldown_s: float = BREAKER_COOLDOWN_S,
) -> CircuitBreaker:
    """The process's breaker for one backend endpoint, e.g. ("anthropic", base URL, model).

    The first caller's threshold and cool-down configure it; every caller uses the same
    constants in practice (the CLI and the worker both take the defaults above).
    """
    with _BREAKERS_LOCK:
        breaker = _BREAKERS.get(identity)
        if breaker is None:
            breaker = _BREAKERS[identity] = CircuitBreaker(threshold, cooldown_s)
        return breaker


def reset_breakers() -> None:
    """Forget every breaker (tests; a worker never needs it: breakers close by themselves)."""
    with _BREAKERS_LOCK:
        _BREAKERS.clear()


class FallbackSummarizer:
    """Wraps an LLM summarizer: on failure, the fallback's summary marked with the reason.

    The breaker is the process-wide one of the primary's ``breaker_identity`` (both LLM backends
    have one); a primary without an identity gets a breaker of its own wrapper. After
    ``breaker_threshold`` consecutive failures the primary is not called until the cool-down
    has passed, and every result meanwhile says so. A success resets the count.
    """

    def __init__(
        self,
        primary: Summarizer,
        fallback: Summarizer | None = None,
        breaker_threshold: int = BREAKER_THRESHOLD,
        *,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self.primary = primary
        self.fallback: Summarizer = fallback if fallback is not None else ExtractiveSummarizer()
        identity = getattr(primary, "breaker_identity", None)
        if breaker is not None:
            self.breaker = breaker
        elif identity is not None:
            self.breaker = breaker_for(identity, threshold=breaker_threshold)
        else:
            self.breaker = CircuitBreaker(breaker_threshold)
        # results and the replay header name the backend that was asked for
        self.name = primary.name

    @property
    def breaker_threshold(self) -> int:
        return self.breaker.threshold

    @property
    def consecutive_failures(self) -> int:
        return self.breaker.consecutive_failures

    @property
    def breaker_open(self) -> bool:
        return self.breaker.is_open

    def __repr__(self) -> str:
        return (
            f"FallbackSummarizer(primary={self.primary!r}, fallback={self.fallback!r}, "
            f"breaker={self.breaker!r})"
        )

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        if self.breaker.is_open:
            reason = (
                f"{self.primary.name} not called: circuit breaker open after "
                f"{self.breaker.consecutive_failures} consecutive failures "
                f"(last: {self.breaker.last_failure})"
            )
            return self._fallback(request, reason)
        try:
            result = self.primary.summarize(request)
        except ReplayInterrupted:
            raise  # not a failure: the caller fetches the summary and replays, or stops
        except Exception as exc:  # any backend failure degrades to the fallback summary
            message = str(exc) if isinstance(exc, SummaryError) else f"{type(exc).__name__}: {exc}"
            if not message.startswith(f"{self.primary.name} "):
                message = f"{self.primary.name} failed: {message}"
            redact = getattr(self.primary, "redact", None)
            if callable(redact):
                message = str(redact(message))
            reason = message
            if self.breaker.record_failure(message):
                reason += (
                    f"; circuit breaker open after {self.breaker.consecutive_failures} "
                    f"consecutive failures: {self.primary.name} will not be called again for "
                    f"{self.breaker.cooldown_s:g} s"
                )
            log.warning("%s; using the %s summary", reason, self.fallback.name)
            return self._fallback(request, reason)
        self.breaker.record_success()
        return result

    def _fallback(self, request: SummaryRequest, reason: str) -> SummaryResult:
        result = self.fallback.summarize(request)
        result.fallback_reason = reason
        return result
