"""The advice API's request and answer shapes."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any, Literal

from ninja import Field, Schema

from contextlab.tuning.schemas import MAX_REQUEST_SESSIONS, RowId

Goal = Literal["lowest_cost", "most_history", "fewest_compactions", "cost_cap"]
Text = Annotated[str, Field(max_length=200)]


class AdviceIn(Schema):
    """Sessions (by id, or a workspace and filters), a goal, and the knobs to explore."""

    session_ids: list[RowId] | None = Field(None, max_length=MAX_REQUEST_SESSIONS)
    workspace_id: RowId | None = Field(
        None, description="choose this workspace's sessions by the filters (you must be an editor)"
    )
    project: Text = ""
    since: date | None = Field(None, description="sessions uploaded on or after this day")
    until: date | None = Field(None, description="sessions uploaded on or before this day")
    member: Text = Field("", description="sessions uploaded by this member (user name)")
    goal: Goal = "lowest_cost"
    cost_cap: float | None = Field(None, gt=0, le=1_000_000, description="USD, for goal cost_cap")
    knobs: dict[Annotated[str, Field(max_length=60)], list[Any] | None] | None = Field(
        None,
        description="field → values to explore, one knob at a time (null values: the "
        "defaults); default autocompact_pct_override 60–90 and cache_ttl 5m/1h",
    )


class AdviceCreatedOut(Schema):
    id: int
    status: str
    url: str
    total: int


class HurtOut(Schema):
    session_id: int
    name: str
    saving_usd: float
    history_kept_delta: float
    compactions_delta: int
    why: str


class RecommendationOut(Schema):
    candidate: str
    label: str
    #: the Claude Code keys and values (settings.json, environment variables under "env")
    settings: dict[str, Any]
    env_lines: list[str]
    not_expressible: dict[str, str]
    min_version: str
    preset: str
    #: the what-if config it stands for (overrides on the preset)
    config: dict[str, Any]
    cost_usd: float
    mean_history_share: float
    compactions: int
    saving_usd: float
    saving_low_usd: float
    saving_high_usd: float
    history_kept_delta: float
    compactions_delta: int
    hurts: list[HurtOut]
    pareto: bool


class TtlOut(Schema):
    """The 1-hour cache against 5 minutes on one session, from its real gaps and replays."""

    session_id: int
    name: str
    requests: int
    gaps_under_5m: int
    gaps_5m_to_1h: int
    gaps_over_1h: int
    recorded_ttl: str
    cost_5m_usd: float
    cost_1h_usd: float
    one_hour_saves_usd: float
    verdict: str


class IdleOut(Schema):
    """Compact now or wait on one session: its idle gaps longer than the cache TTL, what was
    paid after them and what compacting at them would have cost (estimates)."""

    session_id: int
    name: str
    gaps: int
    compact_wins: int = Field(..., description="gaps where compacting would have been cheaper")
    paid_usd: float = Field(..., description="the prompts after the gaps, as billed")
    compact_usd: float = Field(
        ...,
        description="summary calls + smaller prompts − what later requests would read less",
    )
    saving_usd: float = Field(
        ..., description="paid − compact, compacting at every gap: positive, compacting saves"
    )
    best_saving_usd: float = Field(..., description="compacting only at the gaps where it saves")
    sizes_recorded: bool = Field(
        ..., description="summary and post-compaction sizes are the session's own (else assumed)"
    )
    verdict: str


class AdviceOut(Schema):
    id: int
    workspace_id: int
    url: str
    status: str
    done: int
    failed: int
    total: int
    goal: str
    cost_cap: float | None
    knobs: dict[str, list[Any]]
    filters: dict[str, str]
    session_ids: list[int]
    baseline: dict[str, Any] | None
    recommendations: list[RecommendationOut] | None
    #: when both TTLs were explored: per session, is the 1-hour cache worth it
    ttl: list[TtlOut] = Field(default_factory=list)
    #: per session, compacting at each idle gap longer than the cache TTL against waiting
    idle: list[IdleOut] = Field(default_factory=list)
