from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema


class RunIn(Schema):
    session_id: int
    mode: Literal["recorded", "whatif"] = "whatif"
    preset: str | None = None
    #: field overrides of the pipeline config, validated by the engine
    config: dict[str, Any] | None = None
    #: who writes the summaries of simulated compactions
    summarizer: Literal["extractive", "anthropic", "openai"] = "extractive"
    #: the model the summarizer asks (default: CONTEXTLAB_SUMMARY_MODEL, else the session's)
    summary_model: str | None = Field(None, max_length=200)
    #: stop the run before a summary call would take its LLM spend past this, in dollars
    spend_cap_usd: float | None = Field(None, ge=0, le=10_000)


class SummarizerOut(Schema):
    """Who writes a what-if run's summaries, what they cost so far, whether the run waits."""

    backend: str
    model: str
    calls: int = Field(..., description="summaries the backend has written for this run")
    spent_usd: float
    spend_cap_usd: float | None
    waiting: bool = Field(..., description="the run waits for (or is fetching) a summary")


class RunOut(Schema):
    id: int
    session_id: int
    mode: str
    preset: str
    status: Literal["queued", "running", "done", "failed"]
    progress: float = Field(..., description="fraction done, 0..1")
    error: str
    created_at: datetime
    finished_at: datetime | None
    summary: dict[str, Any]
    summarizer: SummarizerOut | None = Field(
        None, description="set when an LLM writes the run's summaries (null: extractive)"
    )


class RequestPage(Schema):
    count: int
    items: list[dict[str, Any]]
