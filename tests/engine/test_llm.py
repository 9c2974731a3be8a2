"""LLM summarizers against a scripted server on loopback, through the real SDK clients.

Every test talks HTTP to ``tests.llm_stub`` (127.0.0.1, port 0): what the stub received is the
request the SDK really built, and the failures are real HTTP failures. Retries are the SDKs'
own: ``sdk_sleeps`` records the back-off the SDK sleeps (``time.sleep``) instead of waiting it,
and each request's ``x-stainless-retry-count`` says which attempt of a call it was.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from contextlab import engine
from contextlab.engine.cli import main as cli_main
from contextlab.engine.input.model import Block, Message
from contextlab.engine.summarizing import (
    COLLAPSE_PROMPT,
    SUMMARY_SECTIONS,
    SummaryError,
    SummaryRequest,
    compact_prompt,
)
from contextlab.engine.summarizing.anthropic_backend import AnthropicSummarizer
from contextlab.engine.summarizing.factory import make_summarizer
from contextlab.engine.summarizing.fallback import (
    CircuitBreaker,
    FallbackSummarizer,
    reset_breakers,
)
from contextlab.engine.summarizing.llm import (
    COMPACT_MAX_OUTPUT_TOKENS,
    SUMMARY_SYSTEM_PROMPT,
    LLMSettings,
)
from contextlab.engine.summarizing.openai_backend import OpenAICompatibleSummarizer
from contextlab.engine.summarizing.rendering import (
    PTL_MARKER,
    group_by_api_round,
    truncate_head_for_ptl_retry,
)
from tests.engine.builders import TranscriptBuilder
from tests.engine.conftest import ANTHROPIC_TEST_KEY, OPENAI_TEST_KEY
from tests.llm_stub import LLMStub, Reply

pytestmark = pytest.mark.slow

RAW_SUMMARY = (
    "<analysis>\nLet me walk through the conversation step by step.\n</analysis>\n\n"
    "<summary>\n1. Primary Request and Intent:\n   Fix the parser.\n</summary>"
)
FORMATTED = "Summary:\n1. Primary Request and Intent:\n   Fix the parser."


# ------------------------------------------------------------------ helpers


@pytest.fixture(autouse=True)
def _fresh_breakers() -> Iterator[None]:
    """Breakers live for the process: no test may inherit another's open one."""
    reset_breakers()
    yield
    reset_breakers()


@pytest.fixture
def sdk_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The SDKs' back-off, recorded instead of slept (they call ``time.sleep``)."""
    sleeps: list[float] = []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    return sleeps


def backoff(retry: int) -> tuple[float, float]:
    """The SDKs' own wait before retry ``retry`` (1-based) without retry-after:
    0.5 s × 2^(retry−1), capped at 8 s, minus up to 25 % jitter."""
    delay = min(0.5 * 2.0 ** (retry - 1), 8.0)
    return 0.75 * delay, delay


def assert_backoff(sleeps: list[float], *retries: int) -> None:
    assert len(sleeps) == len(retries), sleeps
    for slept, retry in zip(sleeps, retries, strict=True):
        low, high = backoff(retry)
        assert low <= slept <= high, (retry, slept)


def message(role: str, *blocks: Block, mid: str | None = None, kind: str = "") -> Message:
    default_kind = "assistant" if role == "assistant" else "prompt"
    return Message(
        uuid=f"u-{id(blocks)}",
        role=role,  # type: ignore[arg-type]
        kind=(kind or default_kind),  # type: ignore[arg-type]
        blocks=list(blocks),
        message_id=mid,
    )


def conversation(rounds: int = 3, result_chars: int = 200) -> list[Message]:
    """A prompt, then ``rounds`` API rounds of tool_use + tool_result, then a final answer."""
    msgs = [message("user", Block("text", "Please fix the parser in src/parse.py"))]
    for n in range(rounds):
        tid = f"toolu_{n}"
        msgs.append(
            message(
                "assistant",
                Block("thinking", "SECRET-THOUGHT private reasoning"),
                Block(
                    "tool_use",
                    f'Read{{"file_path":"/src/f{n}.py"}}',
                    tool_use_id=tid,
                    tool_name="Read",
                    data={"file_path": f"/src/f{n}.py"},
                ),
                mid=f"msg_{n}",
            )
        )
        msgs.append(
            message(
                "user",
                Block("tool_result", f"r{n}:" + "x" * result_chars, tool_use_id=tid),
                kind="tool_result",
            )
        )
    msgs.append(message("assistant", Block("text", "The parser is fixed."), mid="msg_final"))
    return msgs


def anthropic(model: str | None = None, **settings: Any) -> AnthropicSummarizer:
    settings.setdefault("timeout", 5.0)
    return cast(AnthropicSummarizer, make_summarizer("anthropic", model, **settings))


def openai_compatible(model: str | None, **settings: Any) -> OpenAICompatibleSummarizer:
    return cast(OpenAICompatibleSummarizer, make_summarizer("openai", model, **settings))


def request(msgs: list[Message] | None = None, **kw: Any) -> SummaryRequest:
    kw.setdefault("model", "claude-opus-4-6")
    return SummaryRequest(messages=msgs if msgs is not None else conversation(), **kw)


def all_text(body: dict[str, Any]) -> str:
    """Every text the request carried (system + messages), whatever the API's content shape."""
    parts: list[str] = []
    system = body.get("system")
    if isinstance(system, str):
        parts.append(system)
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, str):
            parts.append(content)
        else:
            parts.extend(c["text"] for c in content)
    return "\n".join(parts)


# ------------------------------------------------------------------ the request and the result


def test_anthropic_sends_the_conversation_then_the_compact_prompt(llm_stub: LLMStub) -> None:
    llm_stub.ok(RAW_SUMMARY, input_tokens=1234, output_tokens=321)
    msgs = conversation()
    msgs.insert(1, message("user", Block("image")))
    result = anthropic().summarize(request(msgs, model="claude-opus-4-6[1m]"))

    (sent,) = llm_stub.requests
    assert sent.path == "/v1/messages"
    body = sent.body
    assert body["model"] == "claude-opus-4-6"  # "[1m]" is Claude Code's, not an API id
    assert body["max_tokens"] == COMPACT_MAX_OUTPUT_TOKENS
    assert body["system"] == SUMMARY_SYSTEM_PROMPT
    roles = [m["role"] for m in body["messages"]]
    assert roles[0] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles)), "roles must alternate"
    assert roles[-1] == "user"
    # the compaction prompt is the last part of the last user message, verbatim
    last_parts = [c["text"] for c in body["messages"][-1]["content"]]
    assert last_parts[-1] == compact_prompt()
    assert all(title in last_parts[-1] for title in SUMMARY_SECTIONS)
    text = all_text(body)
    assert "Please fix the parser in src/parse.py" in text
    assert '[Tool call toolu_0: Read] {"file_path": "/src/f0.py"}' in text
    assert "[Tool result for toolu_2]\nr2:" in text
    assert "[image]" in text
    assert "The parser is fixed." in text
    assert "SECRET-THOUGHT" not in text  # thinking is never sent to the summarizer

    assert result.text == FORMATTED  # <analysis> dropped, <summary> turned into a heading
    assert result.backend == "anthropic"
    assert result.model == "claude-opus-4-6"
    assert (result.input_tokens, result.output_tokens) == (1234, 321)
    expected = engine.request_cost(
        "claude-opus-4-6",
        uncached=1234,
        cache_read=0,
        cache_write_5m=0,
        cache_write_1h=0,
        output=321,
    )
    assert result.cost_usd == pytest.approx(expected)
    assert result.cost_usd > 0
    assert result.latency_s >= 0
    assert result.fallback_reason is None


def test_model_comes_from_the_argument_then_the_environment_then_the_default(
    llm_stub: LLMStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm_stub.ok("a").ok("b").ok("c")
    anthropic(model="claude-haiku-4-5").summarize(request())
    monkeypatch.setenv("CONTEXTLAB_SUMMARY_MODEL", "claude-opus-4-6")
    anthropic().summarize(request())
    monkeypatch.delenv("CONTEXTLAB_SUMMARY_MODEL")
    anthropic().summarize(request(model="<synthetic>"))
    assert [r.body["model"] for r in llm_stub.requests] == [
        "claude-haiku-4-5",
        "claude-opus-4-6",
        "claude-sonnet-4-6",
    ]


def test_collapse_uses_the_span_prompt_and_custom_instructions_reach_the_model(
    llm_stub: LLMStub,
) -> None:
    llm_stub.ok("<summary>span</summary>").ok("<summary>all</summary>")
    summarizer = anthropic()
    assert summarizer.summarize(request(kind="collapse")).text == "Summary:\nspan"
    summarizer.summarize(request(custom_instructions="Focus on the parser."))
    collapse, compact = (
        [c["text"] for c in r.body["messages"][-1]["content"]][-1] for r in llm_stub.requests
    )
    assert collapse == COLLAPSE_PROMPT
    assert "<analysis>" not in collapse
    assert compact == compact_prompt("Focus on the parser.")
    assert "Additional Instructions:\nFocus on the parser." in compact


def test_a_span_starting_with_the_assistant_still_opens_with_a_user_turn(
    llm_stub: LLMStub,
) -> None:
    llm_stub.ok("ok")
    anthropic().summarize(request(conversation()[1:], kind="collapse"))
    first = llm_stub.requests[0].body["messages"][0]
    assert first["role"] == "user"
    assert first["content"][0]["text"].startswith("[conversation excerpt")


# ------------------------------------------------------------------ retries (the SDKs' own)


def test_transient_errors_are_retried_by_the_sdk_honouring_retry_after(
    llm_stub: LLMStub, sdk_sleeps: list[float]
) -> None:
    llm_stub.rate_limited(retry_after=3).overloaded().server_error(503).ok(RAW_SUMMARY)
    result = anthropic().summarize(request())
    assert result.text == FORMATTED
    # one call: the SDK made all four requests, counting its retries in a header
    assert [r.retry_count for r in llm_stub.requests] == [0, 1, 2, 3]
    # retry-after wins when the server gives one; otherwise the SDK's doubling back-off
    assert sdk_sleeps[0] == 3.0
    assert_backoff(sdk_sleeps[1:], 2, 3)


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
def test_overloaded_twice_then_ok_succeeds_after_three_requests(
    llm_stub: LLMStub, sdk_sleeps: list[float], backend: str
) -> None:
    llm_stub.overloaded().rate_limited().ok("<summary>third time</summary>")
    result = make_summarizer(backend, "claude-opus-4-6").summarize(request())
    assert result.text == "Summary:\nthird time"
    assert result.fallback_reason is None
    assert [r.retry_count for r in llm_stub.requests] == [0, 1, 2]
    assert_backoff(sdk_sleeps, 1, 2)


def test_retry_after_is_really_waited(llm_stub: LLMStub) -> None:
    llm_stub.rate_limited(retry_after=0.3).ok("fine")
    started = time.monotonic()
    anthropic().summarize(request())
    assert time.monotonic() - started >= 0.3
    assert len(llm_stub.requests) == 2


def test_a_reply_slower_than_the_timeout_is_retried(
    llm_stub: LLMStub, sdk_sleeps: list[float]
) -> None:
    llm_stub.slow(3.0).ok("<summary>second try</summary>")
    started = time.monotonic()
    result = anthropic(timeout=0.5).summarize(request())
    assert time.monotonic() - started < 2.5  # the SDK gave up on the slow reply at 0.5 s
    assert result.text == "Summary:\nsecond try"
    assert [r.retry_count for r in llm_stub.requests] == [0, 1]
    assert_backoff(sdk_sleeps, 1)


def test_retries_give_up_after_max_retries_with_a_clear_error(
    llm_stub: LLMStub, sdk_sleeps: list[float]
) -> None:
    for _ in range(6):
        llm_stub.rate_limited()
    with pytest.raises(SummaryError) as info:
        anthropic().summarize(request())
    assert len(llm_stub.requests) == 5  # 1 + max_retries (4)
    assert_backoff(sdk_sleeps, 1, 2, 3, 4)
    message = str(info.value)
    assert message.startswith("anthropic failed: HTTP 429 after 4 retries")
    assert "rate limit" in message
    assert isinstance(info.value, RuntimeError)
    assert (info.value.kind, info.value.status, info.value.attempts) == ("retryable", 429, 5)


def test_max_retries_reaches_the_sdk(llm_stub: LLMStub, sdk_sleeps: list[float]) -> None:
    for _ in range(3):
        llm_stub.server_error()
    with pytest.raises(SummaryError, match="HTTP 500 after 1 retries") as info:
        anthropic(max_retries=1).summarize(request())
    assert [r.retry_count for r in llm_stub.requests] == [0, 1]
    assert info.value.attempts == 2


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
def test_a_retry_after_beyond_the_budget_is_not_waited_for(
    llm_stub: LLMStub, sdk_sleeps: list[float], backend: str
) -> None:
    # the Anthropic SDK would sleep an hour, the OpenAI SDK 90 s: the budget says neither
    llm_stub.rate_limited(retry_after=3600 if backend == "anthropic" else 90).ok("never")
    summarizer = make_summarizer(backend, "claude-opus-4-6", max_retry_after=60)
    with pytest.raises(SummaryError, match="retry budget") as info:
        summarizer.summarize(request())
    assert len(llm_stub.requests) == 1
    assert sdk_sleeps == []
    assert (info.value.kind, info.value.status, info.value.attempts) == ("budget", 429, 1)
    assert f"asked to wait {3600 if backend == 'anthropic' else 90} s" in str(info.value)


def test_the_worst_case_of_one_call_is_bounded() -> None:
    # 5 attempts of 120 s that never answer, 4 waits of at most 60 s (retry-after) each
    assert LLMSettings(backend="anthropic").worst_case_seconds == 5 * 120 + 4 * 60
    # the SDK's own back-off is at most 8 s even when max_retry_after is lower
    settings = LLMSettings(backend="openai", timeout=10, max_retries=2, max_retry_after=0)
    assert settings.worst_case_seconds == 3 * 10 + 2 * 8


@pytest.mark.parametrize(
    ("status", "message"),
    [(404, "model: claude-nope not found"), (400, "messages: field required")],
)
def test_client_errors_are_not_retried(
    llm_stub: LLMStub, sdk_sleeps: list[float], status: int, message: str
) -> None:
    llm_stub.error(status, message).ok("never sent")
    with pytest.raises(
        SummaryError, match=rf"anthropic failed: HTTP {status}: .*{message}"
    ) as info:
        anthropic(model="claude-nope").summarize(request())
    assert [r.retry_count for r in llm_stub.requests] == [0]
    assert sdk_sleeps == []
    assert (info.value.kind, info.value.attempts) == ("fatal", 1)


def test_missing_credentials_fail_at_once_with_a_hint(
    llm_stub: LLMStub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))  # no profile on disk either
    llm_stub.ok("never sent")
    with pytest.raises(SummaryError, match="setup error: no usable credentials") as info:
        anthropic().summarize(request())
    assert info.value.kind == "fatal"
    assert llm_stub.requests == []


def test_vllm_completion_budget_error_is_not_treated_as_prompt_too_long(
    llm_stub: LLMStub,
) -> None:
    llm_stub.error(
        400,
        "This model's maximum context length is 8192 tokens. However, you requested 21000 "
        "tokens (1000 in the messages, 20000 in the completion).",
    )
    with pytest.raises(SummaryError, match="lower max_output_tokens"):
        openai_compatible("small").summarize(request())
    assert len(llm_stub.requests) == 1


def test_a_refused_connection_is_retried_then_reported(
    llm_stub: LLMStub, sdk_sleeps: list[float]
) -> None:
    url = llm_stub.url
    llm_stub.stop()  # nothing listens on the port any more
    with pytest.raises(SummaryError, match="network error after 2 retries") as info:
        anthropic(base_url=url, max_retries=2).summarize(request())
    assert_backoff(sdk_sleeps, 1, 2)
    assert (info.value.kind, info.value.attempts) == ("retryable", 3)


# ------------------------------------------------------------------ prompt too long


def test_prompt_too_long_drops_the_oldest_rounds_and_retries(llm_stub: LLMStub) -> None:
    # each round is ~750 rough tokens; a 1,000-token gap drops the preamble and two rounds
    llm_stub.prompt_too_long(actual=201_000, limit=200_000).ok(RAW_SUMMARY)
    msgs = conversation(rounds=8, result_chars=3000)
    result = anthropic().summarize(request(msgs))
    assert result.text == FORMATTED
    first, second = llm_stub.requests
    text1, text2 = all_text(first.body), all_text(second.body)
    assert "Please fix the parser" in text1
    assert "Please fix the parser" not in text2
    assert "r0:" in text1
    assert "r0:" not in text2
    assert "r1:" not in text2
    assert "r2:" in text2
    assert len(second.body["messages"]) < len(first.body["messages"])
    # the remainder started with the assistant, so the marker opens it
    opening = second.body["messages"][0]
    assert opening["role"] == "user"
    assert opening["content"][0]["text"] == PTL_MARKER


def test_prompt_too_long_at_most_three_retries(llm_stub: LLMStub) -> None:
    for _ in range(5):
        llm_stub.prompt_too_long(actual=201_000, limit=200_000)
    with pytest.raises(SummaryError, match="prompt too long after 3 truncation retries") as info:
        anthropic().summarize(request(conversation(rounds=12, result_chars=3000)))
    assert len(llm_stub.requests) == 4
    sizes = [len(all_text(r.body)) for r in llm_stub.requests]
    assert sizes == sorted(sizes, reverse=True)
    assert len(set(sizes)) == 4
    assert info.value.kind == "prompt_too_long"
    # the marker is not stacked: exactly one per truncated request
    assert all(all_text(r.body).count(PTL_MARKER) == 1 for r in llm_stub.requests[1:])


def test_prompt_too_long_with_one_round_gives_up_at_once(llm_stub: LLMStub) -> None:
    llm_stub.prompt_too_long()
    with pytest.raises(SummaryError, match="nothing left to drop"):
        anthropic().summarize(request([message("user", Block("text", "hi"))]))
    assert len(llm_stub.requests) == 1


def test_nothing_to_summarize_sends_nothing(llm_stub: LLMStub) -> None:
    with pytest.raises(SummaryError, match="not enough messages"):
        anthropic().summarize(request([]))
    assert llm_stub.requests == []


def test_ptl_truncation_rules() -> None:
    msgs = conversation(rounds=9)  # preamble + 9 tool rounds + the final answer = 11 groups
    groups = group_by_api_round(msgs)
    assert len(groups) == 11
    assert groups[0][0].role == "user"
    assert all(g[0].role == "assistant" for g in groups[1:])
    # unknown gap: floor(20 % of 11) = 2 groups go
    rest = truncate_head_for_ptl_retry(msgs, None)
    assert rest is not None
    assert rest[0].blocks[0].text == PTL_MARKER
    assert rest[1] is groups[2][0]
    # a marker left by an earlier retry is dropped before grouping, not counted as a group
    again = truncate_head_for_ptl_retry(rest, None)
    assert again is not None
    assert again[1] is groups[3][0]
    assert sum(1 for m in again if m.blocks[0].text == PTL_MARKER) == 1
    # a huge gap still keeps the last group
    last = truncate_head_for_ptl_retry(msgs, 10**9)
    assert last is not None
    assert last[1:] == groups[-1]
    # split records of one response share an id and stay one group
    split = [msgs[0], message("assistant", Block("text", "a"), mid="same")]
    split.append(message("assistant", Block("text", "b"), mid="same"))
    assert len(group_by_api_round(split)) == 2
    assert truncate_head_for_ptl_retry([msgs[0]], 5) is None


# ------------------------------------------------------------------ malformed replies


@pytest.mark.parametrize(
    "raw",
    [
        "<html>upstream proxy error</html>",
        "{}",
        '{"id": "msg_1", "type": "message", "content": []}',
        '{"id": "msg_1", "type": "message", "content": [{"type": "text", "text": "   "}]}',
    ],
)
def test_a_reply_without_text_is_a_failure_not_an_empty_summary(
    llm_stub: LLMStub, raw: str
) -> None:
    llm_stub.malformed(raw)
    with pytest.raises(SummaryError, match="anthropic failed: malformed reply") as info:
        anthropic().summarize(request())
    assert info.value.kind == "malformed"
    assert len(llm_stub.requests) == 1


# ------------------------------------------------------------------ fallback and breaker


def test_fallback_marks_the_result_and_the_breaker_stops_calling(llm_stub: LLMStub) -> None:
    for _ in range(5):
        llm_stub.server_error()
    wrapped = FallbackSummarizer(anthropic(max_retries=0))
    assert wrapped.name == "anthropic"
    results = [wrapped.summarize(request()) for _ in range(4)]
    assert len(llm_stub.requests) == 3  # no 4th call: the breaker is open
    assert all(r.backend == "extractive" for r in results)
    assert all(r.text.startswith("<summary>") for r in results)
    reasons = [r.fallback_reason or "" for r in results]
    assert reasons[0].startswith("anthropic failed: HTTP 500 after 0 retries")
    assert "circuit breaker" not in reasons[1]
    assert "circuit breaker open after 3 consecutive failures" in reasons[2]
    assert reasons[3].startswith("anthropic not called: circuit breaker open after 3")
    assert wrapped.breaker_open


def test_the_breaker_trips_across_separately_built_summarizers(llm_stub: LLMStub) -> None:
    """A worker builds a new backend and a new wrapper for every summary: the failures of
    one endpoint and model still add up, and another model is not affected."""
    llm_stub.default = Reply("server_error", status=500)

    def one_call(model: str) -> str:
        fresh = FallbackSummarizer(make_summarizer("anthropic", model, max_retries=0))
        return fresh.summarize(request()).fallback_reason or ""

    reasons = [one_call("claude-opus-4-6") for _ in range(4)]
    assert len(llm_stub.requests) == 3  # the 4th wrapper did not call the backend
    assert "circuit breaker open after 3 consecutive failures" in reasons[2]
    assert reasons[3].startswith("anthropic not called: circuit breaker open after 3")
    assert "HTTP 500" in reasons[3]  # the last failure is named
    # another model is another breaker, still closed
    assert one_call("claude-haiku-4-5").startswith("anthropic failed: HTTP 500")
    assert len(llm_stub.requests) == 4
    assert llm_stub.requests[-1].body["model"] == "claude-haiku-4-5"


def test_an_open_breaker_lets_a_trial_call_through_after_the_cooldown(llm_stub: LLMStub) -> None:
    now = [0.0]
    breaker = CircuitBreaker(threshold=2, cooldown_s=60, clock=lambda: now[0])
    llm_stub.server_error().server_error().server_error().ok("<summary>back</summary>")
    wrapped = FallbackSummarizer(anthropic(max_retries=0), breaker=breaker)
    assert [wrapped.summarize(request()).backend for _ in range(3)] == ["extractive"] * 3
    assert len(llm_stub.requests) == 2  # open after 2
    now[0] = 59.0
    assert wrapped.summarize(request()).fallback_reason.startswith("anthropic not called")
    assert len(llm_stub.requests) == 2
    now[0] = 61.0  # cooled down: one trial, which fails and opens the breaker again
    reason = wrapped.summarize(request()).fallback_reason or ""
    assert "circuit breaker open after 3 consecutive failures" in reason
    assert len(llm_stub.requests) == 3
    assert wrapped.summarize(request()).fallback_reason.startswith("anthropic not called")
    now[0] = 122.0  # the next trial succeeds and closes it
    assert wrapped.summarize(request()).text == "Summary:\nback"
    assert (wrapped.breaker_open, wrapped.consecutive_failures) == (False, 0)
    assert len(llm_stub.requests) == 4


def test_a_success_resets_the_failure_count(llm_stub: LLMStub) -> None:
    llm_stub.server_error().server_error().ok("<summary>back</summary>").server_error()
    wrapped = FallbackSummarizer(anthropic(max_retries=0))
    backends = [wrapped.summarize(request()).backend for _ in range(4)]
    assert backends == ["extractive", "extractive", "anthropic", "extractive"]
    assert wrapped.consecutive_failures == 1
    assert len(llm_stub.requests) == 4


def test_fallback_wraps_any_exception(llm_stub: LLMStub) -> None:
    class Broken:
        name = "broken"

        def summarize(self, request: SummaryRequest) -> engine.SummaryResult:
            raise OSError("disk on fire")

    result = FallbackSummarizer(Broken()).summarize(request())
    assert result.fallback_reason == "broken failed: OSError: disk on fire"


def test_a_replay_interruption_is_not_a_failure(llm_stub: LLMStub) -> None:
    class Stopping:
        name = "anthropic"
        breaker_identity = ("anthropic", "https://stop.example", "m")

        def summarize(self, request: SummaryRequest) -> engine.SummaryResult:
            raise engine.ReplayStopped("spend cap")

    wrapped = FallbackSummarizer(Stopping())
    for _ in range(4):
        with pytest.raises(engine.ReplayStopped):
            wrapped.summarize(request())
    assert (wrapped.consecutive_failures, wrapped.breaker_open) == (0, False)


# ------------------------------------------------------------------ OpenAI-compatible


def test_openai_compatible_path(llm_stub: LLMStub, sdk_sleeps: list[float]) -> None:
    llm_stub.rate_limited().ok(
        RAW_SUMMARY, input_tokens=900, output_tokens=80, cache_read_tokens=100
    )
    summarizer = openai_compatible("llama3.2")
    result = summarizer.summarize(request())
    assert [r.retry_count for r in llm_stub.requests] == [0, 1]
    assert_backoff(sdk_sleeps, 1)
    sent = llm_stub.requests[-1]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {OPENAI_TEST_KEY}"
    body = sent.body
    assert body["model"] == "llama3.2"
    assert body["max_tokens"] == COMPACT_MAX_OUTPUT_TOKENS
    assert body["messages"][0] == {"role": "system", "content": SUMMARY_SYSTEM_PROMPT}
    assert body["messages"][1]["role"] == "user"
    assert body["messages"][-1]["role"] == "user"
    assert body["messages"][-1]["content"].endswith(compact_prompt())
    assert "[Tool result for toolu_0]" in all_text(body)
    assert result.text == FORMATTED
    assert result.backend == "openai"
    assert result.model == "llama3.2"
    assert (result.input_tokens, result.cache_read_tokens, result.output_tokens) == (900, 100, 80)
    assert result.cost_usd == 0.0  # no price for a local model rather than an invented one


def test_openai_without_a_key_sends_a_placeholder(
    llm_stub: LLMStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    llm_stub.ok("fine")
    openai_compatible("qwen", base_url=llm_stub.url + "/v1").summarize(request())
    assert llm_stub.requests[0].headers["authorization"] == "Bearer sk-no-key-required"


def test_openai_context_length_error_truncates_like_prompt_too_long(llm_stub: LLMStub) -> None:
    llm_stub.prompt_too_long(actual=201_000, limit=200_000).ok("short enough")
    msgs = conversation(rounds=8, result_chars=3000)
    result = openai_compatible("llama3.2").summarize(request(msgs))
    assert result.text == "short enough"
    first, second = llm_stub.requests
    assert len(second.body["messages"]) < len(first.body["messages"])
    assert second.body["messages"][1]["content"].startswith(PTL_MARKER)


def test_openai_needs_a_model() -> None:
    with pytest.raises(ValueError, match="needs a model name"):
        openai_compatible(None)


# ------------------------------------------------------------------ keys stay secret


def test_api_keys_never_appear_in_errors_reprs_results_or_logs(
    llm_stub: LLMStub, caplog: pytest.LogCaptureFixture, sdk_sleeps: list[float]
) -> None:
    caplog.set_level(logging.DEBUG, logger="contextlab")
    # a misbehaving proxy echoes the credentials back in its error and in its reply
    llm_stub.rate_limited().error(401, f"invalid x-api-key: {ANTHROPIC_TEST_KEY}")
    llm_stub.ok(f"<summary>key was {ANTHROPIC_TEST_KEY}</summary>")
    llm_stub.error(401, f"bad key {OPENAI_TEST_KEY}")
    explicit = "sk-ant-explicit-KEY-9876543210"
    summarizer = anthropic(api_key=explicit)
    wrapped = FallbackSummarizer(summarizer)
    fallback = wrapped.summarize(request())
    echoed = summarizer.summarize(request())
    with pytest.raises(SummaryError) as info:
        openai_compatible("llama3.2").summarize(request())

    assert llm_stub.requests[0].headers["authorization"] == f"Bearer {explicit}"  # it was used
    keys = (ANTHROPIC_TEST_KEY, OPENAI_TEST_KEY, explicit)
    outputs = {
        "fallback reason": fallback.fallback_reason or "",
        "result json": json.dumps(dataclasses.asdict(fallback)),
        "echoed result": json.dumps(dataclasses.asdict(echoed)),
        "openai error": str(info.value) + repr(info.value),
        "reprs": repr(summarizer) + repr(wrapped) + repr(openai_compatible("m")),
        "vars": repr(vars(summarizer)) + repr(vars(summarizer.settings)),
        "logs": caplog.text,
    }
    for where, text in outputs.items():
        for key in keys:
            assert key not in text, f"key leaked into {where}"
    assert "HTTP 401" in outputs["fallback reason"]
    assert "***" in outputs["fallback reason"]
    # the SDK's exception (which quotes the server) is not chained into tracebacks either
    trace = "".join(traceback.format_exception(info.value))
    assert OPENAI_TEST_KEY not in trace
    assert info.value.__cause__ is None
    assert "api_key='***'" in repr(summarizer)


# ------------------------------------------------------------------ factory, import, replay, CLI


def test_make_summarizer() -> None:
    assert isinstance(make_summarizer("extractive"), engine.ExtractiveSummarizer)
    made = make_summarizer("anthropic", "claude-opus-4-6", timeout=9, max_retries=2)
    assert isinstance(made, AnthropicSummarizer)
    assert (made.model, made.settings.timeout) == ("claude-opus-4-6", 9)
    # the settings reach the SDK client: its retries and timeout are the ones that run
    client = made._client()
    assert (client.max_retries, client.timeout) == (2, 9)
    assert isinstance(make_summarizer(" OpenAI ", "llama3"), OpenAICompatibleSummarizer)
    settings = LLMSettings(backend="openai", model="llama3", max_retries=0)
    from_settings = make_summarizer(settings)
    assert isinstance(from_settings, OpenAICompatibleSummarizer)
    assert from_settings.settings == settings
    assert engine.make_summarizer is make_summarizer
    assert engine.LLMSettings is LLMSettings
    with pytest.raises(ValueError, match="choose one of extractive, anthropic, openai"):
        make_summarizer("gpt")
    with pytest.raises(ValueError, match="max_retries"):
        make_summarizer("anthropic", max_retries=-1)
    with pytest.raises(TypeError):
        make_summarizer("anthropic", sleep=print)  # the hand-written back-off knobs are gone


def test_importing_the_engine_does_not_import_the_sdks() -> None:
    code = (
        "import sys, contextlab.engine, contextlab.engine.cli, contextlab.engine.summarizing.factory,"
        " contextlab.engine.summarizing.fallback; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('anthropic', 'openai')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def long_session(turns: int = 30, result_chars: int = 12000) -> TranscriptBuilder:
    b = TranscriptBuilder()
    for n in range(turns):
        b.prompt(f"step {n}")
        b.tool_call(
            "Read",
            {"file_path": f"/src/file{n}.py"},
            "code line\n" * (result_chars // 10),
            grow=result_chars // 3,
        )
        b.assistant([{"type": "text", "text": f"done {n}"}], grow=50)
    return b


SMALL_WINDOW = {"context_window": 100_000}  # effective 80,000; autocompact at 67,000
BASE = engine.get_preset("claude-code-2.1.88")


def test_whatif_replay_with_the_anthropic_backend(llm_stub: LLMStub, tmp_path: Path) -> None:
    llm_stub.default = Reply("ok", text=RAW_SUMMARY, input_tokens=50_000, output_tokens=900)
    session = engine.load_session(str(long_session().write(tmp_path / "t.jsonl")))
    summarizer = FallbackSummarizer(anthropic())
    result = engine.replay(
        session, BASE.replace(**SMALL_WINDOW), mode="whatif", summarizer=summarizer
    ).to_json()

    summaries = result["summaries"]
    assert summaries, "expected the small window to force a compaction"
    assert len(summaries) == len(llm_stub.requests)  # each summary listed once
    assert result["session"]["summarizer"] == "anthropic"
    for item in summaries:
        assert item["backend"] == "anthropic"
        assert item["kind"] == "compact"
        assert item["model"] == "claude-opus-4-6"  # the session's model
        assert FORMATTED in item["text"]
        assert "<analysis>" not in item["text"]
        assert (item["input_tokens"], item["output_tokens"]) == (50_000, 900)
        assert item["cost_usd"] > 0
        assert item["latency_s"] >= 0
        assert item["fallback_reason"] is None
        assert item["reused"] is False
        assert item["thread"] == "main"
    synthetic = {s["id"]: s for s in result["views"]["synthetic"]}
    first = synthetic[summaries[0]["id"]]
    assert first["backend"] == "anthropic"
    assert "latency_s" in first
    assert first["fallback_reason"] is None
    compacted = [e for r in result["requests"] for e in r["events"] if e["step"] == "autocompact"]
    assert compacted[0]["summary"] == summaries[0]["id"]


def test_whatif_collapse_summaries_come_from_the_backend(llm_stub: LLMStub, tmp_path: Path) -> None:
    llm_stub.default = Reply("ok", text="<summary>span summary</summary>")
    session = engine.load_session(str(long_session().write(tmp_path / "t.jsonl")))
    result = engine.replay(
        session,
        BASE.replace(collapse_enabled=True, **SMALL_WINDOW),
        mode="whatif",
        summarizer=anthropic(),
    ).to_json()
    collapses = [s for s in result["summaries"] if s["kind"] == "collapse"]
    assert collapses
    assert all(
        s["backend"] == "anthropic" and s["text"] == "Summary:\nspan summary" for s in collapses
    )
    assert len(result["summaries"]) == len(llm_stub.requests)
    prompts = {r.body["messages"][-1]["content"][-1]["text"] for r in llm_stub.requests}
    assert prompts == {COLLAPSE_PROMPT}


def test_cli_replays_with_the_anthropic_backend_and_reports_fallbacks(
    llm_stub: LLMStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = long_session().write(tmp_path / "t.jsonl")
    config = tmp_path / "small.json"
    config.write_text(json.dumps({"preset": "claude-code-2.1.88", **SMALL_WINDOW}))
    llm_stub.ok(RAW_SUMMARY)
    llm_stub.default = Reply("error", status=401, message="invalid x-api-key")
    code = cli_main(
        [
            "replay",
            str(path),
            "--mode",
            "whatif",
            "--config",
            str(config),
            "--summarizer",
            "anthropic",
            "--summary-model",
            "claude-haiku-4-5",
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    summaries = data["summaries"]
    assert summaries[0]["backend"] == "anthropic"
    assert summaries[0]["model"] == "claude-haiku-4-5"
    assert llm_stub.requests[0].body["model"] == "claude-haiku-4-5"
    assert len(summaries) >= 2
    # the later compactions hit the 401 and fell back, visibly in the JSON and on stderr
    assert summaries[1]["backend"] == "extractive"
    assert "HTTP 401" in summaries[1]["fallback_reason"]
    assert "fell back to extractive" in err
    assert ANTHROPIC_TEST_KEY not in out + err


def test_cli_rejects_an_unusable_summarizer_choice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONTEXTLAB_SUMMARY_MODEL", raising=False)
    path = long_session(2).write(tmp_path / "t.jsonl")
    assert cli_main(["replay", str(path), "--summarizer", "openai"]) == 64
    assert "needs a model name" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli_main(["replay", str(path), "--summarizer", "gpt"])
    assert info.value.code == 2
