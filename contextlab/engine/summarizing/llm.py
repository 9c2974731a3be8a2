"""What both LLM backends share: their settings, the prompt-too-long loop, errors and accounting.

A backend module (``anthropic_backend``, ``openai_backend``) only builds its SDK client, sends
one request and reads the reply; everything else is here, written once.

Retries are the SDKs' own (both are Stainless clients with the same policy):

* ``max_retries`` retries (default 4, so at most 5 HTTP requests per call) of 408, 409, 429,
  5xx (529 "overloaded" included), connection errors and timeouts; other 4xx fail at once;
* between attempts the server's ``retry-after-ms`` / ``retry-after`` when it sends one, else
  0.5 s × 2^n (at most 8 s) minus up to 25 % jitter: 0.5, 1, 2, 4 s for the default 4 retries;
* ``timeout`` (seconds) is the SDK's per-attempt timeout (each of connect, read, write), and a
  timed-out attempt is retried like a connection error;
* one thing the SDKs do not bound: the Anthropic SDK waits for any ``retry-after`` however long
  (the OpenAI SDK gives up above 120 s). A response hook tells both not to retry when the
  server asks for more than ``max_retry_after`` seconds (the SDKs' own ``x-should-retry``
  header), so the call fails at once with kind "budget" instead of holding a worker.

Worst case for one call, then: ``(max_retries + 1) × timeout`` for attempts that never answer
plus ``max_retries × max(max_retry_after, 8 s)`` of waiting, ``5 × 120 + 4 × 60 = 840 s`` with
the defaults (``LLMSettings.worst_case_seconds``), inside the worker's 1,740 s soft time limit.
A prompt-too-long answer is not retried by the SDK: it drops the oldest rounds and makes a new
call, at most ``MAX_PTL_RETRIES`` times (spec §4.6.8). A reply without text is a failure, never
an empty summary.

API keys are never put into results, exception messages, logs or reprs.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from contextlab.engine.input.model import Message
from contextlab.engine.measures.cost import PricingTable, load_pricing, request_cost

from .interface import SummaryError, SummaryRequest, SummaryResult
from .prompts import format_summary
from .rendering import (
    MAX_PTL_RETRIES,
    Turn,
    real_message_count,
    render_block,
    render_conversation,
    truncate_head_for_ptl_retry,
)

log = logging.getLogger(__name__)

#: max_tokens of the compaction call (COMPACT_MAX_OUTPUT_TOKENS, capped by the model's maximum).
COMPACT_MAX_OUTPUT_TOKENS = 20_000
#: System prompt of Claude Code's direct (non-fork) compaction call.
SUMMARY_SYSTEM_PROMPT = "You are a helpful AI assistant tasked with summarizing conversations."
#: Names a model when the caller does not.
MODEL_ENV = "CONTEXTLAB_SUMMARY_MODEL"
#: The longest back-off either SDK computes itself (MAX_RETRY_DELAY in their _constants.py).
SDK_MAX_BACKOFF_S = 8.0
#: The LLM backends ``LLMSettings.backend`` accepts (each has its own module).
LLM_BACKENDS = ("anthropic", "openai")

_RETRYABLE_STATUS = frozenset({408, 409, 429, 529})
_PTL_PATTERNS = (
    "prompt is too long",
    "maximum context length",
    "context_length_exceeded",
    "exceeds the available context size",
    "too many tokens",
)
# "prompt is too long: 210000 tokens > 200000 maximum" (Anthropic)
_PTL_ANTHROPIC = re.compile(r"(\d[\d,]*)\s*tokens?\s*>\s*(\d[\d,]*)", re.IGNORECASE)
# "maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens" (OpenAI,
# vLLM)
_PTL_OPENAI = re.compile(
    r"maximum context length is (\d[\d,]*) tokens.*?resulted in (\d[\d,]*) tokens",
    re.IGNORECASE | re.DOTALL,
)
# Key shapes scrubbed from any error text we pass on, in case a server or proxy echoes a header.
_KEY_SHAPES = re.compile(
    r"(sk-ant-[A-Za-z0-9_\-]{6,}|sk-[A-Za-z0-9_\-]{16,}|(?<=Bearer )[A-Za-z0-9._\-]{8,})"
)
_URL_USERINFO = re.compile(r"(?<=//)[^/@\s]+@")


@dataclass(frozen=True)
class LLMSettings:
    """Everything an LLM summarizer is built from; ``make_summarizer`` turns it into one.

    ``model``, ``api_key`` and ``base_url`` left None are resolved by the backend from the
    environment (see its module). ``timeout`` is per HTTP attempt, in seconds.
    """

    backend: str
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    timeout: float = 120.0
    #: the SDK's own retries of one call (so at most max_retries + 1 HTTP requests)
    max_retries: int = 4
    #: a server asking to wait longer than this before a retry makes the call fail at once
    max_retry_after: float = 60.0
    max_output_tokens: int = COMPACT_MAX_OUTPUT_TOKENS
    system_prompt: str = SUMMARY_SYSTEM_PROMPT
    pricing: PricingTable | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.backend not in LLM_BACKENDS:
            raise ValueError(f"LLM backend must be one of {', '.join(LLM_BACKENDS)}")
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.timeout <= 0:
            raise ValueError("timeout must be > 0 seconds")
        if self.max_retry_after < 0:
            raise ValueError("max_retry_after must be >= 0 seconds")

    @property
    def worst_case_seconds(self) -> float:
        """The longest one call can take when every attempt stalls (module docstring)."""
        waits = self.max_retries * max(self.max_retry_after, SDK_MAX_BACKOFF_S)
        return (self.max_retries + 1) * self.timeout + waits


# ------------------------------------------------------------------ secrets


class _Secret:
    """Holds a key so that repr(), vars() dumps and tracebacks never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with the given secrets, anything shaped like an API key and URL credentials
    replaced by ``***``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    text = _KEY_SHAPES.sub("***", text)
    return _URL_USERINFO.sub("***@", text)


def safe_url(url: str | None) -> str | None:
    return None if url is None else _URL_USERINFO.sub("***@", url)


# ------------------------------------------------------------------ retry-after


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The wait a response asks for, read as both SDKs read it: ``retry-after-ms``, then
    ``retry-after`` in seconds or as an HTTP date."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) * scale
        except ValueError:
            continue
    value = headers.get("retry-after")
    when = email.utils.parsedate_tz(value) if value else None
    return None if when is None else float(email.utils.mktime_tz(when) - time.time())


def retry_after_cap_hook(max_retry_after: float) -> Callable[[Any], None]:
    """An httpx response hook: a response asking for a longer wait than ``max_retry_after``
    gets ``x-should-retry: false``, which both SDKs obey, so the call fails now instead of
    sleeping (the Anthropic SDK would otherwise honour any ``retry-after``)."""

    def cap(response: Any) -> None:
        wait = retry_after_seconds(response.headers)
        if wait is not None and wait > max_retry_after:
            response.headers["x-should-retry"] = "false"

    return cap


# ------------------------------------------------------------------ one call, classified


@dataclass
class Reply:
    """What one successful API call returned, backend-neutral."""

    text: str
    model: str
    uncached_input: int
    cache_read: int
    cache_write: int
    output: int


class CallFailure(Exception):
    """One failed SDK call (its retries included), classified; never leaves this package."""

    def __init__(
        self,
        kind: str,
        detail: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        gap: int | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(detail)
        self.kind = kind  # retryable | prompt_too_long | malformed | fatal | budget
        self.detail = detail
        self.status = status
        self.retry_after = retry_after
        self.gap = gap
        self.attempts = attempts

    def label(self) -> str:
        if self.status is not None:
            return f"HTTP {self.status}"
        return {"retryable": "network error", "malformed": "malformed reply"}.get(
            self.kind, "setup error"
        )


def as_int(value: Any) -> int:
    """A usage count from a reply: a positive int, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def classify_sdk_error(exc: Exception, sdk: Any, settings: LLMSettings) -> CallFailure:
    """Shared by both SDKs: they expose the same exception hierarchy (Stainless clients)."""
    attempts = _attempts(exc)
    if isinstance(exc, sdk.APITimeoutError):
        return CallFailure(
            "retryable", f"no response within {settings.timeout:g} s (timeout)", attempts=attempts
        )
    if isinstance(exc, sdk.APIConnectionError):
        return CallFailure("retryable", f"connection error: {exc}", attempts=attempts)
    if isinstance(exc, sdk.APIStatusError):
        message, code = _error_message(exc)
        failure = _status_failure(exc.status_code, message, code)
        failure.attempts = attempts
        wait = retry_after_seconds(getattr(exc.response, "headers", None))
        if failure.kind == "retryable" and wait is not None and wait > settings.max_retry_after:
            failure.kind = "budget"
            failure.retry_after = wait
        return failure
    if isinstance(exc, sdk.APIResponseValidationError | json.JSONDecodeError):
        return CallFailure(
            "malformed", f"the reply is not a valid API response ({exc})"[:500], attempts=attempts
        )
    return CallFailure("fatal", f"{type(exc).__name__}: {exc}"[:500], attempts=attempts)


def _attempts(exc: Exception) -> int:
    """HTTP requests the SDK made for this call: its retry counter on the last one, plus one."""
    request = getattr(exc, "request", None)
    headers = getattr(request, "headers", None)
    try:
        return int(headers.get("x-stainless-retry-count", "0")) + 1 if headers else 1
    except ValueError:
        return 1


def _status_failure(status: int, message: str, code: str | None = None) -> CallFailure:
    lowered = message.lower()
    if status == 400 and "in the completion" in lowered:
        # vLLM counts max_tokens against the window: dropping history would not help
        return CallFailure(
            "fatal", f"{message} (lower max_output_tokens for this model)", status=status
        )
    if status in (400, 413) and (
        any(p in lowered for p in _PTL_PATTERNS) or code == "context_length_exceeded"
    ):
        return CallFailure("prompt_too_long", message, status=status, gap=_ptl_gap(message))
    if status in _RETRYABLE_STATUS or status >= 500:
        return CallFailure("retryable", message, status=status)
    return CallFailure("fatal", message, status=status)


def _ptl_gap(message: str) -> int | None:
    """actual − limit from a prompt-too-long message, when it states both."""
    match = _PTL_ANTHROPIC.search(message)
    if match:
        actual, limit = (int(g.replace(",", "")) for g in match.groups())
        return actual - limit if actual > limit else None
    match = _PTL_OPENAI.search(message)
    if match:
        limit, actual = (int(g.replace(",", "")) for g in match.groups())
        return actual - limit if actual > limit else None
    return None


def _error_message(exc: Exception) -> tuple[str, str | None]:
    """The server's own error message (and code) if the body has one, else the exception's."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            msg = err.get("message")
            code = err.get("code")
            etype = err.get("type")
            if isinstance(msg, str) and msg:
                prefix = f"{etype}: " if isinstance(etype, str) and etype else ""
                return (prefix + msg)[:500], code if isinstance(code, str) else None
        elif isinstance(err, str):
            return err[:500], None
    if isinstance(body, str) and body:
        return body[:500], None
    return str(exc)[:500], None


# ------------------------------------------------------------------ the shared summarizer


class LLMSummarizer:
    """The prompt-too-long loop, error reporting and accounting shared by both backends.

    A backend sets ``name`` and ``default_base_url`` and implements ``_resolve_model``,
    ``_send`` (one SDK call, the SDK's retries included) and ``_classify``.
    """

    name = "llm"
    #: where the SDK sends requests when neither the settings nor its environment variable say
    default_base_url = ""
    #: the environment variable the SDK reads its base URL from
    base_url_env = ""

    def __init__(self, settings: LLMSettings, *, model: str | None, api_key: str | None) -> None:
        self._api_key = _Secret(api_key) if api_key else None
        # the key lives only in _api_key: the settings kept here (and shown in vars()) have none
        self.settings = replace(settings, api_key=None)
        self.model = model
        self._sdk_client: Any = None

    # -- backend hooks
    def _env_secrets(self) -> list[str]:
        return []

    def _resolve_model(self, request: SummaryRequest) -> str:
        raise NotImplementedError

    def _send(self, model: str, turns: list[Turn], max_tokens: int) -> Reply:
        raise NotImplementedError

    def _classify(self, exc: Exception) -> CallFailure:
        raise NotImplementedError

    def _max_tokens(self, model: str) -> int:
        return self.settings.max_output_tokens

    def _import_sdk(self) -> Any:
        """The SDK module, imported on first use: the engine must import without it."""
        raise NotImplementedError

    def _make_client(self, sdk: Any, kwargs: dict[str, Any]) -> Any:
        raise NotImplementedError

    #: the key given to the SDK when none is configured; None lets the SDK resolve its own
    placeholder_key: str | None = None

    def _client(self) -> Any:
        """One SDK client per summarizer, with the settings' retries, timeout and
        Retry-After cap (both SDKs take the same arguments and an httpx client)."""
        if self._sdk_client is None:
            sdk = self._import_sdk()
            settings = self.settings
            kwargs: dict[str, Any] = {
                "max_retries": settings.max_retries,
                "timeout": settings.timeout,
                "http_client": sdk.DefaultHttpxClient(
                    event_hooks={"response": [retry_after_cap_hook(settings.max_retry_after)]}
                ),
            }
            key = self._api_key.reveal() if self._api_key is not None else self.placeholder_key
            if key is not None:
                kwargs["api_key"] = key
            if settings.base_url:  # None lets the SDK read its own base-URL variable
                kwargs["base_url"] = settings.base_url
            self._sdk_client = self._make_client(sdk, kwargs)
        return self._sdk_client

    # -- shared
    @property
    def base_url(self) -> str | None:
        return self.settings.base_url

    @property
    def breaker_identity(self) -> tuple[str, str, str]:
        """Which circuit breaker this summarizer's failures count toward (``fallback``): one
        per backend, endpoint and model, whatever wrapper or worker call built it."""
        endpoint = self.settings.base_url or os.environ.get(self.base_url_env) or ""
        return (self.name, endpoint or self.default_base_url, self.model or "")

    def _secrets(self) -> list[str]:
        found = [self._api_key.reveal()] if self._api_key else []
        return found + [s for s in self._env_secrets() if s]

    def redact(self, text: str) -> str:
        return redact(text, self._secrets())

    def redact_known(self, text: str) -> str:
        """Only the configured keys: model output may legitimately contain key-like strings."""
        for secret in self._secrets():
            if secret and len(secret) >= 4:
                text = text.replace(secret, "***")
        return text

    def __repr__(self) -> str:
        key = "'***'" if self._api_key or any(self._env_secrets()) else "None"
        return (
            f"{type(self).__name__}(model={self.model!r}, "
            f"base_url={safe_url(self.base_url)!r}, api_key={key})"
        )

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        start = time.monotonic()
        model = self._resolve_model(request)
        messages: list[Message] = list(request.messages)
        max_tokens = self._max_tokens(model)
        sendable = (m for m in messages if m.role in ("user", "assistant"))
        if not any(render_block(b) for m in sendable for b in m.blocks):
            # compact.ts refuses too ("Not enough messages to compact."): a call would only
            # pay for the prompt
            raise SummaryError(
                f"{self.name} failed: not enough messages to summarize",
                backend=self.name,
                kind="fatal",
            )
        too_long = 0  # calls that came back "prompt too long"
        for ptl_retry in range(MAX_PTL_RETRIES + 1):
            turns = render_conversation(messages, request.prompt)
            try:
                reply = self._call(model, turns, max_tokens, start)
            except CallFailure as ptl:  # only prompt-too-long leaves _call as a CallFailure
                too_long += 1
                detail = self.redact(ptl.detail)
                if ptl_retry == MAX_PTL_RETRIES:
                    raise SummaryError(
                        f"{self.name} failed: prompt too long after {MAX_PTL_RETRIES} "
                        f"truncation retries ({detail})",
                        backend=self.name,
                        kind="prompt_too_long",
                        status=ptl.status,
                        attempts=too_long,
                    ) from None
                truncated = truncate_head_for_ptl_retry(messages, ptl.gap)
                if truncated is None:
                    raise SummaryError(
                        f"{self.name} failed: prompt too long and nothing left to drop ({detail})",
                        backend=self.name,
                        kind="prompt_too_long",
                        status=ptl.status,
                        attempts=too_long,
                    ) from None
                log.warning(
                    "%s: prompt too long (gap %s tokens); dropped %d of %d messages, retrying",
                    self.name,
                    ptl.gap if ptl.gap is not None else "unknown",
                    real_message_count(messages) - real_message_count(truncated),
                    real_message_count(messages),
                )
                messages = truncated
                continue
            return self._result(reply, start)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _call(self, model: str, turns: list[Turn], max_tokens: int, start: float) -> Reply:
        """One SDK call (the SDK retries transient errors itself); a prompt-too-long answer
        comes back as a CallFailure, every other failure as a SummaryError."""
        try:
            return self._send(model, turns, max_tokens)
        except CallFailure as failed:
            failure = failed
        except Exception as exc:  # every SDK/transport error is classified below
            failure = self._classify(exc)
        if failure.kind == "prompt_too_long":
            raise failure
        detail = self.redact(failure.detail)
        if failure.kind == "retryable":
            message = (
                f"{self.name} failed: {failure.label()} after {failure.attempts - 1} retries "
                f"({time.monotonic() - start:.1f} s): {detail}"
            )
        elif failure.kind == "budget":
            message = (
                f"{self.name} failed: {failure.label()}; the server asked to wait "
                f"{failure.retry_after or 0:g} s before a retry, longer than the "
                f"{self.settings.max_retry_after:g} s retry budget (max_retry_after): {detail}"
            )
        else:
            message = f"{self.name} failed: {failure.label()}: {detail}"
        raise SummaryError(
            message,
            backend=self.name,
            kind=failure.kind,
            status=failure.status,
            attempts=failure.attempts,
        ) from None

    def _result(self, reply: Reply, start: float) -> SummaryResult:
        text = format_summary(self.redact_known(reply.text))
        pricing = self.settings.pricing
        _, _, unknown = (pricing or load_pricing()).price_for(reply.model)
        # an unknown (e.g. local) model costs nothing rather than an invented Claude price
        cost = (
            0.0
            if unknown
            else request_cost(
                reply.model,
                uncached=reply.uncached_input,
                cache_read=reply.cache_read,
                cache_write_5m=reply.cache_write,
                cache_write_1h=0,
                output=reply.output,
                pricing=pricing,
            )
        )
        return SummaryResult(
            text=text,
            backend=self.name,
            model=reply.model,
            input_tokens=reply.uncached_input + reply.cache_read + reply.cache_write,
            output_tokens=reply.output,
            cost_usd=cost,
            latency_s=round(time.monotonic() - start, 3),
            cache_read_tokens=reply.cache_read,
        )
