"""Summaries from any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM,
llama.cpp) through the official ``openai`` SDK.

The settings' ``base_url`` or ``OPENAI_BASE_URL`` selects the server (e.g.
http://localhost:11434/v1); the key is the settings' or ``OPENAI_API_KEY``, or a placeholder for
local servers that need none. There is no sensible default model, so the settings or
``CONTEXTLAB_SUMMARY_MODEL`` must name one. Some servers reject prompt + max_tokens above their
context length: lower ``max_output_tokens`` for small local models.
"""

from __future__ import annotations

import os
from typing import Any

from .interface import SummaryRequest
from .llm import (
    MODEL_ENV,
    CallFailure,
    LLMSettings,
    LLMSummarizer,
    Reply,
    as_int,
    classify_sdk_error,
)
from .rendering import Turn

#: local servers (Ollama, vLLM, llama.cpp) ignore the key, but the SDK insists on one
OPENAI_PLACEHOLDER_KEY = "sk-no-key-required"


class OpenAICompatibleSummarizer(LLMSummarizer):
    """Compaction summaries from a chat-completions endpoint (system prompt as a message)."""

    name = "openai"
    default_base_url = "https://api.openai.com/v1"
    base_url_env = "OPENAI_BASE_URL"
    placeholder_key = OPENAI_PLACEHOLDER_KEY

    def __init__(self, settings: LLMSettings) -> None:
        model = settings.model or os.environ.get(MODEL_ENV) or None
        if not model:
            raise ValueError(
                "the openai summarizer needs a model name: pass one (CLI: --summary-model) "
                f"or set {MODEL_ENV}"
            )
        super().__init__(
            settings, model=model, api_key=settings.api_key or os.environ.get("OPENAI_API_KEY")
        )

    def _env_secrets(self) -> list[str]:
        return [os.environ.get("OPENAI_API_KEY", "")]

    def _resolve_model(self, request: SummaryRequest) -> str:
        assert self.model is not None  # checked in __init__
        return self.model

    def _import_sdk(self) -> Any:
        import openai

        return openai

    def _make_client(self, sdk: Any, kwargs: dict[str, Any]) -> Any:
        return sdk.OpenAI(**kwargs)

    def _send(self, model: str, turns: list[Turn], max_tokens: int) -> Reply:
        messages: list[dict[str, str]] = [
            {"role": "system", "content": self.settings.system_prompt}
        ]
        messages.extend({"role": t.role, "content": "\n\n".join(t.parts)} for t in turns)
        completion = self._client().chat.completions.create(
            model=model, messages=messages, max_tokens=max_tokens
        )
        choices = getattr(completion, "choices", None)
        text = ""
        if isinstance(choices, list) and choices:
            content = getattr(getattr(choices[0], "message", None), "content", None)
            text = content if isinstance(content, str) else ""
        if not text.strip():
            raise CallFailure("malformed", "the reply has no message content")
        usage = getattr(completion, "usage", None)
        prompt_tokens = as_int(getattr(usage, "prompt_tokens", 0))
        cached = as_int(getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", 0))
        return Reply(
            text=text,
            model=str(getattr(completion, "model", None) or model),
            uncached_input=max(0, prompt_tokens - cached),
            cache_read=cached,
            cache_write=0,
            output=as_int(getattr(usage, "completion_tokens", 0)),
        )

    def _classify(self, exc: Exception) -> CallFailure:
        return classify_sdk_error(exc, self._import_sdk(), self.settings)
