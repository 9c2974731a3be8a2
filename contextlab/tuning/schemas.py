from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema

from contextlab.transcripts.models import MAX_ROW_ID

#: a row id as a request may name it: anything else is answered 422 naming the field
RowId = Annotated[int, Field(ge=1, le=MAX_ROW_ID)]
#: at most this many sessions in one request (the services allow fewer, with a message)
MAX_REQUEST_SESSIONS = 200

Status = Literal["queued", "running", "done", "failed"]


class ConfigIn(Schema):
    """A preset and/or field overrides (and optionally a saved config version to start from)."""

    preset: str | None = Field(
        None, description='preset name; "auto" (default) follows the session'
    )
    config: dict[str, Any] | None = Field(
        None, description="field overrides, validated by the engine"
    )
    version_id: RowId | None = Field(None, description="a saved config version to start from")


class ComparisonIn(Schema):
    session_ids: list[RowId] = Field(..., min_length=1, max_length=MAX_REQUEST_SESSIONS)
    a: ConfigIn
    b: ConfigIn
    workspace_id: RowId | None = Field(
        None, description="the workspace it belongs to (you must be an editor); default yours"
    )


class SweepIn(Schema):
    session_ids: list[RowId] = Field(..., min_length=1, max_length=MAX_REQUEST_SESSIONS)
    base: ConfigIn = Field(
        default_factory=lambda: ConfigIn(preset=None, config=None, version_id=None)
    )
    field: str
    values: list[float] | Annotated[str, Field(max_length=2000)] = Field(
        ..., description='a list of numbers, "start:stop:step" (inclusive) or "a, b, c"'
    )
    workspace_id: RowId | None = Field(
        None, description="the workspace it belongs to (you must be an editor); default yours"
    )


class CreatedOut(Schema):
    id: int
    status: Status
    url: str


class SideOut(Schema):
    label: str
    preset: str
    config: dict[str, Any]
    #: the side's overrides as Claude Code settings (engine.claude_code_settings)
    claude_code: dict[str, Any]
    run_ids: list[int]
    summary: dict[str, Any]


class ComparisonSessionOut(Schema):
    session_id: int
    name: str
    display_name: str
    a_run_id: int | None
    b_run_id: int | None
    a: dict[str, Any] | None
    b: dict[str, Any] | None
    delta: dict[str, Any] | None
    #: 0-based index of the first request whose model views differ (the explorer's URL index)
    first_divergence: int | None
    #: the same request as the pages number it, from 1
    first_divergence_number: int | None


class ComparisonOut(Schema):
    id: int
    workspace_id: int
    status: Status
    done_sessions: int
    a: SideOut
    b: SideOut
    delta: dict[str, Any]
    sessions: list[ComparisonSessionOut]


class SweepPointOut(Schema):
    value: int | float
    status: Status
    run_ids: list[int]
    summary: dict[str, Any] | None


class SweepBestOut(Schema):
    goal: str
    label: str
    value: int | float
    summary: dict[str, Any]
    #: every value measured the same for this goal (the first is named)
    tie: bool


class SweepOut(Schema):
    id: int
    workspace_id: int
    status: Status
    field: str
    base: dict[str, Any]
    session_ids: list[int]
    points: list[SweepPointOut]
    #: per goal (lowest_cost, most_history, fewest_compactions), the best value measured
    best: dict[str, SweepBestOut | None]


class ComparisonListOut(Schema):
    id: int
    workspace_id: int
    status: Status
    url: str
    a_label: str
    b_label: str
    session_ids: list[int]
    created_at: datetime


class SweepListOut(Schema):
    id: int
    workspace_id: int
    status: Status
    url: str
    field: str
    values: list[int | float]
    base_label: str
    session_ids: list[int]
    created_at: datetime


class KnobOut(Schema):
    kind: Literal["env", "setting"]
    name: str
    since: str
    absent_in: str
    limits: str


class ConfigFieldOut(Schema):
    """One what-if config field and what produces it in Claude Code."""

    name: str
    type: str
    group: str
    doc: str
    source: str
    #: "knob" (a Claude Code setting or environment variable), "experiment" (no setting changes
    #: it) or "measurement" (how ContextLab reads the session)
    kind: Literal["knob", "experiment", "measurement"]
    experiment: bool
    knobs: list[KnobOut]
