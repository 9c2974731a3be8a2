"""Every threshold and switch of the context pipeline, as one validated, immutable value.

Field names are Claude Code's own constants in snake_case (``AUTOCOMPACT_BUFFER_TOKENS`` →
``autocompact_buffer_tokens``). Each field's annotation is its whole schema, read by msgspec:
the type, the allowed range (``ge``/``gt``/``le``), a description and, in ``extra``, the
constant, env var or remote flag it stands for (pipeline-spec §1, facts "(a) Constants table").
Defaults are the public 2.1.88 build. Fields marked *modeled* drive steps whose Claude Code
implementation is not public (snip, context collapse, cached microcompact, API tool clearing):
their values are ContextLab's policy, not facts.

msgspec decides whether a value is valid; this module only words the answer, so that the
forms, the API and the CLI all report ``FieldError("<field>", "must be …, got …")`` the same
way. Named starting points (``data/presets.toml``) are read here too; which one matches a
Claude Code version lives in ``presets``, and the threshold arithmetic in ``thresholds``.
"""

import dataclasses
import functools
import json
import math
import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import msgspec
import msgspec.inspect as schema_info
from msgspec import Meta

from .input.json_line import decode_json_line

V = TypeVar("V")

CacheTTL = Literal["auto", "5m", "1h"]
BlockingLimitBase = Literal["effective", "window"]
SettingsFormat = Literal["toml", "json"]

#: ``MAX_OUTPUT_TOKENS_DEFAULT`` (utils/context.ts): what a model missing from the table gets.
#: Validation uses it because a config is checked before any model is known.
MAX_OUTPUT_TOKENS_DEFAULT = 32_000


class FieldError(ValueError):
    """An input is wrong: unknown, of the wrong type, out of range or inconsistent with another.

    The one error type for "this field is wrong", from the engine up to the forms and the API.
    ``field`` names the input (a form attaches the message to it; the API puts it in
    ``detail[].loc``); ``str()`` reads ``"<field>: <message>"``.
    """

    def __init__(self, field: str, message: str) -> None:
        # Both parts go to ValueError so the exception pickles (Celery, multiprocessing).
        super().__init__(field, message)
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"

    def within(self, prefix: str) -> "FieldError":
        """The same error for a field nested under ``prefix`` (``a`` + ``config.x`` → ``a.config.x``)."""
        return FieldError(f"{prefix}.{self.field}" if prefix else self.field, self.message)


#: The engine's name for ``FieldError`` (the same class), kept for callers and settings files.
ConfigError = FieldError


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

    def __reduce__(self) -> tuple[type["FrozenMap[V]"], tuple[dict[str, V]]]:
        return (type(self), (self._data,))


def _setting(
    doc: str,
    *,
    source: str,
    group: str,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    fraction: bool = False,
    modeled: bool = False,
) -> Meta:
    """One field's schema: msgspec checks the range; the rest documents the field for forms."""
    extra = {"source": source, "group": group, "fraction": fraction, "modeled": modeled}
    # msgspec's signature takes a lower bound as either gt or ge, not both
    if gt is not None:
        return Meta(gt=gt, le=le, description=doc, extra=extra)
    return Meta(ge=ge, le=le, description=doc, extra=extra)


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

#: A tool name in a list or table of tools.
_ToolName = Annotated[str, Meta(min_length=1)]
#: A per-tool size in characters (``maxResultSizeChars``, persistence thresholds).
_ToolChars = Annotated[int, Meta(ge=1, le=CHARS_MAX)]


@dataclass(frozen=True, slots=True, repr=False)
class PipelineConfig:
    """All thresholds and switches of one pipeline run; construction validates (``FieldError``)."""

    # -- context window and output reserve (spec §1.3, §1.8, §12) --
    context_window: Annotated[
        int,
        _setting(
            "Context window W in tokens; a model id containing [1m] always gets 1,000,000.",
            source="MODEL_CONTEXT_WINDOW_DEFAULT (utils/context.ts)",
            group=_W,
            ge=10_000,
            le=TOKENS_MAX,
        ),
    ] = 200_000
    window_from_records: Annotated[
        bool,
        _setting(
            "Each thread's window from its own records: a recorded prompt above 200k with no "
            "automatic compaction below 200k shows the 1M window, an automatic compaction "
            "below 200k the 200k one; a thread whose records show neither keeps context_window. "
            "The auto preset turns it on once a recorded prompt passed 200k (no thread can "
            "show a window before), unless context_window is set.",
            source="the [1m] suffix is not in message.model; a branch or subagent can run in "
            "another process with another window (issue #9 identity, gmeligio branch-1)",
            group=_W,
            modeled=True,
        ),
    ] = False
    max_output_tokens: (
        Annotated[
            int,
            _setting(
                "Max output tokens M; null = the model's default from the model table, always capped "
                "at the model's upper limit.",
                source="env CLAUDE_CODE_MAX_OUTPUT_TOKENS",
                group=_W,
                ge=1,
                le=1_000_000,
            ),
        ]
        | None
    ) = None
    max_output_tokens_for_summary: Annotated[
        int,
        _setting(
            "Cap on the output reserve: effective window E = W − min(M, this).",
            source="MAX_OUTPUT_TOKENS_FOR_SUMMARY (services/compact/autoCompact.ts)",
            group=_W,
            ge=1,
            le=1_000_000,
        ),
    ] = 20_000
    reserve_full_max_output: Annotated[
        bool,
        _setting(
            "Reserve the whole M (E = W − M, no 20,000 cap), as Claude Code 2.1.20 and older did.",
            source="getEffectiveContextWindowSize in the 2.1.20 npm bundle (spec §12)",
            group=_W,
        ),
    ] = False
    auto_compact_window: (
        Annotated[
            int,
            _setting(
                "Caps the window before the reserve is taken off: W = min(W, this); null = no cap.",
                source="env CLAUDE_CODE_AUTO_COMPACT_WINDOW (2.1.75 and later)",
                group=_W,
                ge=1_000,
                le=TOKENS_MAX,
            ),
        ]
        | None
    ) = None
    otk_slot_cap_enabled: Annotated[
        bool,
        _setting(
            "Cap the model's default M at capped_default_max_tokens (so E = W − 8,000).",
            source="GrowthBook tengu_otk_slot_v1 (default false)",
            group=_W,
        ),
    ] = False
    capped_default_max_tokens: Annotated[
        int,
        _setting(
            "Default M while the output-slot cap is on.",
            source="CAPPED_DEFAULT_MAX_TOKENS (utils/context.ts)",
            group=_W,
            ge=1,
            le=1_000_000,
        ),
    ] = 8_000
    # -- autocompact, blocking limit, compaction (spec §1.3, §4.6, §4.7) --
    autocompact_enabled: Annotated[
        bool,
        _setting(
            "Autocompact on (the user's switch; context collapse also suppresses it).",
            source="config autoCompactEnabled; env DISABLE_COMPACT / DISABLE_AUTO_COMPACT",
            group=_AC,
        ),
    ] = True
    autocompact_buffer_tokens: Annotated[
        int,
        _setting(
            "Autocompact threshold T = E − this.",
            source="AUTOCOMPACT_BUFFER_TOKENS (services/compact/autoCompact.ts)",
            group=_AC,
            ge=0,
            le=1_000_000,
        ),
    ] = 13_000
    autocompact_pct_override: (
        Annotated[
            float,
            _setting(
                "Percent of E (0 < pct ≤ 100): T = min(floor(E·pct/100), E − buffer), so it can only "
                "lower T.",
                source="env CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
                group=_AC,
                gt=0,
                le=100,
            ),
        ]
        | None
    ) = None
    warning_threshold_buffer_tokens: Annotated[
        int,
        _setting(
            "Warning state at base − this (base = T, or E when autocompact is off).",
            source="WARNING_THRESHOLD_BUFFER_TOKENS (services/compact/autoCompact.ts)",
            group=_AC,
            ge=0,
            le=1_000_000,
        ),
    ] = 20_000
    error_threshold_buffer_tokens: Annotated[
        int,
        _setting(
            "Error state at base − this (the same point as the warning by default).",
            source="ERROR_THRESHOLD_BUFFER_TOKENS (services/compact/autoCompact.ts)",
            group=_AC,
            ge=0,
            le=1_000_000,
        ),
    ] = 20_000
    manual_compact_buffer_tokens: Annotated[
        int,
        _setting(
            "Blocking limit = E − this (or W − this, see blocking_limit_base).",
            source="MANUAL_COMPACT_BUFFER_TOKENS (services/compact/autoCompact.ts)",
            group=_AC,
            ge=0,
            le=1_000_000,
        ),
    ] = 3_000
    blocking_limit_base: Annotated[
        BlockingLimitBase,
        _setting(
            "What the blocking buffer is taken from: 'effective' window E (2.1.75 and later) or "
            "the raw 'window' W (2.1.74 and older).",
            source="calculateTokenWarningState in the 2.1.20–2.1.88 npm bundles",
            group=_AC,
        ),
    ] = "effective"
    blocking_limit_override: (
        Annotated[
            int,
            _setting(
                "Absolute blocking limit in tokens; null = the computed one.",
                source="env CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE",
                group=_AC,
                ge=1,
                le=TOKENS_MAX,
            ),
        ]
        | None
    ) = None
    max_consecutive_autocompact_failures: Annotated[
        int,
        _setting(
            "Circuit breaker: no more autocompact attempts after this many failures in one query()"
            " call.",
            source="MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES (services/compact/autoCompact.ts)",
            group=_AC,
            ge=1,
            le=1_000,
        ),
    ] = 3
    max_output_tokens_for_compact: Annotated[
        int,
        _setting(
            "max_tokens of the fallback (non-fork) summary call: min(this, M).",
            source="COMPACT_MAX_OUTPUT_TOKENS (utils/context.ts)",
            group=_AC,
            ge=1,
            le=1_000_000,
        ),
    ] = 20_000
    compact_cache_prefix: Annotated[
        bool,
        _setting(
            "Summarize through a fork that reads the main prompt cache; off = the direct fallback "
            "summary call.",
            source="GrowthBook tengu_compact_cache_prefix (default true)",
            group=_AC,
        ),
    ] = True
    max_ptl_retries: Annotated[
        int,
        _setting(
            "Prompt-too-long retries of the summary call, each dropping the oldest API rounds.",
            source="MAX_PTL_RETRIES (services/compact/compact.ts)",
            group=_AC,
            ge=0,
            le=100,
        ),
    ] = 3
    ptl_fallback_drop_pct: Annotated[
        float,
        _setting(
            "Fraction of API-round groups dropped per retry when the token gap is unknown (at "
            "least one group).",
            source="truncateHeadForPTLRetry (services/compact/compact.ts)",
            group=_AC,
            gt=0,
            le=1,
            fraction=True,
        ),
    ] = 0.2
    sm_compact_enabled: Annotated[
        bool,
        _setting(
            "Try session-memory compaction before full LLM compaction.",
            source="GrowthBook tengu_session_memory AND tengu_sm_compact (both default false)",
            group=_AC,
        ),
    ] = False
    sm_compact_min_tokens: Annotated[
        int,
        _setting(
            "Kept tail must reach this many padded tokens (with the text-message minimum).",
            source="sessionMemoryCompact.ts minTokens",
            group=_AC,
            ge=0,
            le=1_000_000,
        ),
    ] = 10_000
    sm_compact_min_text_block_messages: Annotated[
        int,
        _setting(
            "Kept tail must hold this many messages with text blocks.",
            source="sessionMemoryCompact.ts minTextBlockMessages",
            group=_AC,
            ge=0,
            le=10_000,
        ),
    ] = 5
    sm_compact_max_tokens: Annotated[
        int,
        _setting(
            "Kept tail stops growing once it reaches this many padded tokens.",
            source="sessionMemoryCompact.ts maxTokens",
            group=_AC,
            ge=1,
            le=1_000_000,
        ),
    ] = 40_000
    sm_compact_section_max_chars: Annotated[
        int,
        _setting(
            "Each session-memory section is cut to this many characters in the summary.",
            source="services/SessionMemory/prompts.ts (2,000 tokens × 4)",
            group=_AC,
            ge=1,
            le=1_000_000,
        ),
    ] = 8_000
    post_compact_max_files_to_restore: Annotated[
        int,
        _setting(
            "Most recently read files re-attached after a full compaction.",
            source="POST_COMPACT_MAX_FILES_TO_RESTORE (services/compact/compact.ts)",
            group=_AC,
            ge=0,
            le=1_000,
        ),
    ] = 5
    post_compact_max_tokens_per_file: Annotated[
        int,
        _setting(
            "Read limit in tokens for each restored file.",
            source="POST_COMPACT_MAX_TOKENS_PER_FILE (services/compact/compact.ts)",
            group=_AC,
            ge=0,
            le=1_000_000,
        ),
    ] = 5_000
    post_compact_token_budget: Annotated[
        int,
        _setting(
            "Total rough tokens of restored file attachments.",
            source="POST_COMPACT_TOKEN_BUDGET (services/compact/compact.ts)",
            group=_AC,
            ge=0,
            le=TOKENS_MAX,
        ),
    ] = 50_000
    post_compact_max_tokens_per_skill: Annotated[
        int,
        _setting(
            "Each invoked skill re-attached after compaction is cut to this many tokens.",
            source="POST_COMPACT_MAX_TOKENS_PER_SKILL (services/compact/compact.ts)",
            group=_AC,
            ge=0,
            le=1_000_000,
        ),
    ] = 5_000
    post_compact_skills_token_budget: Annotated[
        int,
        _setting(
            "Total tokens of re-attached skills.",
            source="POST_COMPACT_SKILLS_TOKEN_BUDGET (services/compact/compact.ts)",
            group=_AC,
            ge=0,
            le=TOKENS_MAX,
        ),
    ] = 25_000
    # -- tool-result persistence and per-message budget (spec §1.1, §4.1, §4.2) --
    default_max_result_size_chars: Annotated[
        int,
        _setting(
            "Clamp on every tool's persistence threshold: min(declared, this).",
            source="DEFAULT_MAX_RESULT_SIZE_CHARS (constants/toolLimits.ts)",
            group=_TR,
            ge=1,
            le=CHARS_MAX,
        ),
    ] = 50_000
    declared_max_result_size_chars: Annotated[
        Mapping[_ToolName, _ToolChars | None],
        _setting(
            "Declared maxResultSizeChars per tool; null = Infinity (never persisted, skipped by "
            "the budget).",
            source="maxResultSizeChars of the built-in tools (tools/*)",
            group=_TR,
        ),
    ] = FrozenMap(
        {"Bash": 30000, "PowerShell": 30000, "Grep": 20000, "McpAuth": 10000, "Read": None}
    )
    default_declared_max_result_size_chars: Annotated[
        int,
        _setting(
            "Declared maxResultSizeChars of every tool not listed above, MCP tools included.",
            source="maxResultSizeChars of the other built-in tools and MCPTool (tools/*)",
            group=_TR,
            ge=1,
            le=CHARS_MAX,
        ),
    ] = 100_000
    per_tool_threshold_overrides: Annotated[
        Mapping[_ToolName, _ToolChars],
        _setting(
            "Tool → persistence threshold replacing min(declared, clamp); may exceed the clamp. "
            "Read stays exempt.",
            source="GrowthBook tengu_satin_quoll (default {})",
            group=_TR,
        ),
    ] = FrozenMap()
    preview_size_bytes: Annotated[
        int,
        _setting(
            "Preview length in JS characters, cut back to the last newline if it lies past half.",
            source="PREVIEW_SIZE_BYTES (utils/toolResultStorage.ts)",
            group=_TR,
            ge=1,
            le=1_000_000,
        ),
    ] = 2_000
    per_message_budget_enabled: Annotated[
        bool,
        _setting(
            "Enforce the aggregate tool-result budget per wire-level user message.",
            source="GrowthBook tengu_hawthorn_steeple (default false)",
            group=_TR,
        ),
    ] = False
    per_message_budget_chars: Annotated[
        int,
        _setting(
            "Budget in characters; the largest fresh results are replaced until the message fits.",
            source="MAX_TOOL_RESULTS_PER_MESSAGE_CHARS (constants/toolLimits.ts); GrowthBook "
            "tengu_hawthorn_window",
            group=_TR,
            ge=1,
            le=CHARS_MAX,
        ),
    ] = 200_000
    # -- microcompact and API context management (spec §1.2, §4.4) --
    time_based_mc_enabled: Annotated[
        bool,
        _setting(
            "Clear old compactable tool results after an idle gap (cache already expired).",
            source="GrowthBook tengu_slate_heron .enabled (default false)",
            group=_MC,
        ),
    ] = False
    time_based_mc_gap_threshold_minutes: Annotated[
        int,
        _setting(
            "Idle minutes since the last assistant message that trigger time-based clearing.",
            source="GrowthBook tengu_slate_heron .gapThresholdMinutes",
            group=_MC,
            ge=0,
            le=100_000,
        ),
    ] = 60
    time_based_mc_keep_recent: Annotated[
        int,
        _setting(
            "Most recent compactable results kept by time-based clearing (at least 1 is kept).",
            source="GrowthBook tengu_slate_heron .keepRecent",
            group=_MC,
            ge=0,
            le=10_000,
        ),
    ] = 5
    compactable_tools: Annotated[
        tuple[_ToolName, ...],
        _setting(
            "Tools whose results time-based and cached microcompact may clear.",
            source="COMPACTABLE_TOOLS (services/compact/microCompact.ts)",
            group=_MC,
        ),
    ] = (
        "Read",
        "Bash",
        "PowerShell",
        "Grep",
        "Glob",
        "WebSearch",
        "WebFetch",
        "Edit",
        "Write",
    )
    cached_mc_enabled: Annotated[
        bool,
        _setting(
            "Model cached microcompact: server-side cache_edits deletions of old tool results.",
            source="build flag CACHED_MICROCOMPACT (ant-only; module not shipped)",
            group=_MC,
            modeled=True,
        ),
    ] = False
    cached_mc_trigger_threshold: Annotated[
        int,
        _setting(
            "Delete once this many compactable results are registered and not yet deleted.",
            source="cachedMCConfig triggerThreshold (value unknown, spec §11.2)",
            group=_MC,
            ge=1,
            le=10_000,
            modeled=True,
        ),
    ] = 12
    cached_mc_keep_recent: Annotated[
        int,
        _setting(
            "Most recent compactable results a cached-microcompact deletion keeps.",
            source="cachedMCConfig keepRecent (value unknown, spec §11.2)",
            group=_MC,
            ge=0,
            le=10_000,
            modeled=True,
        ),
    ] = 5
    api_clear_tool_uses_enabled: Annotated[
        bool,
        _setting(
            "Send clear_tool_uses_20250919 and model the server clearing old tool uses.",
            source="env USE_API_CLEAR_TOOL_USES (ant-only, dead in external builds)",
            group=_MC,
            modeled=True,
        ),
    ] = False
    api_max_input_tokens: Annotated[
        int,
        _setting(
            "clear_tool_uses trigger in input tokens.",
            source="DEFAULT_MAX_INPUT_TOKENS (services/compact/apiMicrocompact.ts)",
            group=_MC,
            ge=1,
            le=TOKENS_MAX,
            modeled=True,
        ),
    ] = 180_000
    api_target_input_tokens: Annotated[
        int,
        _setting(
            "Keep target: clear_at_least = api_max_input_tokens − this.",
            source="DEFAULT_TARGET_INPUT_TOKENS (services/compact/apiMicrocompact.ts)",
            group=_MC,
            ge=0,
            le=TOKENS_MAX,
            modeled=True,
        ),
    ] = 40_000
    api_clear_tool_uses_keep: Annotated[
        int,
        _setting(
            "Tool uses the server keeps (Claude Code sends no keep, so the API default applies).",
            source="clear_tool_uses_20250919 keep default (context-editing docs)",
            group=_MC,
            ge=0,
            le=1_000,
            modeled=True,
        ),
    ] = 3
    thinking_clear_idle_minutes: Annotated[
        int,
        _setting(
            "Idle minutes after which clear_thinking keeps only the last thinking turn (sticky).",
            source="CACHE_TTL_1HOUR_MS (services/api/promptCacheBreakDetection.ts)",
            group=_MC,
            ge=0,
            le=100_000,
        ),
    ] = 60
    # -- snip (HISTORY_SNIP, ant-only; implementation not shipped, spec §4.3) --
    snip_enabled: Annotated[
        bool,
        _setting(
            "Model snip: remove old middle messages before microcompact and autocompact.",
            source="build flag HISTORY_SNIP (ant-only; module not shipped)",
            group=_SNIP,
            modeled=True,
        ),
    ] = False
    snip_trigger_pct: Annotated[
        float,
        _setting(
            "Snip when the decision count reaches this fraction of E (below T ≈ 0.93·E, so snip "
            "gets its chance before autocompact).",
            source="ContextLab policy (real trigger unknown, spec §11.3)",
            group=_SNIP,
            gt=0,
            le=1,
            fraction=True,
            modeled=True,
        ),
    ] = 0.8
    snip_target_pct: Annotated[
        float,
        _setting(
            "A snip removes the oldest eligible messages until the count is below this fraction of"
            " E.",
            source="ContextLab policy (real range selection unknown, spec §11.3)",
            group=_SNIP,
            gt=0,
            le=1,
            fraction=True,
            modeled=True,
        ),
    ] = 0.6
    snip_keep_head_messages: Annotated[
        int,
        _setting(
            "Messages at the start that are never snipped (snip cuts middles, not prefixes).",
            source="ContextLab policy",
            group=_SNIP,
            ge=0,
            le=100_000,
            modeled=True,
        ),
    ] = 1
    snip_keep_recent_messages: Annotated[
        int,
        _setting(
            "Most recent messages that are never snipped.",
            source="ContextLab policy",
            group=_SNIP,
            ge=0,
            le=100_000,
            modeled=True,
        ),
    ] = 20
    # -- context collapse (CONTEXT_COLLAPSE, ant-only; implementation not shipped, spec §4.5) --
    collapse_enabled: Annotated[
        bool,
        _setting(
            "Model context collapse: summarize spans into placeholders; autocompact and the "
            "blocking preempt stand down.",
            source="build flag CONTEXT_COLLAPSE / env CLAUDE_CONTEXT_COLLAPSE (ant-only)",
            group=_COL,
            modeled=True,
        ),
    ] = False
    collapse_commit_pct: Annotated[
        float,
        _setting(
            "Commit staged spans once the count reaches this fraction of E.",
            source="autoCompact.ts comment: '90% commit'",
            group=_COL,
            gt=0,
            le=1,
            fraction=True,
            modeled=True,
        ),
    ] = 0.9
    collapse_blocking_pct: Annotated[
        float,
        _setting(
            "Collapse synchronously (blocking spawn) once the count reaches this fraction of E.",
            source="autoCompact.ts comment: '95% blocking-spawn'",
            group=_COL,
            gt=0,
            le=1,
            fraction=True,
            modeled=True,
        ),
    ] = 0.95
    collapse_min_span_messages: Annotated[
        int,
        _setting(
            "Shortest span worth a placeholder (the placeholder itself costs tokens).",
            source="ContextLab policy (span selection unknown, spec §11.4)",
            group=_COL,
            ge=1,
            le=100_000,
            modeled=True,
        ),
    ] = 6
    collapse_max_span_messages: Annotated[
        int,
        _setting(
            "Longest span one placeholder covers, so each summary stays specific.",
            source="ContextLab policy",
            group=_COL,
            ge=1,
            le=100_000,
            modeled=True,
        ),
    ] = 50
    collapse_keep_recent_messages: Annotated[
        int,
        _setting(
            "Most recent messages that are never collapsed.",
            source="ContextLab policy",
            group=_COL,
            ge=0,
            le=100_000,
            modeled=True,
        ),
    ] = 20
    collapse_summary_max_tokens: Annotated[
        int,
        _setting(
            "Length cap of one span summary.",
            source="ContextLab policy",
            group=_COL,
            ge=1,
            le=100_000,
            modeled=True,
        ),
    ] = 500
    # -- prompt cache (spec §1.6, §6) --
    cache_lookback_blocks: Annotated[
        int,
        _setting(
            "Blocks before each breakpoint the server searches for an earlier cache entry.",
            source="prompt-caching docs (lookback window)",
            group=_CACHE,
            ge=0,
            le=1_000,
        ),
    ] = 20
    cache_lookback_enabled: Annotated[
        bool,
        _setting(
            "Apply the lookback limit; off = any earlier written prefix can be hit.",
            source="prompt-caching docs (unconfirmed for Claude Code traffic, spec §11.6)",
            group=_CACHE,
        ),
    ] = True
    cache_ttl: Annotated[
        CacheTTL,
        _setting(
            "Cache entry TTL: 'auto' reads it per request from the recorded usage split "
            "(ephemeral_5m / ephemeral_1h), else '5m' or '1h'.",
            source="should1hCacheTTL (services/api/claude.ts)",
            group=_CACHE,
        ),
    ] = "auto"
    system_cache_breakpoints: Annotated[
        int,
        _setting(
            "System-prompt breakpoints: 1 (global cache scope) or 2 (org scope: 3P providers, MCP "
            "tools).",
            source="splitSysPromptPrefix (utils/api.ts)",
            group=_CACHE,
            ge=1,
            le=2,
        ),
    ] = 1
    cache_global_prefix_warm: Annotated[
        bool,
        _setting(
            "Assume the system prompt is already cached when a thread starts (Claude Code's global"
            " cache scope, or another session of the same user moments before). Off: every "
            "thread's first request writes its whole prompt.",
            source="spec §6.2 global scope; about half the corpus sessions start warm (MODELED)",
            group=_CACHE,
            modeled=True,
        ),
    ] = False
    cache_system_prefix_share: Annotated[
        float,
        _setting(
            "Share of the unseen prefix (tools, system prompt, user context) that sits before the "
            "system-prompt breakpoint; the rest (CLAUDE.md and date reminder) is cached only with "
            "the messages. A thread whose first request read a warm prefix shorter than the "
            "unseen prefix uses that read instead (it ends at the breakpoint).",
            source="fitted on corpus reads after compactions (MODELED)",
            group=_CACHE,
            ge=0,
            le=1,
            fraction=True,
            modeled=True,
        ),
    ] = 0.7
    cache_recorded_server_misses: Annotated[
        bool,
        _setting(
            "Take the cache misses the recorded usage shows and nothing in the transcript "
            "explains (the read fell short of the whole cached prefix by a break, below) as "
            "server-side, and meet them at the same request in a what-if replay. Off: the "
            "cache model's estimate alone.",
            source="promptCacheBreakDetection.ts: a drop with no client-side change is "
            "'likely server-side'",
            group=_CACHE,
        ),
    ] = True
    cache_break_min_miss_tokens: Annotated[
        int,
        _setting(
            "A cache-read drop counts as a break only if at least this many tokens.",
            source="MIN_CACHE_MISS_TOKENS (services/api/promptCacheBreakDetection.ts)",
            group=_CACHE,
            ge=0,
            le=TOKENS_MAX,
        ),
    ] = 2_000
    cache_break_min_drop_pct: Annotated[
        float,
        _setting(
            "…and only if cache read fell by more than this fraction.",
            source="promptCacheBreakDetection.ts (> 5 %)",
            group=_CACHE,
            ge=0,
            le=1,
            fraction=True,
        ),
    ] = 0.05
    # -- token estimation and serialization (spec §1.4, §4.8, §5) --
    bytes_per_token: Annotated[
        int,
        _setting(
            "Characters per token of the rough estimator: round(length / this).",
            source="BYTES_PER_TOKEN (constants/toolLimits.ts); roughTokenCountEstimation",
            group=_TOK,
            ge=1,
            le=16,
        ),
    ] = 4
    image_max_token_size: Annotated[
        int,
        _setting(
            "Flat token estimate of an image or document block.",
            source="IMAGE_MAX_TOKEN_SIZE (services/compact/microCompact.ts)",
            group=_TOK,
            ge=0,
            le=1_000_000,
        ),
    ] = 2_000
    api_max_media_per_request: Annotated[
        int,
        _setting(
            "Images/documents per request; the oldest beyond this are dropped before sending.",
            source="API_MAX_MEDIA_PER_REQUEST (constants/apiLimits.ts)",
            group=_TOK,
            ge=0,
            le=100_000,
        ),
    ] = 100
    # -- recorded-usage anchors: what the transcript does not show (issue #9) --
    anchors_enabled: Annotated[
        bool,
        _setting(
            "Anchor the display count on the recorded usage where the transcript cannot show what "
            "was sent: earlier history of a file that continues another, a restart's rebuilt "
            "system prompt, and unrecorded input (hooks, attachments, post-compaction restoration)."
            " Off: one prefix and ratio per thread.",
            source="recorded usage jumps at nameable points (MODELED; bench/truth.py)",
            group=_TOK,
            modeled=True,
        ),
    ] = True
    whatif_recorded_counts: Annotated[
        bool,
        _setting(
            "What-if counts lean on the recording: while the view matches it, Claude Code's own "
            "count where it compacted (preTokens), and while both went through the same "
            "compactions, the recorded count plus the calibrated difference of the views. Off: "
            "the replay's own estimate after the first difference.",
            source="issue #9 items 6–7; bench/truth.py reports the compactions both ways",
            group=_TOK,
            modeled=True,
        ),
    ] = True
    anchor_selection: Annotated[
        bool,
        _setting(
            "A jump past the margin is an anchor only if the 2-parameter line through the "
            "thread's recorded prompts fits better with it than without, by more than one more "
            "parameter is worth (Bayesian information criterion); off: every jump past the "
            "margin is one.",
            source="issue #9: anchors sized and kept by the recorded usage, not by a margin "
            "fitted per source (MODELED)",
            group=_TOK,
            modeled=True,
        ),
    ] = True
    anchor_margin_tokens: Annotated[
        int,
        _setting(
            "A jump of the recorded prompt beyond what the visible content explains is a "
            "candidate anchor only above this many tokens (and above anchor_margin_share of the "
            "prompt); anchor_selection then keeps it only if the recording bears it out.",
            source="no floor in tokens: the share below scales with the prompt, and the "
            "selection decides (bench/truth.py: 0, 2k or 4k give the same targets "
            "leave-one-source-out) (MODELED)",
            group=_TOK,
            ge=0,
            le=TOKENS_MAX,
        ),
    ] = 0
    anchor_margin_share: Annotated[
        float,
        _setting(
            "…and only above this share of the recorded prompt.",
            source="the per-request scatter of the 2-parameter fit (median ≈ 1 % on the corpus): "
            "a smaller jump cannot be told from it (MODELED)",
            group=_TOK,
            ge=0,
            le=1,
            fraction=True,
        ),
    ] = 0.01
    anchor_ratio_min: Annotated[
        float,
        _setting(
            "Fewest Claude tokens per cl100k token a thread's anchored fit may have: outside "
            "anchor_ratio_min–anchor_ratio_max the recorded jumps are not what anchors model, and "
            "the thread keeps one plain fit.",
            source="tokenizer ratios of the corpus fits are 1.13–2.11; Claude's tokenizers count "
            "~0.8–2.5 tokens per cl100k token on code and prose (MODELED)",
            group=_TOK,
            ge=0,
            le=100,
        ),
    ] = 0.8
    anchor_ratio_max: Annotated[
        float,
        _setting(
            "Most Claude tokens per cl100k token a thread's anchored fit may have.",
            source="as anchor_ratio_min (MODELED)",
            group=_TOK,
            ge=0,
            le=100,
        ),
    ] = 2.5
    unseen_prefix_prior_tokens: Annotated[
        int,
        _setting(
            "System prompt and tools assumed when a file starts mid-conversation and nothing in it "
            "measures them: the first request's prompt above this (and above the level after the "
            "first compaction) is earlier history not in the file.",
            source="median unseen prefix of the 21 corpus main threads with 3+ recorded requests: "
            "28.3k (13k–43k), measured 2026-12-01 (MODELED)",
            group=_TOK,
            ge=0,
            le=TOKENS_MAX,
        ),
    ] = 30_000

    def __post_init__(self) -> None:
        given = {name: getattr(self, name) for name in _HINTS}
        try:
            checked = msgspec.convert({k: _plain(v) for k, v in given.items()}, _SCHEMA)
        except msgspec.ValidationError as exc:
            raise _first_invalid(given, exc) from None
        for name in _HINTS:
            value = getattr(checked, name)
            # Stored as a FrozenMap whatever mapping came in, so the config stays hashable.
            object.__setattr__(self, name, FrozenMap(value) if isinstance(value, dict) else value)
        _check_rules(self)

    def __repr__(self) -> str:
        # Seventy fields drown the one that matters; show only what differs from the defaults.
        changed = ", ".join(f"{k}={v!r}" for k, (v, _) in self.diff(_defaults()).items())
        return f"PipelineConfig({changed})"

    def validate(self) -> None:
        """Raise ``FieldError`` for the first bad field, then for the first inconsistency."""
        type(self)(**{name: getattr(self, name) for name in _HINTS})

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable settings in declaration order (maps sorted, tuples as lists)."""
        return {name: _to_json(getattr(self, name)) for name in _HINTS}

    def replace(self, **changes: Any) -> "PipelineConfig":
        """A copy with ``changes`` applied and validated; unknown names raise ``FieldError``."""
        for name in changes:
            if name not in _HINTS:
                raise _unknown_field(name)
        return dataclasses.replace(self, **changes)

    def diff(self, other: "PipelineConfig") -> dict[str, tuple[Any, Any]]:
        """``{field: (mine, theirs)}`` for every field that differs, as JSON values."""
        mine, theirs = self.to_dict(), other.to_dict()
        return {name: (mine[name], theirs[name]) for name in mine if mine[name] != theirs[name]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PipelineConfig":
        """Defaults (or the preset named by a ``preset`` key) with ``data`` applied."""
        if not isinstance(data, Mapping):
            raise FieldError("config", f"must be a table of settings, got {type(data).__name__}")
        values = dict(data)
        for key in values:
            if not isinstance(key, str):
                raise FieldError(repr(key), "setting names must be strings")
        preset = values.pop("preset", None)
        base = _defaults() if preset is None else get_preset(preset)
        return base.replace(**values)

    @classmethod
    def from_toml(cls, source: str | os.PathLike[str]) -> "PipelineConfig":
        """Load a TOML file (path) or TOML text; see ``read_settings``."""
        return cls.from_dict(read_settings(source, "toml"))

    @classmethod
    def from_json(cls, source: str | os.PathLike[str]) -> "PipelineConfig":
        """Load a JSON file (path) or JSON text; see ``read_settings``."""
        return cls.from_dict(read_settings(source, "json"))


# ---------------------------------------------------------------------------------------------
# The schema as forms, docs and messages read it: msgspec's view of each field's annotation


@dataclass(frozen=True, slots=True)
class Setting:
    """One field of ``PipelineConfig``: its annotation (what msgspec validates) and its docs."""

    name: str
    #: the field's annotation, ranges included
    hint: Any
    #: msgspec's description of the type, without ``| None`` and the documentation wrapper
    kind: schema_info.Type
    default: Any
    nullable: bool
    doc: str
    source: str
    group: str
    modeled: bool
    #: a fraction (0.9 means 90 %); error messages say so
    fraction: bool
    #: the numeric range: of the value, or for a table of tools, of each value
    bounds: schema_info.IntType | schema_info.FloatType | None
    #: a table of tools whose values may be null (no limit)
    values_nullable: bool = False
    #: the allowed strings of a choice, in declaration order
    choices: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The type as forms and docs show it (``int | None``, ``map[str, int]``…)."""
        kind = self.kind
        if isinstance(kind, schema_info.DictType):
            text = "map[str, int | None]" if self.values_nullable else "map[str, int]"
        else:
            text = _LABELS[type(kind)]
        return text + " | None" if self.nullable else text

    @property
    def phrase(self) -> str:
        """What a valid value is, for "must be …" messages."""
        kind = self.kind
        if isinstance(kind, schema_info.LiteralType):
            text = "one of " + ", ".join(repr(c) for c in self.choices)
        elif isinstance(kind, schema_info.DictType):
            text = "a table of tool name → integer" + (
                " or null (no limit)" if self.values_nullable else ""
            )
        else:
            text = _PHRASES[type(kind)]
        return text + " or null" if self.nullable else text

    @property
    def lower(self) -> float | None:
        """The smallest allowed number (exclusive when ``lower_exclusive``)."""
        if self.bounds is None:
            return None
        return self.bounds.gt if self.bounds.gt is not None else self.bounds.ge

    @property
    def lower_exclusive(self) -> bool:
        return self.bounds is not None and self.bounds.gt is not None

    @property
    def upper(self) -> float | None:
        return None if self.bounds is None else self.bounds.le


_LABELS: dict[type, str] = {
    schema_info.IntType: "int",
    schema_info.FloatType: "float",
    schema_info.BoolType: "bool",
    schema_info.LiteralType: "str",
    schema_info.VarTupleType: "list[str]",
}
_PHRASES: dict[type, str] = {
    schema_info.IntType: "an integer",
    schema_info.FloatType: "a number",
    schema_info.BoolType: "true or false",
    schema_info.VarTupleType: "a list of tool names",
}


def _without_none(kind: schema_info.Type) -> tuple[schema_info.Type, bool]:
    if isinstance(kind, schema_info.UnionType):
        rest = [t for t in kind.types if not isinstance(t, schema_info.NoneType)]
        if len(rest) == 1:
            return rest[0], len(rest) < len(kind.types)
    return kind, False


def _literal_values(hint: Any) -> tuple[str, ...]:
    import typing

    while typing.get_origin(hint) is not Literal:
        hint = typing.get_args(hint)[0]
    return tuple(str(value) for value in typing.get_args(hint))


#: Field name → annotation, in declaration order (evaluated with the class: the module does not
#: use postponed annotations, so nothing is parsed from strings at start-up).
_HINTS: dict[str, Any] = {f.name: f.type for f in dataclasses.fields(PipelineConfig)}

#: Every field in one msgspec type, so a whole config is checked in one call (msgspec caches
#: a struct's validators; converting field by field would rebuild them every time).
_SCHEMA: Any = msgspec.defstruct("PipelineSettings", list(_HINTS.items()))


@functools.cache
def _settings() -> dict[str, Setting]:
    """msgspec's reading of every annotation, for forms, docs and error messages. Built on first
    use: a replay with valid settings never needs it, and start-up time counts for the CLI."""
    hints = _HINTS
    info = schema_info.type_info(PipelineConfig)
    assert isinstance(info, schema_info.DataclassType)
    settings: dict[str, Setting] = {}
    for field in info.fields:
        kind, nullable = _without_none(field.type)
        if not isinstance(kind, schema_info.Metadata) or not kind.extra:
            raise TypeError(f"setting {field.name} is not declared with _setting(...)")
        doc = (kind.extra_json_schema or {}).get("description", "")
        extra, kind = kind.extra, kind.type
        bounds: schema_info.IntType | schema_info.FloatType | None = None
        values_nullable = False
        if isinstance(kind, schema_info.DictType):
            value_kind, values_nullable = _without_none(kind.value_type)
            if isinstance(value_kind, schema_info.IntType):
                bounds = value_kind
        elif isinstance(kind, schema_info.IntType | schema_info.FloatType):
            bounds = kind
        # Every number a user can type gets explicit bounds; a new field without them is a bug.
        needs_range = isinstance(kind, schema_info.IntType | schema_info.FloatType)
        needs_range = needs_range or isinstance(kind, schema_info.DictType)
        if needs_range and (
            bounds is None or (bounds.ge is None and bounds.gt is None) or bounds.le is None
        ):
            raise TypeError(f"setting {field.name} has no allowed range")
        if type(kind) not in _LABELS and not isinstance(kind, schema_info.DictType):
            raise TypeError(f"unsupported setting type {hints[field.name]!r}")
        settings[field.name] = Setting(
            name=field.name,
            hint=hints[field.name],
            kind=kind,
            default=field.default,
            nullable=nullable,
            doc=doc,
            source=extra["source"],
            group=extra["group"],
            modeled=extra["modeled"],
            fraction=extra["fraction"],
            bounds=bounds,
            values_nullable=values_nullable,
            # msgspec reports a Literal's values sorted; forms list them as declared
            choices=_literal_values(hints[field.name])
            if type(kind) is schema_info.LiteralType
            else (),
        )
    return settings


def __getattr__(name: str) -> Any:
    # FIELD_DOCS and FIELD_RANGES are computed on first use, like _settings().
    if name == "FIELD_DOCS":
        # One-line documentation of every setting, in declaration order.
        return {name: setting.doc for name, setting in _settings().items()}
    if name == "FIELD_RANGES":
        # Allowed (min, max) of every numeric setting (for maps: of each value). A minimum is
        # exclusive where field_specs() says min_exclusive.
        return {
            name: (setting.lower, setting.upper)
            for name, setting in _settings().items()
            if setting.lower is not None and setting.upper is not None
        }
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def setting(name: str) -> Setting:
    """The schema of one field; ``FieldError`` (with a did-you-mean) for an unknown name."""
    try:
        return _settings()[name]
    except KeyError:
        raise _unknown_field(name) from None


def field_specs() -> list[dict[str, Any]]:
    """One dict per setting, in declaration order, for building forms and docs.

    Keys: ``name, type, default, doc, min, max, modeled`` plus ``min_exclusive, nullable,
    choices, group, source``.
    """
    return [
        {
            "name": s.name,
            "type": s.label,
            "default": _to_json(s.default),
            "doc": s.doc,
            "min": s.lower,
            "max": s.upper,
            "modeled": s.modeled,
            "min_exclusive": s.lower_exclusive,
            "nullable": s.nullable,
            "choices": list(s.choices),
            "group": s.group,
            "source": s.source,
        }
        for s in _settings().values()
    ]


# ---------------------------------------------------------------------------------------------
# Validation: msgspec decides, these functions word the message


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def _plain(value: Any, values_nullable: bool = True) -> Any:
    """What msgspec is given: a mapping as a dict, with ``inf`` values as null where a table's
    values may be null (TOML has no null, so "no limit" is written as inf there)."""
    if isinstance(value, Mapping):
        return {
            k: None if values_nullable and isinstance(v, float) and math.isinf(v) and v > 0 else v
            for k, v in value.items()
        }
    return value


def _to_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: value[k] for k in sorted(value)}
    if isinstance(value, tuple):
        return list(value)
    return value


def _first_invalid(given: dict[str, Any], error: msgspec.ValidationError) -> FieldError:
    """The first field (in declaration order) msgspec rejects, with a message that says why."""
    for name, setting in _settings().items():
        value = _plain(given[name], setting.values_nullable)
        try:
            msgspec.convert(value, setting.hint)
        except msgspec.ValidationError:
            return _explain(setting, value)
    return FieldError("config", str(error))


def _type_error(setting: Setting, value: Any) -> FieldError:
    return FieldError(
        setting.name, f"must be {setting.phrase}, got {value!r} ({type(value).__name__})"
    )


def _range_error(setting: Setting, value: Any, what: str = "") -> FieldError:
    lower, upper = _number(setting.lower or 0), _number(setting.upper or 0)
    noun = "a number" if isinstance(setting.kind, schema_info.FloatType) else "an integer"
    if setting.lower_exclusive:
        bounds = f"greater than {lower} and at most {upper}"
    else:
        bounds = f"between {lower} and {upper}"
    message = f"{what}must be {noun} {bounds}, got {value!r}"
    if setting.fraction:
        message += " (a fraction: 0.9 means 90 %)"
    return FieldError(setting.name, message)


def _explain(setting: Setting, value: Any) -> FieldError:
    """Why msgspec rejected ``value`` for ``setting``: wrong type, not finite, or out of range."""
    kind = setting.kind
    if isinstance(kind, schema_info.DictType):
        return _explain_table(setting, value)
    if value is not None and isinstance(kind, schema_info.IntType) and _is_int(value):
        return _range_error(setting, value)
    is_number = _is_int(value) or isinstance(value, float)
    if isinstance(kind, schema_info.FloatType) and is_number:
        value = float(value)  # what the field would hold: the message shows 100.0, not 100
        if not math.isfinite(value):
            return FieldError(setting.name, f"must be a finite number, got {value!r}")
        return _range_error(setting, value)
    if isinstance(kind, schema_info.VarTupleType) and isinstance(value, list):
        value = tuple(value)  # as the field would hold it
    return _type_error(setting, value)


def _explain_table(setting: Setting, value: Any) -> FieldError:
    if not isinstance(value, Mapping):
        return _type_error(setting, value)
    wanted = "an integer or null (no limit)" if setting.values_nullable else "an integer"
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            return FieldError(setting.name, f"tool names must be non-empty strings, got {key!r}")
        if item is None and setting.values_nullable:
            continue
        if not _is_int(item):
            return FieldError(
                setting.name,
                f"value for {key!r} must be {wanted}, got {item!r} ({type(item).__name__})",
            )
        try:
            msgspec.convert(item, _ToolChars)
        except msgspec.ValidationError:
            return _range_error(setting, item, f"value for {key!r} ")
    return _type_error(setting, value)


@functools.cache
def _defaults() -> PipelineConfig:
    return PipelineConfig()


def _unknown_field(name: str) -> FieldError:
    import difflib  # only for this message

    # Users often type the TypeScript constant (AUTOCOMPACT_BUFFER_TOKENS); lowercase first.
    close = difflib.get_close_matches(name.lower(), list(_HINTS), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return FieldError(name, f"unknown setting{hint}")


def _check_rules(config: PipelineConfig) -> None:
    """Rules a schema cannot state: no repeated tool, and the cross-field ones. The window
    check uses the fallback model's max output; the per-model check happens again in
    ``thresholds.compute_thresholds``."""
    seen: set[str] = set()
    for tool in config.compactable_tools:
        if tool in seen:
            raise FieldError("compactable_tools", f"lists {tool!r} twice")
        seen.add(tool)
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
            raise FieldError(name, message)

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
    """The effective window ``window − reserve``; ``FieldError`` if it leaves no room for the
    autocompact or blocking buffers."""
    reserved = reserved_output(config, max_output)
    effective = window - reserved
    if effective <= 0:
        raise FieldError(
            window_field,
            f"leaves no effective window: {window} − {reserved} reserved for output = {effective}",
        )
    where = f"the effective window ({effective} = {window} − {reserved} reserved for output)"
    for name in ("autocompact_buffer_tokens", "manual_compact_buffer_tokens"):
        value = getattr(config, name)
        if value >= effective:
            raise FieldError(name, f"must be smaller than {where}, got {value}")
    return effective


# ---------------------------------------------------------------------------------------------
# Named starting points (data/presets.toml)

#: Not a preset: "pick the preset matching the transcript's Claude Code version" (``presets``).
AUTO = "auto"

PRESETS_FILE = Path(__file__).parent / "data" / "presets.toml"


@functools.cache
def _preset_table() -> dict[str, tuple[PipelineConfig, str]]:
    """``{name: (config, description)}`` in file order; each entry is validated like user input."""
    where = PRESETS_FILE.name
    try:
        data = tomllib.loads(PRESETS_FILE.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise FieldError(where, f"invalid TOML: {exc}") from exc
    table: dict[str, tuple[PipelineConfig, str]] = {}
    for name, entry in data.items():
        here = f"{where} [{name}]"
        if not isinstance(entry, dict) or set(entry) - {"description", "settings"}:
            raise FieldError(here, "must be a table with description and settings only")
        description = entry.get("description")
        if not isinstance(description, str) or not description.strip():
            raise FieldError(f"{here}.description", "must be a non-empty string")
        settings = entry.get("settings", {})
        if not isinstance(settings, dict):
            raise FieldError(f"{here}.settings", "must be a table of settings")
        try:
            table[name] = (_defaults().replace(**settings), description)
        except FieldError as exc:
            raise exc.within(f"{here}.settings") from None
    return table


def preset_configs() -> dict[str, PipelineConfig]:
    """Every named preset, in file order."""
    return {name: config for name, (config, _) in _preset_table().items()}


def preset_descriptions() -> dict[str, str]:
    """One sentence per preset saying what it changes, for select boxes and docs."""
    return {name: description for name, (_, description) in _preset_table().items()}


def get_preset(name: str) -> PipelineConfig:
    """The preset called ``name``; ``FieldError('preset', …)`` if there is none."""
    if not isinstance(name, str):
        raise FieldError("preset", f"must be a preset name, got {name!r}")
    if name == AUTO:
        raise FieldError(
            "preset",
            "'auto' is chosen from a transcript's Claude Code version; "
            "use resolve_config(..., version=...) or preset_for_version()",
        )
    try:
        return _preset_table()[name][0]
    except KeyError:
        known = ", ".join((AUTO, *_preset_table()))
        raise FieldError("preset", f"unknown preset {name!r}; known: {known}") from None


# ---------------------------------------------------------------------------------------------
# Reading settings: files, and the text of form inputs


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
            raise FieldError(label, f"invalid TOML: {exc}") from exc
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FieldError(
                label, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from exc
    if not isinstance(data, dict):
        raise FieldError(label, f"must hold a table of settings, got {type(data).__name__}")
    table = data.get("pipeline")
    if table is None:
        return data
    if not isinstance(table, dict):
        raise FieldError("pipeline", f"must be a table of settings, got {type(table).__name__}")
    top = {k: v for k, v in data.items() if k != "pipeline"}
    for name in top:
        if name in table:
            raise FieldError(name, "is set both at the top level and in [pipeline]")
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
        raise FieldError(str(path), "file not found") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise FieldError(str(path), f"cannot read: {exc}") from exc
    return text, str(path), path.suffix.lower()


#: The longest overrides text a form may send (a full config is about 3,000 characters).
MAX_OVERRIDES_CHARS = 64 * 1024


def parse_overrides(text: str | None) -> dict[str, Any] | None:
    """The overrides typed into a form's JSON box (``None`` when empty); ``FieldError('config')``
    if it is not a JSON object. The values are checked later, with the preset."""
    text = (text or "").strip()
    if not text:
        return None
    if len(text) > MAX_OVERRIDES_CHARS:
        raise FieldError("config", f"at most {MAX_OVERRIDES_CHARS:,} characters of overrides")
    try:
        parsed, _ = decode_json_line(text)
    except json.JSONDecodeError as exc:
        raise FieldError(
            "config", f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except ValueError as exc:  # NaN/Infinity, too deeply nested
        raise FieldError("config", f"not accepted: {exc}") from None
    if not isinstance(parsed, dict):
        raise FieldError(
            "config",
            'must be a JSON object of field overrides, e.g. {"autocompact_pct_override": 80}',
        )
    return parsed


def setting_from_text(name: str, raw: str | None) -> Any:
    """A form input's text as the value of setting ``name`` (a checkbox: any of 1/true/on/yes).

    Only the type is read here; ranges and the cross-field rules are checked when the value
    goes into a ``PipelineConfig``. ``FieldError(name, …)`` if the text is not of the type.
    """
    spec = setting(name)
    kind = spec.kind
    text = (raw or "").strip()
    if isinstance(kind, schema_info.BoolType):
        return text.lower() in ("1", "true", "on", "yes")
    if text == "" and spec.nullable:
        return None
    if isinstance(kind, schema_info.DictType | schema_info.VarTupleType):
        empty = "{}" if isinstance(kind, schema_info.DictType) else "[]"
        try:
            return json.loads(text or empty)
        except json.JSONDecodeError as exc:
            raise FieldError(name, f"must be JSON ({exc.msg}, column {exc.colno})") from None
    if isinstance(kind, schema_info.IntType):
        try:
            return int(text)
        except ValueError:
            raise FieldError(name, f"must be a whole number, got {text!r}") from None
    if isinstance(kind, schema_info.FloatType):
        try:
            value = float(text)
        except ValueError:
            raise FieldError(name, f"must be a number, got {text!r}") from None
        if not math.isfinite(value):
            raise FieldError(name, "must be a finite number")
        return value
    return text
