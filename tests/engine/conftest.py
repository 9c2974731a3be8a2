"""Engine fixtures: a scripted LLM server on loopback for the summarizer backends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm_stub import LLMStub

#: Fake keys: distinctive, so a test can search any output for them.
ANTHROPIC_TEST_KEY = "sk-ant-test-SECRET-0123456789abcdef"
OPENAI_TEST_KEY = "sk-test-SECRET-openai-0123456789abcdef"


@pytest.fixture
def llm_stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[LLMStub]:
    """A started stub; both SDKs' base URLs and keys point at it through the environment."""
    stub = LLMStub().start()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.url)
    monkeypatch.setenv("OPENAI_BASE_URL", stub.url + "/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_TEST_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_TEST_KEY)
    # nothing from the developer's own environment may steer the clients elsewhere
    for name in (
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CUSTOM_HEADERS",
        "OPENAI_CUSTOM_HEADERS",
        "CONTEXTLAB_SUMMARY_MODEL",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    try:
        yield stub
    finally:
        stub.stop()
