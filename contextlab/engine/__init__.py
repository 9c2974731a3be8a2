"""ContextLab engine: replay Claude Code's context pipeline on a recorded transcript.

Framework-free (standard library + tiktoken, and msgspec for the config schema). Django, Celery and the CLI import only names from
this module, never the sub-modules, so the engine can be refactored freely behind it.

Typical use::

    from contextlab import engine

    session = engine.load_session("session.jsonl")             # raises engine.TranscriptError
    config, preset = engine.resolve_config("auto", version=session.version)
    result = engine.replay(session, config, mode="recorded", preset_name=preset)
    data = result.to_json()                                      # {"session", "requests", "summary", ...}
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .config.errors import ConfigError, FieldError
from .config.fields import PipelineConfig, get_preset
from .config.knobs import (
    ClaudeCodeSettings,
    claude_code_settings,
    field_kind,
    overrides_from_settings,
)
from .config.presets import preset_for_version
from .config.resolve import (
    PRESET_DESCRIPTIONS,
    PRESET_NAMES,
    PRESETS,
    resolve_config,
    resolve_request_config,
    resolve_session_config,
)
from .config.thresholds import Thresholds, compute_thresholds
from .input import disk_cache
from .input.json_line import decode_json_line
from .input.loading import open_upload, read_head
from .input.model import Block, Message, Problem, TranscriptError, Usage, dropped_problems
from .input.rough import rough_text
from .input.session import Session, Thread
from .input.sources.registry import ADAPTERS, build_session, load_session
from .input.upload_chain import EarlierUpload, open_upload_chain
from .measures.cost import PricingTable, load_pricing, request_cost
from .measures.model_limits import ModelInfo, model_info
from .measures.tokens import TiktokenCounter, preload_tokenizer
from .replay.driver import MODES, replay, resume
from .replay.forecast import check_usage_until, forecast_session
from .replay.live import continue_live, replay_live
from .replay.result import ReplayResult
from .results import RecordedUsage, RequestRow, ResultJson, as_result
from .summarizing import (
    PROMPT_VERSION,
    ExtractiveSummarizer,
    ReplayStopped,
    StoredSummarizer,
    Summarizer,
    SummaryError,
    SummaryPending,
    SummaryRequest,
    SummaryResult,
    compact_prompt,
    format_summary,
    render_messages,
    summary_key,
)
from .version import ENGINE_VERSION

if TYPE_CHECKING:  # loaded on first use (below): the CLI's start-up only pays for what it runs
    from .config.forms import field_specs, parse_overrides, setting_from_text
    from .input import loading, session_cache
    from .input.session_cache import file_sha256, keep_parsed, load_growing
    from .measures.tokenized import load_session_cached, tokenize_session
    from .results import compare, evaluation
    from .results.composition import compose
    from .results.evaluation import cache_accuracy, compaction_accuracy, fidelity, result_fidelity
    from .results.explorer import (
        BADGES,
        HistoryIndex,
        TransformIndex,
        expand_messages,
        messages_json,
        side_by_side,
        write_messages_json,
    )
    from .results.idle import IdleAnswer, idle_compaction
    from .results.json_stream import JsonText, TextSink, json_list_parts, write_json
    from .results.live_findings import KeptFindings, LiveFindings, live_findings
    from .results.message_store import (
        appended_messages_json,
        apply_appended_messages,
        join_messages_parts,
        message_marks,
        messages_json_head,
        messages_json_parts,
    )
    from .results.navigator import (
        EVENT_KINDS,
        NavigatorEvent,
        cache_sentence,
        describe_event,
        event_counts,
        format_duration,
        gaps,
        parse_time,
        request_events,
    )
    from .results.tools import (
        BREAKDOWN_VERSION,
        TOOL_BREAKDOWN_KEY,
        ToolBreakdown,
        tool_breakdown,
        tool_names,
    )
    from .results.usage_fidelity import forecast_fidelity, usage_fidelity
    from .results.view_diff import ViewDiff, view_diff
    from .results.waste import WasteReport, waste_findings
    from .results.waste_scan import (
        HeldScan,
        ScanOn,
        WasteScan,
        scan_main_thread,
        scan_main_thread_on,
    )
    from .summarizing.anthropic_backend import AnthropicSummarizer
    from .summarizing.factory import make_summarizer, preload_sdks
    from .summarizing.fallback import FallbackSummarizer
    from .summarizing.llm import LLMSettings
    from .summarizing.openai_backend import OpenAICompatibleSummarizer

#: Modules that are themselves attributes, loaded on first use (``engine.compare``; the others
#: for the tests that set their bounds, clear their memory or call them by module).
_LAZY_SUBMODULES: tuple[str, ...] = (
    ".results.compare",
    ".results.evaluation",
    ".input.loading",
    ".input.session_cache",
)
#: What is loaded on first use, by module (the names in the TYPE_CHECKING block above, which
#: type checkers read; a test keeps the two equal).
_LAZY_MODULES: dict[str, tuple[str, ...]] = {
    ".config.forms": ("field_specs", "parse_overrides", "setting_from_text"),
    ".results.composition": ("compose",),
    ".results.evaluation": ("cache_accuracy", "compaction_accuracy", "fidelity", "result_fidelity"),
    ".results.usage_fidelity": ("forecast_fidelity", "usage_fidelity"),
    ".results.waste": ("WasteReport", "waste_findings"),
    ".results.waste_scan": (
        "HeldScan",
        "ScanOn",
        "WasteScan",
        "scan_main_thread",
        "scan_main_thread_on",
    ),
    ".results.idle": ("IdleAnswer", "idle_compaction"),
    ".results.live_findings": ("KeptFindings", "LiveFindings", "live_findings"),
    ".results.message_store": (
        "appended_messages_json",
        "apply_appended_messages",
        "join_messages_parts",
        "message_marks",
        "messages_json_head",
        "messages_json_parts",
    ),
    ".results.json_stream": ("JsonText", "TextSink", "json_list_parts", "write_json"),
    ".results.tools": (
        "BREAKDOWN_VERSION",
        "TOOL_BREAKDOWN_KEY",
        "ToolBreakdown",
        "tool_breakdown",
        "tool_names",
    ),
    ".results.view_diff": ("ViewDiff", "view_diff"),
    ".results.explorer": (
        "BADGES",
        "HistoryIndex",
        "TransformIndex",
        "expand_messages",
        "messages_json",
        "side_by_side",
        "write_messages_json",
    ),
    ".input.session_cache": ("file_sha256", "keep_parsed", "load_growing"),
    ".measures.tokenized": ("load_session_cached", "tokenize_session"),
    ".summarizing.anthropic_backend": ("AnthropicSummarizer",),
    ".summarizing.factory": ("make_summarizer", "preload_sdks"),
    ".summarizing.fallback": ("FallbackSummarizer",),
    ".summarizing.llm": ("LLMSettings",),
    ".summarizing.openai_backend": ("OpenAICompatibleSummarizer",),
    ".results.navigator": (
        "EVENT_KINDS",
        "NavigatorEvent",
        "cache_sentence",
        "describe_event",
        "event_counts",
        "format_duration",
        "gaps",
        "parse_time",
        "request_events",
    ),
}
#: attribute name -> (module, name in it, or None for the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    _module.rsplit(".", 1)[-1]: (_module, None) for _module in _LAZY_SUBMODULES
}
for _module, _names in _LAZY_MODULES.items():
    for _name in _names:
        _LAZY[_name] = (_module, _name)


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(target[0], __name__)
    value = module if target[1] is None else getattr(module, target[1])
    globals()[name] = value
    return value


def preload_lazy_modules() -> None:
    """Import now what is otherwise loaded on first use: a worker at start-up (its runs use
    most of it, about 20 ms of imports), where the web imports the engine without it."""
    for module in {target[0] for target in _LAZY.values()}:
        importlib.import_module(module, __name__)


#: The agents whose transcripts the engine reads: adapter name → the agent's name as people know it.
AGENT_LABELS: dict[str, str] = {adapter.name: adapter.label for adapter in ADAPTERS}

__all__ = [
    "AGENT_LABELS",
    "BADGES",
    "BREAKDOWN_VERSION",
    "ENGINE_VERSION",
    "EVENT_KINDS",
    "MODES",
    "PRESETS",
    "PRESET_DESCRIPTIONS",
    "PRESET_NAMES",
    "PROMPT_VERSION",
    "TOOL_BREAKDOWN_KEY",
    "AnthropicSummarizer",
    "Block",
    "ClaudeCodeSettings",
    "ConfigError",
    "EarlierUpload",
    "ExtractiveSummarizer",
    "FallbackSummarizer",
    "FieldError",
    "HeldScan",
    "HistoryIndex",
    "IdleAnswer",
    "JsonText",
    "KeptFindings",
    "LLMSettings",
    "LiveFindings",
    "Message",
    "ModelInfo",
    "NavigatorEvent",
    "OpenAICompatibleSummarizer",
    "PipelineConfig",
    "PricingTable",
    "Problem",
    "RecordedUsage",
    "ReplayResult",
    "ReplayStopped",
    "RequestRow",
    "ResultJson",
    "ScanOn",
    "Session",
    "StoredSummarizer",
    "Summarizer",
    "SummaryError",
    "SummaryPending",
    "SummaryRequest",
    "SummaryResult",
    "TextSink",
    "Thread",
    "Thresholds",
    "TiktokenCounter",
    "ToolBreakdown",
    "TranscriptError",
    "TransformIndex",
    "Usage",
    "ViewDiff",
    "WasteReport",
    "WasteScan",
    "appended_messages_json",
    "apply_appended_messages",
    "as_result",
    "build_session",
    "cache_accuracy",
    "cache_sentence",
    "check_usage_until",
    "claude_code_settings",
    "compact_prompt",
    "compaction_accuracy",
    "compare",
    "compose",
    "compute_thresholds",
    "continue_live",
    "decode_json_line",
    "describe_event",
    "disk_cache",
    "dropped_problems",
    "evaluation",
    "event_counts",
    "expand_messages",
    "fidelity",
    "field_kind",
    "field_specs",
    "file_sha256",
    "forecast_fidelity",
    "forecast_session",
    "format_duration",
    "format_summary",
    "gaps",
    "get_preset",
    "idle_compaction",
    "join_messages_parts",
    "json_list_parts",
    "keep_parsed",
    "live_findings",
    "load_growing",
    "load_pricing",
    "load_session",
    "load_session_cached",
    "loading",
    "make_summarizer",
    "message_marks",
    "messages_json",
    "messages_json_head",
    "messages_json_parts",
    "model_info",
    "open_upload",
    "open_upload_chain",
    "overrides_from_settings",
    "parse_overrides",
    "parse_time",
    "preload_lazy_modules",
    "preload_sdks",
    "preload_tokenizer",
    "preset_for_version",
    "read_head",
    "render_messages",
    "replay",
    "replay_live",
    "request_cost",
    "request_events",
    "resolve_config",
    "resolve_request_config",
    "resolve_session_config",
    "result_fidelity",
    "resume",
    "rough_text",
    "scan_main_thread",
    "scan_main_thread_on",
    "session_cache",
    "setting_from_text",
    "side_by_side",
    "summary_key",
    "tokenize_session",
    "tool_breakdown",
    "tool_names",
    "usage_fidelity",
    "view_diff",
    "waste_findings",
    "write_json",
    "write_messages_json",
]
