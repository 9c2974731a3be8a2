"""Every threshold and switch of the context pipeline, as one validated, immutable value.

Field names are Claude Code's own constants in snake_case (``AUTOCOMPACT_BUFFER_TOKENS`` →
``autocompact_buffer_tokens``); each field's metadata names the constant, env var or remote flag it
stands for (pipeline-spec §1, facts "(a) Constants table"). Defaults are the public 2.1.88 build.
Fields marked *modeled* drive steps whose Claude Code implementation is not public (snip, context
collapse, cached microcompact, API tool clearing): their values are ContextLab's policy, not facts.

Named starting points and version awareness live in ``presets``; the threshold arithmetic that
turns a config and a model into numbers lives in ``thresholds``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import tomllib
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

V = TypeVar("V")

CacheTTL = Literal["auto", "5m", "1h"]
BlockingLimitBase = Literal["effective", "window"]
SettingsFormat = Literal["toml", "json"]

#: ``MAX_OUTPUT_TOKENS_DEFAULT`` (utils/context.ts): what a model missing from the table gets.
#: Validation uses it because a config is checked before any model is known.
MAX_OUTPUT_TOKENS_DEFAULT = 32_000


class ConfigError(ValueError):
    """A setting is unknown, of the wrong type, out of range or inconsistent with another one.

    ``field`` names the setting (a form can attach the message to it); ``str()`` reads
    ``"<field>: <message>"``.
    """

    def __init__(self, field: str, message: str) -> None:
        # Both parts go to ValueError so the exception pickles (Celery, multiprocessing).
        super().__init__(field, message)
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class FrozenMap(Mapping[str, V]):
    """A read-only, hashable ``str → V`` mapping, so a frozen config stays frozen and hashable."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, V] | None = None) -> None:
        self._data: dict[str, V] = dict(data or {})

    def __getitem__(self, key: str) -> V:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self) -> tuple[type[FrozenMap[V]], tuple[dict[str, V]]]:
        return (type(self), (self._data,))


def _meta(
    doc: str,
    *,
    source: str,
    group: str,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    fraction: bool = False,
    modeled: bool = False,
) -> dict[str, Any]:
    return {
        "doc": doc,
        "source": source,
        "group": group,
        "lo": lo,
        "hi": hi,
        "lo_open": lo_open,
        "fraction": fraction,
        "modeled": modeled,
    }


_W = "window"
_AC = "autocompact"
_TR = "tool_results"
_MC = "microcompact"
_SNIP = "snip"
_COL = "collapse"
_CACHE = "cache"
_TOK = "tokens"

TOKENS_MAX = 10_000_000
CHARS_MAX = 100_000_000


@dataclass(frozen=True, slots=True, repr=False)
class PipelineConfig:
    """All thresholds and switches of one pipeline run; construction validates (``ConfigError``)."""

    # -- context window and output reserve (spec §1.3, §1.8, §12) --
    context_window: int = field(
        default=200_000,
        metadata=_meta(
            "Context window W in tokens; a model id containing [1m] always gets 1,000,000.",
            source="MODEL_CONTEXT_WINDOW_DEFAULT (utils/context.ts)",
            group=_W,
            lo=10_000,
            hi=TOKENS_MAX,
        ),
    )
    max_output_tokens: int | None = field(
        default=None,
        metadata=_meta(
            "Max output tokens M; null = the model's default from the model table, "
            "always capped at the model's upper limit.",
            source="env CLAUDE_CODE_MAX_OUTPUT_TOKENS",
            group=_W,
            lo=1,
            hi=1_000_000,
        ),
    )
    max_output_tokens_for_summary: int = field(
        default=20_000,
        metadata=_meta(
            "Cap on the output reserve: effective window E = W − min(M, this).",
            source="MAX_OUTPUT_TOKENS_FOR_SUMMARY (services/compact/autoCompact.ts)",
            group=_W,
            lo=1,
            hi=1_000_000,
        ),
    )
    reserve_full_max_output: bool = field(
        default=False,
        metadata=_meta(
            "Reserve the whole M (E = W − M, no 20,000 cap), as Claude Code 2.1.20 and older did.",
            source="getEffectiveContextWindowSize in the 2.1.20 npm bundle (spec §12)",
            group=_W,
        ),
    )
    auto_compact_window: int | None = field(
        default=None,
        metadata=_meta(
            "Caps the window before the reserve is taken off: W = min(W, this); null = no cap.",
            source="env CLAUDE_CODE_AUTO_COMPACT_WINDOW (2.1.75 and later)",
            group=_W,
            lo=1_000,
            hi=TOKENS_MAX,
        ),
    )
    otk_slot_cap_enabled: bool = field(
        default=False,
        metadata=_meta(
            "Cap the model's default M at capped_default_max_tokens (so E = W − 8,000).",
            source="GrowthBook tengu_otk_slot_v1 (default false)",
            group=_W,
        ),
    )
    capped_default_max_tokens: int = field(
        default=8_000,
        metadata=_meta(
            "Default M while the output-slot cap is on.",
            source="CAPPED_DEFAULT_MAX_TOKENS (utils/context.ts)",
            group=_W,
            lo=1,
            hi=1_000_000,
        ),
    )
    # -- autocompact, blocking limit, compaction (spec §1.3, §4.6, §4.7) --
    autocompact_enabled: bool = field(
        default=True,
        metadata=_meta(
            "Autocompact on (the user's switch; context collapse also suppresses it).",
            source="config autoCompactEnabled; env DISABLE_COMPACT / DISABLE_AUTO_COMPACT",
            group=_AC,
        ),
    )
    autocompact_buffer_tokens: int = field(
        default=13_000,
        metadata=_meta(
            "Autocompact threshold T = E − this.",
            source="AUTOCOMPACT_BUFFER_TOKENS (services/compact/autoCompact.ts)",
            group=_AC,
            lo=0,
            hi=1_000_000,
        ),
    )
    autocompact_pct_override: float | None = field(
        default=None,
        metadata=_meta(
            "Percent of E (0 < pct ≤ 100): T = min(floor(E·pct/100), E − buffer), "
            "so it can only lower T.",
            source="env CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
            group=_AC,
            lo=0,
            hi=100,
            lo_open=True,
        ),
    )
    warning_threshold_buffer_tokens: int = field(
        default=20_000,
        metadata=_meta(
            "Warning state at base − this (base = T, or E when autocompact is off).",
            source="WARNING_THRESHOLD_BUFFER_TOKENS (services/compact/autoCompact.ts)",
            group=_AC,
            lo=0,
            hi=1_000_000,
        ),
    )
    error_threshold_buffer_tokens: int = field(
        default=20_000,
        metadata=_meta(
            "Error state at base − this (the same point as the warning by default).",
            source="ERROR_THRESHOLD_BUFFER_TOKENS (services/compact/autoCompact.ts)",
            group=_AC,
            lo=0,
            hi=1_000_000,
        ),
    )
    manual_compact_buffer_tokens: int = field(
        default=3_000,
        metadata=_meta(
            "Blocking limit = E − this (or W − this, see blocking_limit_base).",
            source="MANUAL_COMPACT_BUFFER_TOKENS (services/compact/autoCompact.ts)",
            group=_AC,
            lo=0,
            hi=1_000_000,
        ),
    )
    blocking_limit_base: BlockingLimitBase = field(
        default="effective",
        metadata=_meta(
            "What the blocking buffer is taken from: 'effective' window E (2.1.75 and later) "
            "or the raw 'window' W (2.1.74 and older).",
            source="calculateTokenWarningState in the 2.1.20–2.1.88 npm bundles",
            group=_AC,
        ),
    )
    blocking_limit_override: int | None = field(
        default=None,
        metadata=_meta(
            "Absolute blocking limit in tokens; null = the computed one.",
            source="env CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE",
            group=_AC,
            lo=1,
            hi=TOKENS_MAX,
        ),
    )
    max_consecutive_autocompact_failures: int = field(
        default=3,
        metadata=_meta(
            "Circuit breaker: no more autocompact attempts after this many failures in one "
            "query() call.",
            source="MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES (services/compact/autoCompact.ts)",
            group=_AC,
            lo=1,
            hi=1_000,
        ),
    )
    max_output_tokens_for_compact: int = field(
        default=20_000,
        metadata=_meta(
            "max_tokens of the fallback (non-fork) summary call: min(this, M).",
            source="COMPACT_MAX_OUTPUT_TOKENS (utils/context.ts)",
            group=_AC,
            lo=1,
            hi=1_000_000,
        ),
    )
    compact_cache_prefix: bool = field(
        default=True,
        metadata=_meta(
            "Summarize through a fork that reads the main prompt cache; off = the direct "
            "fallback summary call.",
            source="GrowthBook tengu_compact_cache_prefix (default true)",
            group=_AC,
        ),
    )
    max_ptl_retries: int = field(
        default=3,
        metadata=_meta(
            "Prompt-too-long retries of the summary call, each dropping the oldest API rounds.",
            source="MAX_PTL_RETRIES (services/compact/compact.ts)",
            group=_AC,
            lo=0,
            hi=100,
        ),
    )
    ptl_fallback_drop_pct: float = field(
        default=0.2,
        metadata=_meta(
            "Fraction of API-round groups dropped per retry when the token gap is unknown "
            "(at least one group).",
            source="truncateHeadForPTLRetry (services/compact/compact.ts)",
            group=_AC,
            lo=0,
            hi=1,
            lo_open=True,
            fraction=True,
        ),
    )
    sm_compact_enabled: bool = field(
        default=False,
        metadata=_meta(
            "Try session-memory compaction before full LLM compaction.",
            source="GrowthBook tengu_session_memory AND tengu_sm_compact (both default false)",
            group=_AC,
        ),
    )
    sm_compact_min_tokens: int = field(
        default=10_000,
        metadata=_meta(
            "Kept tail must reach this many padded tokens (with the text-message minimum).",
            source="sessionMemoryCompact.ts minTokens",
            group=_AC,
            lo=0,
            hi=1_000_000,
        ),
    )
    sm_compact_min_text_block_messages: int = field(
        default=5,
        metadata=_meta(
            "Kept tail must hold this many messages with text blocks.",
            source="sessionMemoryCompact.ts minTextBlockMessages",
            group=_AC,
            lo=0,
            hi=10_000,
        ),
    )
    sm_compact_max_tokens: int = field(
        default=40_000,
        metadata=_meta(
            "Kept tail stops growing once it reaches this many padded tokens.",
            source="sessionMemoryCompact.ts maxTokens",
            group=_AC,
            lo=1,
            hi=1_000_000,
        ),
    )
    sm_compact_section_max_chars: int = field(
        default=8_000,
        metadata=_meta(
            "Each session-memory section is cut to this many characters in the summary.",
            source="services/SessionMemory/prompts.ts (2,000 tokens × 4)",
            group=_AC,
            lo=1,
            hi=1_000_000,
        ),
    )
    post_compact_max_files_to_restore: int = field(
        default=5,
        metadata=_meta(
            "Most recently read files re-attached after a full compaction.",
            source="POST_COMPACT_MAX_FILES_TO_RESTORE (services/compact/compact.ts)",
            group=_AC,
            lo=0,
            hi=1_000,
        ),
    )
    post_compact_max_tokens_per_file: int = field(
        default=5_000,
        metadata=_meta(
            "Read limit in tokens for each restored file.",
            source="POST_COMPACT_MAX_TOKENS_PER_FILE (services/compact/compact.ts)",
            group=_AC,
            lo=0,
            hi=1_000_000,
        ),
    )
    post_compact_token_budget: int = field(
        default=50_000,
        metadata=_meta(
            "Total rough tokens of restored file attachments.",
            source="POST_COMPACT_TOKEN_BUDGET (services/compact/compact.ts)",
            group=_AC,
            lo=0,
            hi=TOKENS_MAX,
        ),
    )
    post_compact_max_tokens_per_skill: int = field(
        default=5_000,
        metadata=_meta(
            "Each invoked skill re-attached after compaction is cut to this many tokens.",
            source="POST_COMPACT_MAX_TOKENS_PER_SKILL (services/compact/compact.ts)",
            group=_AC,
            lo=0,
            hi=1_000_000,
        ),
    )
    post_compact_skills_token_budget: int = field(
        default=25_000,
        metadata=_meta(
            "Total tokens of re-attached skills.",
            source="POST_COMPACT_SKILLS_TOKEN_BUDGET (services/compact/compact.ts)",
            group=_AC,
            lo=0,
            hi=TOKENS_MAX,
        ),
    )
    # -- tool-result persistence and per-message budget (spec §1.1, §4.1, §4.2) --
    default_max_result_size_chars: int = field(
        default=50_000,
        metadata=_meta(
            "Clamp on every tool's persistence threshold: min(declared, this).",
            source="DEFAULT_MAX_RESULT_SIZE_CHARS (constants/toolLimits.ts)",
            group=_TR,
            lo=1,
            hi=CHARS_MAX,
        ),
    )
    declared_max_result_size_chars: Mapping[str, int | None] = field(
        default=FrozenMap(
            {"Bash": 30_000, "PowerShell": 30_000, "Grep": 20_000, "McpAuth": 10_000, "Read": None}
        ),
        metadata=_meta(
            "Declared maxResultSizeChars per tool; null = Infinity (never persisted, "
            "skipped by the budget).",
            source="maxResultSizeChars of the built-in tools (tools/*)",
            group=_TR,
            lo=1,
            hi=CHARS_MAX,
        ),
    )
    default_declared_max_result_size_chars: int = field(
        default=100_000,
        metadata=_meta(
            "Declared maxResultSizeChars of every tool not listed above, MCP tools included.",
            source="maxResultSizeChars of the other built-in tools and MCPTool (tools/*)",
            group=_TR,
            lo=1,
            hi=CHARS_MAX,
        ),
    )
    per_tool_threshold_overrides: Mapping[str, int] = field(
        default=FrozenMap(),
        metadata=_meta(
            "Tool → persistence threshold replacing min(declared, clamp); may exceed the "
            "clamp. Read stays exempt.",
            source="GrowthBook tengu_satin_quoll (default {})",
            group=_TR,
            lo=1,
            hi=CHARS_MAX,
        ),
    )
    preview_size_bytes: int = field(
        default=2_000,
        metadata=_meta(
            "Preview length in JS characters, cut back to the last newline if it lies past half.",
            source="PREVIEW_SIZE_BYTES (utils/toolResultStorage.ts)",
            group=_TR,
            lo=1,
            hi=1_000_000,
        ),
    )
    per_message_budget_enabled: bool = field(
        default=False,
        metadata=_meta(
            "Enforce the aggregate tool-result budget per wire-level user message.",
            source="GrowthBook tengu_hawthorn_steeple (default false)",
            group=_TR,
        ),
    )
    per_message_budget_chars: int = field(
        default=200_000,
        metadata=_meta(
            "Budget in characters; the largest fresh results are replaced until the message fits.",
            source="MAX_TOOL_RESULTS_PER_MESSAGE_CHARS (constants/toolLimits.ts); "
            "GrowthBook tengu_hawthorn_window",
            group=_TR,
            lo=1,
            hi=CHARS_MAX,
        ),
    )
    # -- microcompact and API context management (spec §1.2, §4.4) --
    time_based_mc_enabled: bool = field(
        default=False,
        metadata=_meta(
            "Clear old compactable tool results after an idle gap (cache already expired).",
            source="GrowthBook tengu_slate_heron .enabled (default false)",
            group=_MC,
        ),
    )
    time_based_mc_gap_threshold_minutes: int = field(
        default=60,
        metadata=_meta(
            "Idle minutes since the last assistant message that trigger time-based clearing.",
            source="GrowthBook tengu_slate_heron .gapThresholdMinutes",
            group=_MC,
            lo=0,
            hi=100_000,
        ),
    )
    time_based_mc_keep_recent: int = field(
        default=5,
        metadata=_meta(
            "Most recent compactable results kept by time-based clearing (at least 1 is kept).",
            source="GrowthBook tengu_slate_heron .keepRecent",
            group=_MC,
            lo=0,
            hi=10_000,
        ),
    )
    compactable_tools: tuple[str, ...] = field(
        default=(
            "Read",
            "Bash",
            "PowerShell",
            "Grep",
            "Glob",
            "WebSearch",
            "WebFetch",
            "Edit",
            "Write",
        ),
        metadata=_meta(
            "Tools whose results time-based and cached microcompact may clear.",
            source="COMPACTABLE_TOOLS (services/compact/microCompact.ts)",
            group=_MC,
        ),
    )
    cached_mc_enabled: bool = field(
        default=False,
        metadata=_meta(
            "Model cached microcompact: server-side cache_edits deletions of old tool results.",
            source="build flag CACHED_MICROCOMPACT (ant-only; module not shipped)",
            group=_MC,
            modeled=True,
        ),
    )
    cached_mc_trigger_threshold: int = field(
        default=12,
        metadata=_meta(
            "Delete once this many compactable results are registered and not yet deleted.",
            source="cachedMCConfig triggerThreshold (value unknown, spec §11.2)",
            group=_MC,
            lo=1,
            hi=10_000,
            modeled=True,
        ),
    )
    cached_mc_keep_recent: int = field(
        default=5,
        metadata=_meta(
            "Most recent compactable results a cached-microcompact deletion keeps.",
            source="cachedMCConfig keepRecent (value unknown, spec §11.2)",
            group=_MC,
            lo=0,
            hi=10_000,
            modeled=True,
        ),
    )
    api_clear_tool_uses_enabled: bool = field(
        default=False,
        metadata=_meta(
            "Send clear_tool_uses_20250919 and model the server clearing old tool uses.",
            source="env USE_API_CLEAR_TOOL_USES (ant-only, dead in external builds)",
            group=_MC,
            modeled=True,
        ),
    )
    api_max_input_tokens: int = field(
        default=180_000,
        metadata=_meta(
            "clear_tool_uses trigger in input tokens.",
            source="DEFAULT_MAX_INPUT_TOKENS (services/compact/apiMicrocompact.ts)",
            group=_MC,
            lo=1,
            hi=TOKENS_MAX,
            modeled=True,
        ),
    )
    api_target_input_tokens: int = field(
        default=40_000,
        metadata=_meta(
            "Keep target: clear_at_least = api_max_input_tokens − this.",
            source="DEFAULT_TARGET_INPUT_TOKENS (services/compact/apiMicrocompact.ts)",
            group=_MC,
            lo=0,
            hi=TOKENS_MAX,
            modeled=True,
        ),
    )
    api_clear_tool_uses_keep: int = field(
        default=3,
        metadata=_meta(
            "Tool uses the server keeps (Claude Code sends no keep, so the API default applies).",
            source="clear_tool_uses_20250919 keep default (context-editing docs)",
            group=_MC,
            lo=0,
            hi=1_000,
            modeled=True,
        ),
    )
    thinking_clear_idle_minutes: int = field(
        default=60,
        metadata=_meta(
            "Idle minutes after which clear_thinking keeps only the last thinking turn (sticky).",
            source="CACHE_TTL_1HOUR_MS (services/api/promptCacheBreakDetection.ts)",
            group=_MC,
            lo=0,
            hi=100_000,
        ),
    )
    # -- snip (HISTORY_SNIP, ant-only; implementation not shipped, spec §4.3) --
    snip_enabled: bool = field(
        default=False,
        metadata=_meta(
            "Model snip: remove old middle messages before microcompact and autocompact.",
            source="build flag HISTORY_SNIP (ant-only; module not shipped)",
            group=_SNIP,
            modeled=True,
        ),
    )
    snip_trigger_pct: float = field(
        default=0.80,
        metadata=_meta(
            "Snip when the decision count reaches this fraction of E (below T ≈ 0.93·E, so "
            "snip gets its chance before autocompact).",
            source="ContextLab policy (real trigger unknown, spec §11.3)",
            group=_SNIP,
            lo=0,
            hi=1,
            lo_open=True,
            fraction=True,
            modeled=True,
        ),
    )
    snip_target_pct: float = field(
        default=0.60,
        metadata=_meta(
            "A snip removes the oldest eligible messages until the count is below this "
            "fraction of E.",
            source="ContextLab policy (real range selection unknown, spec §11.3)",
            group=_SNIP,
            lo=0,
            hi=1,
            lo_open=True,
            fraction=True,
            modeled=True,
        ),
    )
    snip_keep_head_messages: int = field(
        default=1,
        metadata=_meta(
            "Messages at the start that are never snipped (snip cuts middles, not prefixes).",
            source="ContextLab policy",
            group=_SNIP,
            lo=0,
            hi=100_000,
            modeled=True,
        ),
    )
    snip_keep_recent_messages: int = field(
        default=20,
        metadata=_meta(
            "Most recent messages that are never snipped.",
            source="ContextLab policy",
            group=_SNIP,
            lo=0,
            hi=100_000,
            modeled=True,
        ),
    )
    # -- context collapse (CONTEXT_COLLAPSE, ant-only; implementation not shipped, spec §4.5) --
    collapse_enabled: bool = field(
        default=False,
        metadata=_meta(
            "Model context collapse: summarize spans into placeholders; autocompact and the "
            "blocking preempt stand down.",
            source="build flag CONTEXT_COLLAPSE / env CLAUDE_CONTEXT_COLLAPSE (ant-only)",
            group=_COL,
            modeled=True,
        ),
    )
    collapse_commit_pct: float = field(
        default=0.90,
        metadata=_meta(
            "Commit staged spans once the count reaches this fraction of E.",
            source="autoCompact.ts comment: '90% commit'",
            group=_COL,
            lo=0,
            hi=1,
            lo_open=True,
            fraction=True,
            modeled=True,
        ),
    )
    collapse_blocking_pct: float = field(
        default=0.95,
        metadata=_meta(
            "Collapse synchronously (blocking spawn) once the count reaches this fraction of E.",
            source="autoCompact.ts comment: '95% blocking-spawn'",
            group=_COL,
            lo=0,
            hi=1,
            lo_open=True,
            fraction=True,
            modeled=True,
        ),
    )
    collapse_min_span_messages: int = field(
        default=6,
        metadata=_meta(
            "Shortest span worth a placeholder (the placeholder itself costs tokens).",
            source="ContextLab policy (span selection unknown, spec §11.4)",
            group=_COL,
            lo=1,
            hi=100_000,
            modeled=True,
        ),
    )
    collapse_max_span_messages: int = field(
        default=50,
        metadata=_meta(
            "Longest span one placeholder covers, so each summary stays specific.",
            source="ContextLab policy",
            group=_COL,
            lo=1,
            hi=100_000,
            modeled=True,
        ),
    )
    collapse_keep_recent_messages: int = field(
        default=20,
        metadata=_meta(
            "Most recent messages that are never collapsed.",
            source="ContextLab policy",
            group=_COL,
            lo=0,
            hi=100_000,
            modeled=True,
        ),
    )
    collapse_summary_max_tokens: int = field(
        default=500,
        metadata=_meta(
            "Length cap of one span summary.",
            source="ContextLab policy",
            group=_COL,
            lo=1,
            hi=100_000,
            modeled=True,
        ),
    )
    # -- prompt cache (spec §1.6, §6) --
    cache_lookback_blocks: int = field(
        default=20,
        metadata=_meta(
            "Blocks before each breakpoint the server searches for an earlier cache entry.",
            source="prompt-caching docs (lookback window)",
            group=_CACHE,
            lo=0,
            hi=1_000,
        ),
    )
    cache_lookback_enabled: bool = field(
        default=True,
        metadata=_meta(
            "Apply the lookback limit; off = any earlier written prefix can be hit.",
            source="prompt-caching docs (unconfirmed for Claude Code traffic, spec §11.6)",
            group=_CACHE,
        ),
    )
    cache_ttl: CacheTTL = field(
        default="auto",
        metadata=_meta(
            "Cache entry TTL: 'auto' reads it per request from the recorded usage split "
            "(ephemeral_5m / ephemeral_1h), else '5m' or '1h'.",
            source="should1hCacheTTL (services/api/claude.ts)",
            group=_CACHE,
        ),
    )
    system_cache_breakpoints: int = field(
        default=1,
        metadata=_meta(
            "System-prompt breakpoints: 1 (global cache scope) or 2 (org scope: 3P providers, "
            "MCP tools).",
            source="splitSysPromptPrefix (utils/api.ts)",
            group=_CACHE,
            lo=1,
            hi=2,
        ),
    )
    cache_global_prefix_warm: bool = field(
        default=False,
        metadata=_meta(
            "Assume the system prompt is already cached when a thread starts (Claude Code's "
            "global cache scope, or another session of the same user moments before). Off: "
            "every thread's first request writes its whole prompt.",
            source="spec §6.2 global scope; about half the corpus sessions start warm (MODELED)",
            group=_CACHE,
            modeled=True,
        ),
    )
    cache_system_prefix_share: float = field(
        default=0.7,
        metadata=_meta(
            "Share of the unseen prefix (tools, system prompt, user context) that sits before "
            "the system-prompt breakpoint; the rest (CLAUDE.md and date reminder) is cached "
            "only with the messages.",
            source="fitted on corpus reads after compactions (MODELED)",
            group=_CACHE,
            lo=0,
            hi=1,
            fraction=True,
            modeled=True,
        ),
    )
    cache_break_min_miss_tokens: int = field(
        default=2_000,
        metadata=_meta(
            "A cache-read drop counts as a break only if at least this many tokens.",
            source="MIN_CACHE_MISS_TOKENS (services/api/promptCacheBreakDetection.ts)",
            group=_CACHE,
            lo=0,
            hi=TOKENS_MAX,
        ),
    )
    cache_break_min_drop_pct: float = field(
        default=0.05,
        metadata=_meta(
            "…and only if cache read fell by more than this fraction.",
            source="promptCacheBreakDetection.ts (> 5 %)",
            group=_CACHE,
            lo=0,
            hi=1,
            fraction=True,
        ),
    )
    # -- token estimation and serialization (spec §1.4, §4.8, §5) --
    bytes_per_token: int = field(
        default=4,
        metadata=_meta(
            "Characters per token of the rough estimator: round(length / this).",
            source="BYTES_PER_TOKEN (constants/toolLimits.ts); roughTokenCountEstimation",
            group=_TOK,
            lo=1,
            hi=16,
        ),
    )
    image_max_token_size: int = field(
        default=2_000,
        metadata=_meta(
            "Flat token estimate of an image or document block.",
            source="IMAGE_MAX_TOKEN_SIZE (services/compact/microCompact.ts)",
            group=_TOK,
            lo=0,
            hi=1_000_000,
        ),
    )
    api_max_media_per_request: int = field(
        default=100,
        metadata=_meta(
            "Images/documents per request; the oldest beyond this are dropped before sending.",
            source="API_MAX_MEDIA_PER_REQUEST (constants/apiLimits.ts)",
            group=_TOK,
            lo=0,
            hi=100_000,
        ),
    )

    def __post_init__(self) -> None:
        for spec in _SPECS.values():
            value = getattr(self, spec.name)
            coerced = spec.coerce(value)
            if coerced is not value:
                object.__setattr__(self, spec.name, coerced)
        self.validate()

    def __repr__(self) -> str:
        # Seventy fields drown the one that matters; show only what differs from the defaults.
        changed = ", ".join(f"{k}={v!r}" for k, (v, _) in self.diff(_defaults()).items())
        return f"PipelineConfig({changed})"

    def validate(self) -> None:
        """Raise ``ConfigError`` for the first bad field, then for the first inconsistency."""
        for spec in _SPECS.values():
            spec.check(getattr(self, spec.name))
        _check_consistency(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable settings in declaration order (maps sorted, tuples as lists)."""
        return {name: spec.to_json(getattr(self, name)) for name, spec in _SPECS.items()}

    def replace(self, **changes: Any) -> PipelineConfig:
        """A copy with ``changes`` applied and validated; unknown names raise ``ConfigError``."""
        for name in changes:
            if name not in _SPECS:
                raise _unknown_field(name)
        return dataclasses.replace(self, **changes)

    def diff(self, other: PipelineConfig) -> dict[str, tuple[Any, Any]]:
        """``{field: (mine, theirs)}`` for every field that differs, as JSON values."""
        mine, theirs = self.to_dict(), other.to_dict()
        return {name: (mine[name], theirs[name]) for name in mine if mine[name] != theirs[name]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PipelineConfig:
        """Defaults (or the preset named by a ``preset`` key) with ``data`` applied."""
        if not isinstance(data, Mapping):
            raise ConfigError("config", f"must be a table of settings, got {type(data).__name__}")
        values = dict(data)
        for key in values:
            if not isinstance(key, str):
                raise ConfigError(repr(key), "setting names must be strings")
        preset = values.pop("preset", None)
        if preset is None:
            return cls().replace(**values)
        # presets.py imports this module, so the import can only happen at call time.
        from .presets import get_preset

        return get_preset(preset).replace(**values)

    @classmethod
    def from_toml(cls, source: str | os.PathLike[str]) -> PipelineConfig:
        """Load a TOML file (path) or TOML text; see ``read_settings``."""
        return cls.from_dict(read_settings(source, "toml"))

    @classmethod
    def from_json(cls, source: str | os.PathLike[str]) -> PipelineConfig:
        """Load a JSON file (path) or JSON text; see ``read_settings``."""
        return cls.from_dict(read_settings(source, "json"))


# ---------------------------------------------------------------------------------------------
# Field specs: types, ranges and docs derived once from the dataclass fields


@dataclass(frozen=True, slots=True)
class _Kind:
    #: "int", "float", "bool", "choice", "names" (tuple of str) or "map" (FrozenMap of int)
    base: str
    nullable: bool = False
    choices: tuple[str, ...] = ()
    #: map values may be None (Infinity)
    value_nullable: bool = False

    @property
    def label(self) -> str:
        names = {
            "int": "int",
            "float": "float",
            "bool": "bool",
            "choice": "str",
            "names": "list[str]",
        }
        if self.base == "map":
            text = "map[str, int | None]" if self.value_nullable else "map[str, int]"
        else:
            text = names[self.base]
        return text + " | None" if self.nullable else text

    @property
    def phrase(self) -> str:
        phrases = {
            "int": "an integer",
            "float": "a number",
            "bool": "true or false",
            "choice": "one of " + ", ".join(repr(c) for c in self.choices),
            "names": "a list of tool names",
            "map": "a table of tool name → integer"
            + (" or null (no limit)" if self.value_nullable else ""),
        }
        text = phrases[self.base]
        return text + " or null" if self.nullable else text


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


@dataclass(frozen=True, slots=True)
class _Spec:
    name: str
    kind: _Kind
    default: Any
    doc: str
    source: str
    group: str
    lo: float | None
    hi: float | None
    lo_open: bool
    fraction: bool
    modeled: bool

    def coerce(self, value: Any) -> Any:
        """Lossless conversions from what TOML, JSON and Python callers naturally write."""
        kind = self.kind
        if kind.base == "float" and _is_int(value):
            return float(value)
        if kind.base == "names" and isinstance(value, list):
            return tuple(value)
        if kind.base == "map" and isinstance(value, Mapping):
            # Stored as a FrozenMap whatever mapping came in, so the config stays hashable.
            # TOML has no null, so "no limit" is written as inf there (JSON: null or Infinity).
            return FrozenMap(
                {
                    k: None
                    if kind.value_nullable and isinstance(v, float) and math.isinf(v) and v > 0
                    else v
                    for k, v in value.items()
                }
            )
        return value

    def type_error(self, value: Any) -> ConfigError:
        return ConfigError(
            self.name, f"must be {self.kind.phrase}, got {value!r} ({type(value).__name__})"
        )

    def range_error(self, value: float, what: str | None = None) -> ConfigError | None:
        if self.lo is None or self.hi is None:
            return None
        above = value > self.lo if self.lo_open else value >= self.lo
        if above and value <= self.hi:
            return None
        noun = "an integer" if self.kind.base in ("int", "map") else "a number"
        lo, hi = _number(self.lo), _number(self.hi)
        bounds = f"greater than {lo} and at most {hi}" if self.lo_open else f"between {lo} and {hi}"
        prefix = f"{what} " if what else ""
        message = f"{prefix}must be {noun} {bounds}, got {value!r}"
        if self.fraction:
            message += " (a fraction: 0.9 means 90 %)"
        return ConfigError(self.name, message)

    def check(self, value: Any) -> None:
        kind = self.kind
        if value is None:
            if kind.nullable:
                return
            raise self.type_error(value)
        error: ConfigError | None = None
        if kind.base == "int":
            if not _is_int(value):
                raise self.type_error(value)
            error = self.range_error(value)
        elif kind.base == "float":
            if not isinstance(value, float):
                raise self.type_error(value)
            if not math.isfinite(value):
                raise ConfigError(self.name, f"must be a finite number, got {value!r}")
            error = self.range_error(value)
        elif kind.base == "bool":
            if not isinstance(value, bool):
                raise self.type_error(value)
        elif kind.base == "choice":
            if not isinstance(value, str) or value not in kind.choices:
                raise self.type_error(value)
        elif kind.base == "names":
            error = self._check_names(value)
        elif kind.base == "map":
            error = self._check_map(value)
        if error is not None:
            raise error

    def _check_names(self, value: Any) -> ConfigError | None:
        if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
            return self.type_error(value)
        seen: set[str] = set()
        for name in value:
            if name in seen:
                return ConfigError(self.name, f"lists {name!r} twice")
            seen.add(name)
        return None

    def _check_map(self, value: Any) -> ConfigError | None:
        if not isinstance(value, FrozenMap):
            return self.type_error(value)
        for key, item in value.items():
            if not isinstance(key, str) or not key:
                return ConfigError(self.name, f"tool names must be non-empty strings, got {key!r}")
            if item is None and self.kind.value_nullable:
                continue
            if not _is_int(item):
                wanted = (
                    "an integer or null (no limit)" if self.kind.value_nullable else "an integer"
                )
                return ConfigError(
                    self.name,
                    f"value for {key!r} must be {wanted}, got {item!r} ({type(item).__name__})",
                )
            error = self.range_error(item, f"value for {key!r}")
            if error is not None:
                return error
        return None

    def to_json(self, value: Any) -> Any:
        if isinstance(value, FrozenMap):
            return {k: value[k] for k in sorted(value)}
        if isinstance(value, tuple):
            return list(value)
        return value


def _kind_of(hint: Any) -> _Kind:
    nullable = False
    if get_origin(hint) in (types.UnionType, typing.Union):
        args = get_args(hint)
        rest = [a for a in args if a is not type(None)]
        nullable = len(rest) < len(args)
        if len(rest) != 1:
            raise TypeError(f"unsupported setting type {hint!r}")
        hint = rest[0]
    origin = get_origin(hint)
    if hint is bool:
        return _Kind("bool", nullable)
    if hint is int:
        return _Kind("int", nullable)
    if hint is float:
        return _Kind("float", nullable)
    if origin is Literal:
        return _Kind("choice", nullable, choices=tuple(str(a) for a in get_args(hint)))
    if origin is tuple and get_args(hint) == (str, ...):
        return _Kind("names", nullable)
    if origin is Mapping:
        key_hint, value_hint = get_args(hint)
        if key_hint is not str:
            raise TypeError(f"unsupported map key type {key_hint!r}")
        value_kind = _kind_of(value_hint)
        if value_kind.base != "int":
            raise TypeError(f"unsupported map value type {value_hint!r}")
        return _Kind("map", nullable, value_nullable=value_kind.nullable)
    raise TypeError(f"unsupported setting type {hint!r}")


def _build_specs() -> dict[str, _Spec]:
    hints = get_type_hints(PipelineConfig)
    specs: dict[str, _Spec] = {}
    for f in fields(PipelineConfig):
        meta = f.metadata
        kind = _kind_of(hints[f.name])
        # Every number a user can type gets explicit bounds; a new field without them is a bug.
        if kind.base in ("int", "float", "map") and (meta["lo"] is None or meta["hi"] is None):
            raise TypeError(f"setting {f.name} has no allowed range")
        specs[f.name] = _Spec(
            name=f.name,
            kind=kind,
            default=f.default,
            doc=meta["doc"],
            source=meta["source"],
            group=meta["group"],
            lo=meta["lo"],
            hi=meta["hi"],
            lo_open=meta["lo_open"],
            fraction=meta["fraction"],
            modeled=meta["modeled"],
        )
    return specs


_SPECS = _build_specs()

#: One-line documentation of every setting, in declaration order.
FIELD_DOCS: dict[str, str] = {name: spec.doc for name, spec in _SPECS.items()}

#: Allowed ``(min, max)`` of every numeric setting (for maps: of each value). A minimum is
#: exclusive where ``field_specs()`` says ``min_exclusive``.
FIELD_RANGES: dict[str, tuple[float, float]] = {
    name: (spec.lo, spec.hi)
    for name, spec in _SPECS.items()
    if spec.lo is not None and spec.hi is not None
}


def field_specs() -> list[dict[str, Any]]:
    """One dict per setting, in declaration order, for building forms and docs.

    Keys: ``name, type, default, doc, min, max, modeled`` plus ``min_exclusive, nullable,
    choices, group, source``.
    """
    return [
        {
            "name": spec.name,
            "type": spec.kind.label,
            "default": spec.to_json(spec.default),
            "doc": spec.doc,
            "min": spec.lo,
            "max": spec.hi,
            "modeled": spec.modeled,
            "min_exclusive": spec.lo_open,
            "nullable": spec.kind.nullable,
            "choices": list(spec.kind.choices),
            "group": spec.group,
            "source": spec.source,
        }
        for spec in _SPECS.values()
    ]


@functools.cache
def _defaults() -> PipelineConfig:
    return PipelineConfig()


def _unknown_field(name: str) -> ConfigError:
    import difflib  # only for this message

    # Users often type the TypeScript constant (AUTOCOMPACT_BUFFER_TOKENS); lowercase first.
    close = difflib.get_close_matches(name.lower(), list(_SPECS), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(name, f"unknown setting{hint}")


def _check_consistency(config: PipelineConfig) -> None:
    """Cross-field rules. The window check uses the fallback model's max output; the per-model
    check happens again in ``thresholds.compute_thresholds``."""
    window = config.context_window
    window_field = "context_window"
    if config.auto_compact_window is not None and config.auto_compact_window < window:
        window, window_field = config.auto_compact_window, "auto_compact_window"
    max_output = config.max_output_tokens
    if max_output is None:
        max_output = MAX_OUTPUT_TOKENS_DEFAULT
        if config.otk_slot_cap_enabled:
            max_output = min(max_output, config.capped_default_max_tokens)
    check_effective_window(config, window, max_output, window_field)

    def require(ok: bool, name: str, message: str) -> None:
        if not ok:
            raise ConfigError(name, message)

    c = config
    require(
        c.sm_compact_min_tokens <= c.sm_compact_max_tokens,
        "sm_compact_min_tokens",
        f"must not exceed sm_compact_max_tokens ({c.sm_compact_max_tokens}), "
        f"got {c.sm_compact_min_tokens}",
    )
    require(
        c.cached_mc_keep_recent < c.cached_mc_trigger_threshold,
        "cached_mc_keep_recent",
        f"must be smaller than cached_mc_trigger_threshold ({c.cached_mc_trigger_threshold}) "
        f"or nothing is ever deleted, got {c.cached_mc_keep_recent}",
    )
    require(
        c.api_target_input_tokens < c.api_max_input_tokens,
        "api_target_input_tokens",
        f"must be smaller than api_max_input_tokens ({c.api_max_input_tokens}) so that "
        f"clear_at_least is positive, got {c.api_target_input_tokens}",
    )
    require(
        c.snip_target_pct < c.snip_trigger_pct,
        "snip_target_pct",
        f"must be smaller than snip_trigger_pct ({c.snip_trigger_pct:g}), got {c.snip_target_pct:g}",
    )
    require(
        c.collapse_commit_pct < c.collapse_blocking_pct,
        "collapse_commit_pct",
        f"must be smaller than collapse_blocking_pct ({c.collapse_blocking_pct:g}), "
        f"got {c.collapse_commit_pct:g}",
    )
    require(
        c.collapse_min_span_messages <= c.collapse_max_span_messages,
        "collapse_min_span_messages",
        f"must not exceed collapse_max_span_messages ({c.collapse_max_span_messages}), "
        f"got {c.collapse_min_span_messages}",
    )


def reserved_output(config: PipelineConfig, max_output: int) -> int:
    """Tokens taken off the window for the model's output (``reservedTokensForSummary``)."""
    if config.reserve_full_max_output:
        return max_output
    return min(max_output, config.max_output_tokens_for_summary)


def check_effective_window(
    config: PipelineConfig, window: int, max_output: int, window_field: str = "context_window"
) -> int:
    """The effective window ``window − reserve``; ``ConfigError`` if it leaves no room for the
    autocompact or blocking buffers."""
    reserved = reserved_output(config, max_output)
    effective = window - reserved
    if effective <= 0:
        raise ConfigError(
            window_field,
            f"leaves no effective window: {window} − {reserved} reserved for output = {effective}",
        )
    where = f"the effective window ({effective} = {window} − {reserved} reserved for output)"
    for name in ("autocompact_buffer_tokens", "manual_compact_buffer_tokens"):
        value = getattr(config, name)
        if value >= effective:
            raise ConfigError(name, f"must be smaller than {where}, got {value}")
    return effective


# ---------------------------------------------------------------------------------------------
# Reading settings files


def read_settings(
    source: str | os.PathLike[str], fmt: SettingsFormat | None = None
) -> dict[str, Any]:
    """Read TOML or JSON settings from a path or from text into one flat mapping.

    Settings may sit at the top level or in a ``[pipeline]`` table (or both, without repeats).
    A ``preset`` key is kept: ``PipelineConfig.from_dict`` starts from that preset, and
    ``presets.resolve_config`` also understands ``"auto"``. ``fmt`` defaults to the file suffix,
    and for text to JSON when it starts with ``{``, else TOML. TOML has no null: write ``inf``
    for "no limit" in ``declared_max_result_size_chars`` and leave optional settings out.
    """
    text, label, suffix = _read_source(source)
    if fmt is None:
        if suffix in (".toml", ".json"):
            fmt = "json" if suffix == ".json" else "toml"
        else:
            fmt = "json" if text.lstrip().startswith("{") else "toml"
    data: Any
    if fmt == "toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(label, f"invalid TOML: {exc}") from exc
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                label, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from exc
    if not isinstance(data, dict):
        raise ConfigError(label, f"must hold a table of settings, got {type(data).__name__}")
    table = data.get("pipeline")
    if table is None:
        return data
    if not isinstance(table, dict):
        raise ConfigError("pipeline", f"must be a table of settings, got {type(table).__name__}")
    top = {k: v for k, v in data.items() if k != "pipeline"}
    for name in top:
        if name in table:
            raise ConfigError(name, "is set both at the top level and in [pipeline]")
    return {**top, **table}


def _read_source(source: str | os.PathLike[str]) -> tuple[str, str, str]:
    """``(text, label for errors, file suffix)``; a str is a path only if it names one."""
    if isinstance(source, str):
        one_line = bool(source.strip()) and "\n" not in source
        is_path = one_line and (source.endswith((".toml", ".json")) or os.path.isfile(source))
        if not is_path:
            return source, "config", ""
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(str(path), "file not found") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read: {exc}") from exc
    return text, str(path), path.suffix.lower()
