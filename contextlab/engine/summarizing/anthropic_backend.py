"""Summaries from the Anthropic Messages API through the official ``anthropic`` SDK.

The key comes from the settings or ``ANTHROPIC_API_KEY`` (or whatever else the SDK resolves);
the base URL from the settings or, when that is None, from ``ANTHROPIC_BASE_URL`` (left to the
SDK, which reads it itself). The model is the settings', else ``CONTEXTLAB_SUMMARY_MODEL``,
else the model of the session being summarized (as Claude Code does), else
``DEFAULT_ANTHROPIC_MODEL``. The SDK is imported on the first call, so importing this module
stays cheap and works without it.
"""

from __future__ import annotations

import os
import re
from typing import Any

from contextlab.engine.measures.model_limits import model_info

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

#: Used when neither the settings, CONTEXTLAB_SUMMARY_MODEL nor the request names a model.
#: (claude-sonnet-4-5 reaches end of life on 2026-11-30 according to the SDK's own table.)
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"


class AnthropicSummarizer(LLMSummarizer):
    """Compaction summaries from Claude, Claude Code's own way (system prompt, max_tokens)."""

    name = "anthropic"
    default_base_url = "https://api.anthropic.com"
    base_url_env = "ANTHROPIC_BASE_URL"

    def __init__(self, settings: LLMSettings) -> None:
        super().__init__(
            settings,
            model=settings.model or os.environ.get(MODEL_ENV) or None,
            api_key=settings.api_key or os.environ.get("ANTHROPIC_API_KEY") or None,
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
        return min(self.settings.max_output_tokens, model_info(model).max_output_upper)

    def _import_sdk(self) -> Any:
        import anthropic

        return anthropic

    def _make_client(self, sdk: Any, kwargs: dict[str, Any]) -> Any:
        return sdk.Anthropic(**kwargs)

    def _send(self, model: str, turns: list[Turn], max_tokens: int) -> Reply:
        message = self._client().messages.create(
            model=model,
            max_tokens=max_tokens,
            system=self.settings.system_prompt,
            messages=[
                {"role": t.role, "content": [{"type": "text", "text": p} for p in t.parts]}
                for t in turns
            ],
        )
        content = getattr(message, "content", None)
        texts = (
            [getattr(b, "text", "") for b in content if getattr(b, "type", None) == "text"]
            if isinstance(content, list)
            else []
        )
        text = "".join(t for t in texts if isinstance(t, str))
        if not text.strip():
            raise CallFailure("malformed", "the reply has no text content")
        usage = getattr(message, "usage", None)
        return Reply(
            text=text,
            model=str(getattr(message, "model", None) or model),
            uncached_input=as_int(getattr(usage, "input_tokens", 0)),
            cache_read=as_int(getattr(usage, "cache_read_input_tokens", 0)),
            cache_write=as_int(getattr(usage, "cache_creation_input_tokens", 0)),
            output=as_int(getattr(usage, "output_tokens", 0)),
        )

    def _classify(self, exc: Exception) -> CallFailure:
        anthropic = self._import_sdk()
        if isinstance(exc, anthropic.CredentialsError):
            return CallFailure("fatal", f"no usable credentials: set ANTHROPIC_API_KEY ({exc})")
        return classify_sdk_error(exc, anthropic, self.settings)
