"""LLM summarizers: the Anthropic Messages API and OpenAI-compatible servers, behind ``Summarizer``.

Each backend sends the conversation to summarize followed by the compaction prompt (or our
span prompt for a context collapse), as Claude Code's direct compaction path does (spec §4.6.6,
facts §6.4: system prompt "You are a helpful AI assistant…", thinking off, images as ``[image]``,
max_tokens 20,000). Failures are handled the way Claude Code handles them, plus what a batch tool
needs:

* transient errors (429, 529, other 5xx, 408/409, connection errors, timeouts) are retried with
  exponential back-off, honouring ``retry-after``, under a cap on the total wait. The SDKs' own
  retries are switched off (``max_retries=0``) so every attempt and every sleep goes through
  this module, where tests and logs can see them;
* "prompt is too long" drops the oldest API rounds and retries, at most 3 times (spec §4.6.8);
* a reply without text is a failure, never an empty summary;
* ``FallbackSummarizer`` turns a failure into the offline summary, marked with the reason, and
  stops calling a backend after 3 consecutive failures (the circuit breaker of spec §4.6.9).

The SDKs are imported only when a request is sent, so ``import contextlab.engine`` stays light
and works without them. API keys are never put into results, exception messages, logs or reprs.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .cost import PricingTable, load_pricing, request_cost
from .models import model_info
from .summarizer import (
    SUMMARIZER_NAMES,
    ExtractiveSummarizer,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    format_summary,
)
from .summary_store import ReplayInterrupted
from .tokens import message_rough
from .transcript import Block, Message

__all__ = [
    "COMPACT_MAX_OUTPUT_TOKENS",
    "DEFAULT_ANTHROPIC_MODEL",
    "MAX_PTL_RETRIES",
    "PTL_MARKER",
    "SUMMARIZER_NAMES",
    "SUMMARY_SYSTEM_PROMPT",
    "AnthropicSummarizer",
    "FallbackSummarizer",
    "OpenAICompatibleSummarizer",
    "SummaryError",
    "group_by_api_round",
    "make_summarizer",
    "render_conversation",
    "truncate_head_for_ptl_retry",
]

log = logging.getLogger(__name__)

#: max_tokens of the compaction call (COMPACT_MAX_OUTPUT_TOKENS, capped by the model's maximum).
COMPACT_MAX_OUTPUT_TOKENS = 20_000
#: Prompt-too-long retries before giving up (MAX_PTL_RETRIES in compact.ts).
MAX_PTL_RETRIES = 3
#: Meta user message put in front of a truncated history that would start with the assistant.
PTL_MARKER = "[earlier conversation truncated for compaction retry]"
#: Put in front of a span that starts with an assistant message (a collapse span can), because
#: the Messages API wants the conversation to open with a user turn.
EXCERPT_MARKER = "[conversation excerpt: the messages before this point are not shown]"
#: System prompt of Claude Code's direct (non-fork) compaction call.
SUMMARY_SYSTEM_PROMPT = "You are a helpful AI assistant tasked with summarizing conversations."
#: Used when neither the caller, CONTEXTLAB_SUMMARY_MODEL nor the request names a model.
#: (claude-sonnet-4-5 reaches end of life on 2026-11-30 according to the SDK's own table.)
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"
MODEL_ENV = "CONTEXTLAB_SUMMARY_MODEL"
#: What ``make_summarizer`` accepts.
#: local servers (Ollama, vLLM, llama.cpp) ignore the key, but the SDK insists on one
OPENAI_PLACEHOLDER_KEY = "sk-no-key-required"

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


class SummaryError(RuntimeError):
    """A summarizer gave up. The message says which backend, why, and after how many tries.

    ``kind`` is one of "retryable" (transient errors outlasted the retries), "prompt_too_long",
    "malformed", "fatal" (e.g. 401/404: retrying would not help) or "budget" (the next back-off
    would exceed the cap on total waiting). ``status`` is the last HTTP status, if any.
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


def _redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    text = _KEY_SHAPES.sub("***", text)
    return _URL_USERINFO.sub("***@", text)


def _safe_url(url: str | None) -> str | None:
    return None if url is None else _URL_USERINFO.sub("***@", url)


# ------------------------------------------------------------------ rendering


@dataclass
class Turn:
    """One API message: a role and its text parts (consecutive same-role messages merged)."""

    role: str
    parts: list[str]


def render_block(block: Block) -> str | None:
    """The text a summarizing model gets for one block, or None to leave the block out."""
    if block.type in ("thinking", "redacted_thinking"):
        # The API drops earlier turns' thinking from the context anyway, and Claude Code's direct
        # compaction call runs with thinking disabled: the summarizer never reads it.
        return None
    if block.type == "image":
        return "[image]"
    if block.type == "document":
        return "[document]"
    if block.type == "tool_use":
        name = block.tool_name or "tool"
        if block.data is not None:
            args = json.dumps(block.data, ensure_ascii=False)
        else:
            args = block.text[len(name) :] if block.text.startswith(name) else block.text
        ident = f" {block.tool_use_id}" if block.tool_use_id else ""
        return f"[Tool call{ident}: {name}] {args}"
    if block.type == "tool_result":
        label = block.tool_name or block.tool_use_id or "tool"
        head = f"[Tool result for {label}{' (error)' if block.is_error else ''}]"
        # stripImages: media nested in a tool result become text markers too
        media = " [image]" * block.media
        return f"{head}\n{block.text}{media}" if block.text else head + media
    return block.text or None


def render_conversation(messages: list[Message], prompt: str) -> list[Turn]:
    """The conversation as alternating user/assistant turns, then the prompt as the last user
    turn (merged into a trailing user turn, as Claude Code's normalization does)."""
    turns: list[Turn] = []
    for message in messages:
        if message.role not in ("user", "assistant"):
            continue  # boundaries and other system records are never sent
        parts = [text for block in message.blocks if (text := render_block(block))]
        if not parts:
            continue
        if turns and turns[-1].role == message.role:
            turns[-1].parts.extend(parts)
        else:
            turns.append(Turn(message.role, parts))
    if turns and turns[0].role == "assistant":
        turns.insert(0, Turn("user", [EXCERPT_MARKER]))
    if turns and turns[-1].role == "user":
        turns[-1].parts.append(prompt)
    else:
        turns.append(Turn("user", [prompt]))
    return turns


# ------------------------------------------------------------------ prompt-too-long retry


def group_by_api_round(messages: list[Message]) -> list[list[Message]]:
    """``groupMessagesByApiRound``: a group starts at each assistant message whose id differs
    from the previous assistant's (group 0 is whatever precedes the first assistant)."""
    groups: list[list[Message]] = []
    current: list[Message] = []
    last_id: str | None = None
    for message in messages:
        if message.role == "assistant":
            key = message.message_id or message.uuid
            if key != last_id and current:
                groups.append(current)
                current = []
            last_id = key
        current.append(message)
    if current:
        groups.append(current)
    return groups


def _is_ptl_marker(message: Message) -> bool:
    return (
        message.role == "user" and len(message.blocks) == 1 and message.blocks[0].text == PTL_MARKER
    )


def ptl_marker_message() -> Message:
    return Message(
        uuid="ptl-retry-marker",
        role="user",
        kind="meta",
        blocks=[Block("text", PTL_MARKER)],
        is_meta=True,
    )


def truncate_head_for_ptl_retry(
    messages: list[Message], token_gap: int | None
) -> list[Message] | None:
    """``truncateHeadForPTLRetry`` (spec §4.6.8): drop the oldest API rounds, or None when there
    is nothing left to drop.

    With a known gap, groups are dropped until their rough estimate covers it; without one,
    max(1, floor(20 %)) of the groups go. At least one group always stays.
    """
    if messages and _is_ptl_marker(messages[0]):
        messages = messages[1:]
    groups = group_by_api_round(messages)
    if len(groups) < 2:
        return None
    if token_gap is not None and token_gap > 0:
        drop = 0
        freed = 0
        for drop, group in enumerate(groups[:-1], start=1):  # noqa: B007 (drop is the result)
            freed += sum(message_rough(m) for m in group)
            if freed >= token_gap:
                break
    else:
        drop = max(1, math.floor(len(groups) * 0.2))
    drop = min(drop, len(groups) - 1)
    rest = [m for group in groups[drop:] for m in group]
    if rest and rest[0].role == "assistant":
        rest.insert(0, ptl_marker_message())
    return rest


def _real_count(messages: list[Message]) -> int:
    return sum(1 for m in messages if not _is_ptl_marker(m))


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


# ------------------------------------------------------------------ the shared call loop


@dataclass
class _Reply:
    """What one successful API call returned, backend-neutral."""

    text: str
    model: str
    uncached_input: int
    cache_read: int
    cache_write: int
    output: int


class _Failure(Exception):
    """One failed attempt, classified (internal; never leaves this module)."""

    def __init__(
        self,
        kind: str,
        detail: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        gap: int | None = None,
    ) -> None:
        super().__init__(detail)
        self.kind = kind  # retryable | prompt_too_long | malformed | fatal
        self.detail = detail
        self.status = status
        self.retry_after = retry_after
        self.gap = gap

    def label(self) -> str:
        if self.status is not None:
            return f"HTTP {self.status}"
        return {"retryable": "network error", "malformed": "malformed reply"}.get(
            self.kind, "setup error"
        )


class _LLMSummarizer:
    """The retry, PTL and accounting logic shared by both backends."""

    name = "llm"

    def __init__(
        self,
        model: str | None,
        *,
        api_key: str | None,
        base_url: str | None,
        timeout: float,
        max_retries: int,
        max_total_wait: float,
        base_delay: float,
        max_delay: float,
        jitter: float,
        max_output_tokens: int,
        system_prompt: str,
        sleep: Callable[[float], None] | None,
        clock: Callable[[], float] | None,
        rng: Callable[[], float] | None,
        pricing: PricingTable | None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if timeout <= 0:
            raise ValueError("timeout must be > 0 seconds")
        self.model = model
        self.base_url = base_url
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_total_wait = max_total_wait
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.jitter = jitter
        self.max_output_tokens = max_output_tokens
        self.system_prompt = system_prompt
        self._api_key = _Secret(api_key) if api_key else None
        self._sleep = sleep or time.sleep
        self._clock = clock or time.monotonic
        self._rng = rng or random.random
        self._pricing = pricing
        self._sdk_client: Any = None

    # -- subclass hooks
    def _env_secrets(self) -> list[str]:
        return []

    def _resolve_model(self, request: SummaryRequest) -> str:
        raise NotImplementedError

    def _send(self, model: str, turns: list[Turn], max_tokens: int) -> _Reply:
        raise NotImplementedError

    def _classify(self, exc: Exception) -> _Failure:
        raise NotImplementedError

    def _max_tokens(self, model: str) -> int:
        return self.max_output_tokens

    # -- shared
    def _secrets(self) -> list[str]:
        found = [self._api_key.reveal()] if self._api_key else []
        return found + [s for s in self._env_secrets() if s]

    def redact(self, text: str) -> str:
        return _redact(text, self._secrets())

    def __repr__(self) -> str:
        key = "'***'" if self._api_key or any(self._env_secrets()) else "None"
        return (
            f"{type(self).__name__}(model={self.model!r}, "
            f"base_url={_safe_url(self.base_url)!r}, api_key={key})"
        )

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        start = self._clock()
        model = self._resolve_model(request)
        messages = list(request.messages)
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
        attempts = 0  # requests that came back "prompt too long"
        for ptl_retry in range(MAX_PTL_RETRIES + 1):
            turns = render_conversation(messages, request.prompt)
            try:
                reply = self._call_with_retries(model, turns, max_tokens)
            except _Failure as ptl:  # only prompt-too-long escapes the retry loop as _Failure
                attempts += 1
                if ptl_retry == MAX_PTL_RETRIES:
                    raise SummaryError(
                        f"{self.name} failed: prompt too long after {MAX_PTL_RETRIES} "
                        f"truncation retries ({self.redact(ptl.detail)})",
                        backend=self.name,
                        kind="prompt_too_long",
                        status=ptl.status,
                        attempts=attempts,
                    ) from None
                truncated = truncate_head_for_ptl_retry(messages, ptl.gap)
                if truncated is None:
                    raise SummaryError(
                        f"{self.name} failed: prompt too long and nothing left to drop "
                        f"({self.redact(ptl.detail)})",
                        backend=self.name,
                        kind="prompt_too_long",
                        status=ptl.status,
                        attempts=attempts,
                    ) from None
                log.warning(
                    "%s: prompt too long (gap %s tokens); dropped %d of %d messages, retrying",
                    self.name,
                    ptl.gap if ptl.gap is not None else "unknown",
                    _real_count(messages) - _real_count(truncated),
                    _real_count(messages),
                )
                messages = truncated
                continue
            return self._result(reply, start)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _call_with_retries(self, model: str, turns: list[Turn], max_tokens: int) -> _Reply:
        waited = 0.0
        for attempt in range(self.max_retries + 1):
            try:
                return self._send(model, turns, max_tokens)
            except Exception as exc:  # every SDK/transport error is classified below
                failure = exc if isinstance(exc, _Failure) else self._classify(exc)
            detail = self.redact(failure.detail)
            if failure.kind == "prompt_too_long":
                raise failure
            if failure.kind != "retryable":
                raise SummaryError(
                    f"{self.name} failed: {failure.label()}: {detail}",
                    backend=self.name,
                    kind=failure.kind,
                    status=failure.status,
                    attempts=attempt + 1,
                ) from None
            if attempt == self.max_retries:
                raise SummaryError(
                    f"{self.name} failed: {failure.label()} after {self.max_retries} retries "
                    f"(waited {waited:.1f} s): {detail}",
                    backend=self.name,
                    kind="retryable",
                    status=failure.status,
                    attempts=attempt + 1,
                ) from None
            delay = self._delay(attempt + 1, failure.retry_after)
            if waited + delay > self.max_total_wait:
                raise SummaryError(
                    f"{self.name} failed: {failure.label()}; giving up after {attempt + 1} "
                    f"attempts because the next wait ({delay:.1f} s) would exceed the "
                    f"{self.max_total_wait:g} s retry budget: {detail}",
                    backend=self.name,
                    kind="budget",
                    status=failure.status,
                    attempts=attempt + 1,
                ) from None
            log.warning(
                "%s: %s (attempt %d of %d); retrying in %.2f s: %s",
                self.name,
                failure.label(),
                attempt + 1,
                self.max_retries + 1,
                delay,
                detail,
            )
            self._sleep(delay)
            waited += delay
        raise AssertionError("unreachable")

    def _delay(self, retry: int, retry_after: float | None) -> float:
        """Back-off before retry number ``retry`` (1-based), as Claude Code's withRetry: the
        server's retry-after when given, else base × 2^(retry−1) capped, plus up to 25 % jitter."""
        if retry_after is not None and retry_after >= 0:
            return retry_after
        delay = min(self.base_delay * 2.0 ** (retry - 1), self.max_delay)
        return delay + delay * self.jitter * self._rng()

    def _result(self, reply: _Reply, start: float) -> SummaryResult:
        text = format_summary(self.redact_known(reply.text))
        price_model = reply.model
        _, _, unknown = (self._pricing or load_pricing()).price_for(price_model)
        # an unknown (e.g. local) model costs nothing rather than an invented Claude price
        cost = (
            0.0
            if unknown
            else request_cost(
                price_model,
                uncached=reply.uncached_input,
                cache_read=reply.cache_read,
                cache_write_5m=reply.cache_write,
                cache_write_1h=0,
                output=reply.output,
                pricing=self._pricing,
            )
        )
        return SummaryResult(
            text=text,
            backend=self.name,
            model=reply.model,
            input_tokens=reply.uncached_input + reply.cache_read + reply.cache_write,
            output_tokens=reply.output,
            cost_usd=cost,
            latency_s=round(self._clock() - start, 3),
            cache_read_tokens=reply.cache_read,
        )

    def redact_known(self, text: str) -> str:
        """Only the configured keys: model output may legitimately contain key-like strings."""
        for secret in self._secrets():
            if secret and len(secret) >= 4:
                text = text.replace(secret, "***")
        return text


def _status_failure(
    status: int, message: str, retry_after: float | None, code: str | None = None
) -> _Failure:
    lowered = message.lower()
    if status == 400 and "in the completion" in lowered:
        # vLLM counts max_tokens against the window: dropping history would not help
        return _Failure(
            "fatal",
            f"{message} (lower max_output_tokens for this model)",
            status=status,
        )
    if status in (400, 413) and (
        any(p in lowered for p in _PTL_PATTERNS) or code == "context_length_exceeded"
    ):
        return _Failure("prompt_too_long", message, status=status, gap=_ptl_gap(message))
    if status in _RETRYABLE_STATUS or status >= 500:
        return _Failure("retryable", message, status=status, retry_after=retry_after)
    return _Failure("fatal", message, status=status)


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue  # an HTTP date: fall back to our own back-off
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


def _classify_sdk_error(exc: Exception, sdk: Any, timeout: float) -> _Failure:
    """Shared by both SDKs: they expose the same exception hierarchy (Stainless clients)."""
    if isinstance(exc, sdk.APITimeoutError):
        return _Failure("retryable", f"no response within {timeout:g} s (timeout)")
    if isinstance(exc, sdk.APIConnectionError):
        return _Failure("retryable", f"connection error: {exc}")
    if isinstance(exc, sdk.APIStatusError):
        message, code = _error_message(exc)
        return _status_failure(exc.status_code, message, _retry_after(exc), code)
    if isinstance(exc, sdk.APIResponseValidationError | json.JSONDecodeError):
        return _Failure("malformed", f"the reply is not a valid API response ({exc})"[:500])
    return _Failure("fatal", f"{type(exc).__name__}: {exc}"[:500])


# ------------------------------------------------------------------ Anthropic


class AnthropicSummarizer(_LLMSummarizer):
    """Summaries from the Anthropic Messages API through the official ``anthropic`` SDK.

    The key comes from ``api_key`` or ``ANTHROPIC_API_KEY`` (or whatever else the SDK resolves);
    the base URL from ``base_url`` or, when that is None, from ``ANTHROPIC_BASE_URL`` (left to
    the SDK, which reads it itself). The model is ``model``, else ``CONTEXTLAB_SUMMARY_MODEL``,
    else the model of the session being summarized (as Claude Code does), else
    ``DEFAULT_ANTHROPIC_MODEL``. ``timeout`` is per attempt, in seconds.
    """

    name = "anthropic"

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 120,
        max_retries: int = 4,
        max_total_wait: float = 120.0,
        base_delay: float = 0.5,
        max_delay: float = 32.0,
        jitter: float = 0.25,
        max_output_tokens: int = COMPACT_MAX_OUTPUT_TOKENS,
        system_prompt: str = SUMMARY_SYSTEM_PROMPT,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] | None = None,
        rng: Callable[[], float] | None = None,
        pricing: PricingTable | None = None,
    ) -> None:
        super().__init__(
            model or os.environ.get(MODEL_ENV) or None,
            api_key=api_key or os.environ.get("ANTHROPIC_API_KEY") or None,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            max_total_wait=max_total_wait,
            base_delay=base_delay,
            max_delay=max_delay,
            jitter=jitter,
            max_output_tokens=max_output_tokens,
            system_prompt=system_prompt,
            sleep=sleep,
            clock=clock,
            rng=rng,
            pricing=pricing,
        )

    def _env_secrets(self) -> list[str]:
        return [
            os.environ.get("ANTHROPIC_API_KEY", ""),
            os.environ.get("ANTHROPIC_AUTH_TOKEN", ""),
        ]

    def _resolve_model(self, request: SummaryRequest) -> str:
        if self.model:
            return self.model
        recorded = (request.model or "").strip()
        if recorded and not recorded.startswith("<"):  # "<synthetic>" made no API call
            # Claude Code's "[1m]" suffix selects the window; it is not part of the API model id
            return re.sub(r"\[1m\]$", "", recorded, flags=re.IGNORECASE)
        return DEFAULT_ANTHROPIC_MODEL

    def _max_tokens(self, model: str) -> int:
        # min(COMPACT_MAX_OUTPUT_TOKENS, the model's max output), as compact.ts does
        return min(self.max_output_tokens, model_info(model).max_output_upper)

    def _client(self) -> Any:
        if self._sdk_client is None:
            import anthropic  # lazily: the engine must import without the SDK

            kwargs: dict[str, Any] = {"max_retries": 0, "timeout": self.timeout}
            if self._api_key is not None:
                kwargs["api_key"] = self._api_key.reveal()
            if self.base_url:  # None lets the SDK read ANTHROPIC_BASE_URL
                kwargs["base_url"] = self.base_url
            self._sdk_client = anthropic.Anthropic(**kwargs)
        return self._sdk_client

    def _send(self, model: str, turns: list[Turn], max_tokens: int) -> _Reply:
        client = self._client()
        message = client.messages.create(
            model=model,
            max_tokens=max_tokens,
            system=self.system_prompt,
            messages=[
                {"role": t.role, "content": [{"type": "text", "text": p} for p in t.parts]}
                for t in turns
            ],
            timeout=self.timeout,
        )
        content = getattr(message, "content", None)
        texts = (
            [getattr(b, "text", "") for b in content if getattr(b, "type", None) == "text"]
            if isinstance(content, list)
            else []
        )
        text = "".join(t for t in texts if isinstance(t, str))
        if not text.strip():
            raise _Failure("malformed", "the reply has no text content")
        usage = getattr(message, "usage", None)
        return _Reply(
            text=text,
            model=str(getattr(message, "model", None) or model),
            uncached_input=_int(getattr(usage, "input_tokens", 0)),
            cache_read=_int(getattr(usage, "cache_read_input_tokens", 0)),
            cache_write=_int(getattr(usage, "cache_creation_input_tokens", 0)),
            output=_int(getattr(usage, "output_tokens", 0)),
        )

    def _classify(self, exc: Exception) -> _Failure:
        import anthropic

        if isinstance(exc, anthropic.CredentialsError):
            return _Failure("fatal", f"no usable credentials: set ANTHROPIC_API_KEY ({exc})")
        return _classify_sdk_error(exc, anthropic, self.timeout)


# ------------------------------------------------------------------ OpenAI-compatible


class OpenAICompatibleSummarizer(_LLMSummarizer):
    """Summaries from any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM,
    llama.cpp) through the official ``openai`` SDK.

    ``base_url`` or ``OPENAI_BASE_URL`` selects the server (e.g. http://localhost:11434/v1);
    the key is ``api_key`` or ``OPENAI_API_KEY``, or a placeholder for local servers that need
    none. There is no sensible default model, so ``model`` or ``CONTEXTLAB_SUMMARY_MODEL`` is
    required. Some servers reject prompt + max_tokens above their context length: lower
    ``max_output_tokens`` for small local models.
    """

    name = "openai"

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 120,
        max_retries: int = 4,
        max_total_wait: float = 120.0,
        base_delay: float = 0.5,
        max_delay: float = 32.0,
        jitter: float = 0.25,
        max_output_tokens: int = COMPACT_MAX_OUTPUT_TOKENS,
        system_prompt: str = SUMMARY_SYSTEM_PROMPT,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] | None = None,
        rng: Callable[[], float] | None = None,
        pricing: PricingTable | None = None,
    ) -> None:
        resolved = model or os.environ.get(MODEL_ENV) or None
        if not resolved:
            raise ValueError(
                "the openai summarizer needs a model name: pass one (CLI: --summary-model) "
                f"or set {MODEL_ENV}"
            )
        super().__init__(
            resolved,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or None,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            max_total_wait=max_total_wait,
            base_delay=base_delay,
            max_delay=max_delay,
            jitter=jitter,
            max_output_tokens=max_output_tokens,
            system_prompt=system_prompt,
            sleep=sleep,
            clock=clock,
            rng=rng,
            pricing=pricing,
        )

    def _env_secrets(self) -> list[str]:
        return [os.environ.get("OPENAI_API_KEY", "")]

    def _resolve_model(self, request: SummaryRequest) -> str:
        assert self.model is not None  # checked in __init__
        return self.model

    def _client(self) -> Any:
        if self._sdk_client is None:
            import openai  # lazily: the engine must import without the SDK

            key = self._api_key.reveal() if self._api_key is not None else OPENAI_PLACEHOLDER_KEY
            kwargs: dict[str, Any] = {"max_retries": 0, "timeout": self.timeout, "api_key": key}
            if self.base_url:  # None lets the SDK read OPENAI_BASE_URL
                kwargs["base_url"] = self.base_url
            self._sdk_client = openai.OpenAI(**kwargs)
        return self._sdk_client

    def _send(self, model: str, turns: list[Turn], max_tokens: int) -> _Reply:
        client = self._client()
        messages: list[dict[str, str]] = [{"role": "system", "content": self.system_prompt}]
        messages.extend({"role": t.role, "content": "\n\n".join(t.parts)} for t in turns)
        completion = client.chat.completions.create(
            model=model, messages=messages, max_tokens=max_tokens, timeout=self.timeout
        )
        choices = getattr(completion, "choices", None)
        text = ""
        if isinstance(choices, list) and choices:
            content = getattr(getattr(choices[0], "message", None), "content", None)
            text = content if isinstance(content, str) else ""
        if not text.strip():
            raise _Failure("malformed", "the reply has no message content")
        usage = getattr(completion, "usage", None)
        prompt_tokens = _int(getattr(usage, "prompt_tokens", 0))
        cached = _int(getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", 0))
        return _Reply(
            text=text,
            model=str(getattr(completion, "model", None) or model),
            uncached_input=max(0, prompt_tokens - cached),
            cache_read=cached,
            cache_write=0,
            output=_int(getattr(usage, "completion_tokens", 0)),
        )

    def _classify(self, exc: Exception) -> _Failure:
        import openai

        return _classify_sdk_error(exc, openai, self.timeout)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


# ------------------------------------------------------------------ fallback and factory


class FallbackSummarizer:
    """Wraps an LLM summarizer: on failure, the fallback's summary marked with the reason.

    After ``breaker_threshold`` consecutive failures the primary is not called again (the
    circuit breaker Claude Code applies to autocompact, spec §4.6.9, here for the backend), and
    every later result says so. A success resets the count.
    """

    def __init__(
        self,
        primary: Summarizer,
        fallback: Summarizer | None = None,
        breaker_threshold: int = 3,
    ) -> None:
        self.primary = primary
        self.fallback: Summarizer = fallback if fallback is not None else ExtractiveSummarizer()
        self.breaker_threshold = max(1, breaker_threshold)
        self.consecutive_failures = 0
        self.last_failure: str | None = None
        # results and the replay header name the backend that was asked for
        self.name = primary.name

    @property
    def breaker_open(self) -> bool:
        return self.consecutive_failures >= self.breaker_threshold

    def __repr__(self) -> str:
        return (
            f"FallbackSummarizer(primary={self.primary!r}, fallback={self.fallback!r}, "
            f"breaker_threshold={self.breaker_threshold})"
        )

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        if self.breaker_open:
            reason = (
                f"{self.primary.name} not called: circuit breaker open after "
                f"{self.consecutive_failures} consecutive failures (last: {self.last_failure})"
            )
            return self._fallback(request, reason)
        try:
            result = self.primary.summarize(request)
        except ReplayInterrupted:
            raise  # not a failure: the caller fetches the summary and replays, or stops
        except Exception as exc:  # any backend failure degrades to the fallback summary
            self.consecutive_failures += 1
            message = str(exc) if isinstance(exc, SummaryError) else f"{type(exc).__name__}: {exc}"
            if not message.startswith(f"{self.primary.name} "):
                message = f"{self.primary.name} failed: {message}"
            redact = getattr(self.primary, "redact", None)
            if callable(redact):
                message = str(redact(message))
            self.last_failure = message
            reason = message
            if self.breaker_open:
                reason += (
                    f"; circuit breaker open after {self.consecutive_failures} consecutive "
                    f"failures: {self.primary.name} will not be called again"
                )
            log.warning("%s; using the %s summary", reason, self.fallback.name)
            return self._fallback(request, reason)
        self.consecutive_failures = 0
        return result

    def _fallback(self, request: SummaryRequest, reason: str) -> SummaryResult:
        result = self.fallback.summarize(request)
        result.fallback_reason = reason
        return result


def preload_sdks() -> list[str]:
    """Import the backends' SDKs now (a worker at start-up), not on the first summary call:
    importing them takes over a second, which would otherwise land on a user's run."""
    loaded = []
    for module in ("anthropic", "openai"):
        try:
            __import__(module)
        except ImportError:
            continue
        loaded.append(module)
    return loaded


def make_summarizer(name: str, model: str | None = None, **kw: Any) -> Summarizer:
    """A summarizer by name: "extractive" (offline), "anthropic" or "openai"."""
    key = (name or "").strip().lower()
    if key == "extractive":
        return ExtractiveSummarizer(**kw)
    if key == "anthropic":
        return AnthropicSummarizer(model, **kw)
    if key == "openai":
        return OpenAICompatibleSummarizer(model, **kw)
    raise ValueError(f"unknown summarizer {name!r}: choose one of {', '.join(SUMMARIZER_NAMES)}")
