"""One factory for every summarizer: by name with settings fields, or from ``LLMSettings``."""

from __future__ import annotations

from typing import Any

from .anthropic_backend import AnthropicSummarizer
from .extractive import ExtractiveSummarizer
from .interface import SUMMARIZER_NAMES, Summarizer
from .llm import LLM_BACKENDS, LLMSettings, LLMSummarizer
from .openai_backend import OpenAICompatibleSummarizer

_LLM_CLASSES: dict[str, type[AnthropicSummarizer] | type[OpenAICompatibleSummarizer]] = {
    "anthropic": AnthropicSummarizer,
    "openai": OpenAICompatibleSummarizer,
}


def make_summarizer(
    name: str | LLMSettings, model: str | None = None, **settings: Any
) -> Summarizer:
    """A summarizer: "extractive" (offline, ``settings`` are its options), an LLM backend by
    name ("anthropic", "openai"; ``settings`` are ``LLMSettings`` fields), or an
    ``LLMSettings`` as it is.

    Raises ValueError for an unknown name, a bad setting, or an openai backend without a model.
    """
    if isinstance(name, LLMSettings):
        return llm_summarizer(name)
    key = (name or "").strip().lower()
    if key == "extractive":
        return ExtractiveSummarizer(**settings)
    if key in LLM_BACKENDS:
        return llm_summarizer(LLMSettings(backend=key, model=model, **settings))
    raise ValueError(f"unknown summarizer {name!r}: choose one of {', '.join(SUMMARIZER_NAMES)}")


def llm_summarizer(settings: LLMSettings) -> LLMSummarizer:
    """The backend ``settings.backend`` names, built from ``settings``."""
    return _LLM_CLASSES[settings.backend](settings)


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
