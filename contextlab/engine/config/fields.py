"""The declaration table: every threshold and switch of the context pipeline, as one validated,
immutable value.

Field names are Claude Code's own constants in snake_case (``AUTOCOMPACT_BUFFER_TOKENS`` →
``autocompact_buffer_tokens``). Each field's annotation is its whole schema, read by msgspec:
the type, the allowed range (``ge``/``gt``/``le``), a description and, in ``extra``, the
constant, env var or remote flag it stands for (pipeline-spec §1, facts "(a) Constants table").
Defaults are the public 2.1.88 build. Fields marked *modeled* drive steps whose Claude Code
implementation is not public (snip, context collapse, cached microcompact, API tool clearing):
their values are ContextLab's policy, not facts.

Constructing a ``PipelineConfig`` validates it: ``schema`` checks every field against its
annotation and words what is wrong (``FieldError``), then the rules a schema cannot state (no
repeated tool, the cross-field ones, room left in the window) are checked here. The named
presets (``presets``) are built here too, since ``from_dict`` starts from one.
"""

import dataclasses
import functools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from msgspec import Meta

from .errors import FieldError
from .files import read_settings
from .presets import AUTO, PRESETS_FILE, preset_entries
from .schema import ConfigSchema, to_json_value

V = TypeVar("V")

CacheTTL = Literal["auto", "5m", "1h"]
BlockingLimitBase = Literal["effective", "window"]

#: ``MAX_OUTPUT_TOKENS_DEFAULT`` (utils/context.ts): what a model missing from the table gets.
#: Validation uses it because a config is checked before any model is known.
MAX_OUTPUT_TOKENS_DEFAULT = 32_000


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
    tool_output_limit_chars: (
        Annotated[
            int,
            _setting(
                "Codex: a tool output longer than this many characters is cut to its head and "
                "tail around a marker before the model sees it (what-if only); null = off.",
                source="Codex CLI truncates tool outputs for the model (a rollout records them "
                "as sent, already cut: a what-if can only cut further)",
                group=_TR,
                ge=100,
                le=CHARS_MAX,
            ),
        ]
        | None
    ) = None
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
    cache_system_survival_seconds: Annotated[
        int,
        _setting(
            "Seconds after a thread's previous request during which its static system prompt "
            "is still read from the cache once the thread's own entries expired, when the "
            "thread's first request found it warm (the user's other sessions keep that prefix "
            "alive). 0: an expired thread writes its whole prompt again.",
            source="fitted on corpus reads after TTL expiries, leave-one-source-out (MODELED)",
            group=_CACHE,
            ge=0,
            le=7 * 86_400,
            modeled=True,
        ),
    ] = 3_600
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
        checked = SCHEMA.check({name: getattr(self, name) for name in SCHEMA.hints})
        for name in SCHEMA.hints:
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
        type(self)(**{name: getattr(self, name) for name in SCHEMA.hints})

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable settings in declaration order (maps sorted, tuples as lists)."""
        return {name: to_json_value(getattr(self, name)) for name in SCHEMA.hints}

    def replace(self, **changes: Any) -> "PipelineConfig":
        """A copy with ``changes`` applied and validated; unknown names raise ``FieldError``."""
        for name in changes:
            if name not in SCHEMA.hints:
                raise SCHEMA.unknown(name)
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


#: msgspec's reading of the fields above: what construction checks, and how it words a problem.
SCHEMA = ConfigSchema(PipelineConfig)


@functools.cache
def _defaults() -> PipelineConfig:
    return PipelineConfig()


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
# Named starting points (``presets``), as configs


@functools.cache
def _preset_table() -> dict[str, tuple[PipelineConfig, str]]:
    """``{name: (config, description)}`` in file order; each entry is validated like user input."""
    table: dict[str, tuple[PipelineConfig, str]] = {}
    for name, (settings, description) in preset_entries().items():
        try:
            table[name] = (_defaults().replace(**settings), description)
        except FieldError as exc:
            raise exc.within(f"{PRESETS_FILE.name} [{name}].settings") from None
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
