"""Results: the declared shape of a replay's result JSON (``ReplayResult.to_json()``), here, and
what reads a result in the modules beside it: ``explorer`` (the history index and the side-by-side
view of any request), ``navigator`` (events and sentences), ``composition`` (what a prompt is
made of), ``evaluation`` (fidelity against the recorded usage) and ``compare`` (two results).

Results are stored and served as plain JSON dicts, so the rows are ``TypedDict``s: building a
row with a missing or misspelt key, or reading a key that does not exist, is a mypy error, and
nothing changes at run time. The web API derives its OpenAPI schema from these classes
(``contextlab/runs/schemas.py``), so a key added here is documented there with its type, and
a test fails when the engine emits a key that is not declared here.

Bump ``RESULT_VERSION`` when a key changes meaning or type, or one is removed; adding a key
(declared here) keeps older stored results readable, so it needs no bump.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast

from contextlab.engine.measures.anchors import AnchorJson

#: Version of this result format, written as ``result_version`` at the top of the result JSON.
RESULT_VERSION = 2
# 2: ``cache`` and ``cost_usd`` of a recorded replay are the recorded usage where there is one;
#    the cache model's figures moved to ``cache_estimate`` and ``cost_estimate_usd``


class RecordedUsage(TypedDict):
    """The usage the API reported for the response (``Usage.to_json``)."""

    input: int
    cache_read: int
    cache_write: int
    cache_write_5m: int | None
    cache_write_1h: int | None
    output: int


class CacheRow(TypedDict):
    """A request's prompt cache in tokens: as recorded (``source`` "recorded": the API's usage)
    or as the cache model estimates it (``source`` "estimate"); same fields either way."""

    read: int
    write: int
    #: ``write`` by TTL: the 5-minute and the 1-hour cache writes
    write_5m: int
    write_1h: int
    uncached: int
    #: leading prompt blocks read from the cache (0: nothing read)
    hit_blocks: int
    #: prompt blocks the request was cut into
    blocks: int
    #: a hit: for a recording, it read at least half of the prompt from the cache, or what the
    #: cache model expected it to find there (``replay.recorded_cache``)
    hit: bool
    #: why the read stopped where it did (``cache.CacheReason``); for a recording, inferred
    reason: str
    #: the same in a sentence, naming the request that wrote the entry
    detail: str
    #: tokens the model expected to read that a server-side miss in the recording wrote
    #: instead (``read`` + this is the model's own estimate; 0 without one)
    server_miss_tokens: int
    #: "recorded" (the API's usage) or "estimate" (the cache model)
    source: str


class ThresholdLevels(TypedDict):
    """The request's token thresholds (they depend on its model's context window)."""

    effective: int
    autocompact: int
    warning: int
    blocking: int


class ViewRange(TypedDict):
    """The model view, by reference: head items, then thread messages ``start`` to ``end``."""

    #: ``"m:<index>"`` for a thread message, ``"s:<n>"`` for a synthetic one (a summary)
    head: list[str]
    start: int
    end: int


#: A step's event on a request: always ``step`` and ``action``, then step-specific fields.
RequestEvent = dict[str, Any]


class RequestRow(TypedDict):
    """One API request (a distinct assistant ``message.id``) as the replay saw it."""

    #: position among the main conversation's requests (per thread for a subagent's rows)
    index: int
    thread: str
    #: position among its own thread's requests
    thread_request: int
    message_id: str | None
    #: index of the assistant message in its thread
    message: int
    #: line of the transcript file the response starts on
    line: int
    timestamp: str
    model: str | None
    #: tiktoken count of the model view, before calibration
    raw_tokens: int
    #: display count of the model view (calibrated ``raw_tokens`` plus ``unrecorded_tokens``)
    model_tokens: int
    #: restart segment of the thread the request belongs to (0: before any restart)
    segment: int
    #: input the transcript does not record (recorded-token units), anchored on the usage
    unrecorded_tokens: int
    #: the "earlier history not in this file" span in the view (display tokens; 0 without one,
    #: and after the first compaction)
    earlier_history_tokens: int
    #: display count of the full (REPL) history before the request
    repl_tokens: int
    #: Claude Code's own count, on which the thresholds fire
    decision_tokens: int
    recorded: RecordedUsage | None
    #: recorded prompt size (input + cache read + cache write), None without usage
    recorded_total: int | None
    #: the request's cache as recorded (recorded mode, usage recorded), else ``cache_estimate``
    cache: CacheRow
    #: the cache model's own figures, always (recorded and what-if)
    cache_estimate: CacheRow
    #: estimated read − recorded read, as a share of the recorded prompt (None: nothing to
    #: compare, a what-if or a request without recorded usage)
    cache_read_gap: float | None
    #: estimate and recording disagree beyond ``replay.recorded_cache.DISAGREE_MARGIN``
    cache_disagrees: bool
    #: cache entry lifetime the request wrote with: "5m" or "1h"
    ttl: str
    #: what the request cost: its recorded usage priced where ``cache`` is recorded, else the
    #: estimate (``cost_estimate_usd``)
    cost_usd: float
    #: the replay's estimate: the cache model's split priced (same prices)
    cost_estimate_usd: float
    recorded_cost_usd: float | None
    #: of the two: the calls the server made inside the request after its first (an advisor's,
    #: the request model's continuations), taken as recorded in both modes
    iteration_cost_usd: float
    thresholds: ThresholdLevels
    events: list[RequestEvent]
    #: a user prompt or command came since the previous request
    turn_start: bool
    #: the request belongs to an abandoned branch of the conversation
    branch: bool
    #: the blocking limit stopped the request
    blocked: bool
    view: ViewRange


class CalibrationJson(TypedDict):
    """``Calibration.to_json``: display tokens ≈ ``prefix_tokens + ratio * raw_tokens``."""

    prefix_tokens: int
    ratio: float
    requests_used: int
    median_rel_error: float | None
    p90_rel_error: float | None
    source: str


class ThreadInfo(TypedDict):
    id: str
    kind: str
    file: str
    messages: int
    requests: int
    calibration: CalibrationJson
    #: per model, when the thread switched models (each gets its own fit)
    model_calibrations: dict[str, CalibrationJson]
    #: restart segments of the thread (1: no restart)
    segments: int
    #: where the display count is anchored on the recorded usage (``anchors.Anchor.to_json``)
    anchors: list[AnchorJson]


class SessionInfo(TypedDict):
    name: str
    session_id: str | None
    version: str | None
    versions: list[str]
    mode: str
    preset: str
    summarizer: str
    config: dict[str, Any]
    threads: list[ThreadInfo]
    #: the main thread's calibration
    calibration: CalibrationJson | None
    problems: list[dict[str, Any]]
    modeled_steps: list[str]
    #: share of each thread's requests whose recorded figures were read (1: all; below 1, a
    #: forecast: every later request is estimated, its ``recorded`` null)
    usage_until: float


class SubagentResult(TypedDict):
    thread: str
    kind: str
    file: str
    #: the summarizer call of a recorded compaction, not a task the agent delegated
    compaction_fork: bool
    requests: list[RequestRow]


class EstimateSummary(TypedDict):
    """The replay's own estimate of the session's cache and cost (the cache model's split at the
    same prices), whatever the recording says: what two replays are compared on."""

    cost_usd: float
    #: main conversation + subagents + compaction calls
    session_cost_usd: float
    cache_read_tokens: int
    cache_write_tokens: int
    uncached_tokens: int
    cache_hit_rate: float


class SessionSummary(TypedDict):
    """Session totals over the main conversation (and its branches)."""

    requests: int
    compactions: int
    #: ``index`` of each request that compacted
    compaction_requests: list[int]
    microcompactions: int
    summary_calls: int
    peak_model_tokens: int
    #: the cache figures and cost of ``cache`` and ``cost_usd`` (recorded facts first)
    cache_read_tokens: int
    cache_write_tokens: int
    uncached_tokens: int
    cost_usd: float
    #: only the requests with recorded usage, priced
    recorded_cost_usd: float
    #: part of both: the calls the server made inside requests after their first (advisors,
    #: server-side tool loops), as recorded
    iteration_cost_usd: float
    cache_hit_rate: float
    #: requests whose ``cache`` is the recording's (recorded mode, usage recorded)
    recorded_cache_requests: int
    #: requests whose estimate and recording disagree (``RequestRow.cache_disagrees``)
    cache_disagreements: int
    estimate: EstimateSummary
    #: one sentence per model priced on assumed rates (not in the price table), for the pages
    pricing_notes: list[str]
    #: requests (subagents' included) whose ``cache`` is priced at long-context rates
    long_context_requests: int
    mean_history_share: float
    requests_above_warning: int
    blocking_hits: int
    recorded_requests: int
    #: the delegated subagents' requests (compaction calls not included)
    subagent_cost_usd: float
    recorded_subagent_cost_usd: float
    #: Claude Code's summarizer calls of recorded compactions (``agent-acompact-*`` files)
    compaction_cost_usd: float
    recorded_compaction_cost_usd: float
    #: every compaction of the main conversation billed as Claude Code pays its call (the
    #: context as input at its cache state, the summary as output), whoever wrote the summary
    #: (``replay.compaction_bill``); a recorded compaction fork is that same call, replayed
    compaction_call_cost_usd: float
    #: main conversation + subagents + compaction calls
    session_cost_usd: float
    recorded_session_cost_usd: float
    #: Claude Code's own figure for the session (newest ``cost-state`` record), None without one
    claude_code_cost: float | None


class ViewLog(TypedDict):
    """Block transforms (with the request interval each holds over) and synthetic messages."""

    transforms: list[dict[str, Any]]
    synthetic: list[dict[str, Any]]


class ResultJson(TypedDict):
    """The whole result of a replay, as stored and as ``contextlab replay --json`` prints it."""

    result_version: int
    session: SessionInfo
    #: the main conversation's requests (branches included), in time order
    requests: list[RequestRow]
    subagents: list[SubagentResult]
    summary: SessionSummary
    views: ViewLog
    summaries: list[dict[str, Any]]


def as_result(data: Mapping[str, Any]) -> ResultJson:
    """A stored result JSON, read as the declared shape.

    No check happens here: results are written by the engine (and their keys tested against
    these classes), so this only tells mypy what the dict loaded from storage holds.
    """
    return cast(ResultJson, data)
