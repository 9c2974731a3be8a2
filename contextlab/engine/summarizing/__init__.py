"""Summaries for simulated compactions and collapses, behind one ``Summarizer`` interface.

=====================  ==============================================================
module                 responsibility
=====================  ==============================================================
``interface``          ``SummaryRequest``/``SummaryResult``, the protocol, errors
``prompts``            the prompt texts and ``PROMPT_VERSION`` (part of every cache key)
``rendering``          messages → API turns; prompt-too-long truncation
``extractive``         the offline default (no model call, deterministic)
``stored``             the summary store: ``summary_key``, ``StoredSummarizer``
``fallback``           ``FallbackSummarizer`` and the process-wide circuit breakers
``llm``                ``LLMSettings`` and what both LLM backends share (SDK retries)
``anthropic_backend``  the Anthropic Messages API
``openai_backend``     OpenAI-compatible chat completions (Ollama, vLLM, llama.cpp)
``factory``            ``make_summarizer``: every summarizer from a name or settings
=====================  ==============================================================

Importing this package loads the offline parts only; the LLM modules are imported by name
(``contextlab.engine``'s lazy loader does so) and import their SDK on the first call.
"""

from __future__ import annotations

from .extractive import ExtractiveSummarizer
from .interface import (
    SUMMARIZER_NAMES,
    ReplayInterrupted,
    ReplayStopped,
    Summarizer,
    SummaryError,
    SummaryRequest,
    SummaryResult,
)
from .prompts import (
    COLLAPSE_PROMPT,
    COLLAPSE_PROMPT_VERSION,
    PROMPT_VERSION,
    SUMMARY_SECTIONS,
    collapse_prompt,
    compact_prompt,
    continuation_message,
    format_summary,
)
from .stored import StoredSummarizer, SummaryPending, render_messages, summary_key

__all__ = [
    "COLLAPSE_PROMPT",
    "COLLAPSE_PROMPT_VERSION",
    "PROMPT_VERSION",
    "SUMMARIZER_NAMES",
    "SUMMARY_SECTIONS",
    "ExtractiveSummarizer",
    "ReplayInterrupted",
    "ReplayStopped",
    "StoredSummarizer",
    "Summarizer",
    "SummaryError",
    "SummaryPending",
    "SummaryRequest",
    "SummaryResult",
    "collapse_prompt",
    "compact_prompt",
    "continuation_message",
    "format_summary",
    "render_messages",
    "summary_key",
]
