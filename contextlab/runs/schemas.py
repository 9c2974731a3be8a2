from __future__ import annotations

import functools
import types
import typing
from datetime import datetime
from typing import Any, Literal, Union, get_args, get_origin, is_typeddict

from ninja import Field, Schema
from pydantic import BaseModel, ConfigDict, create_model

from contextlab import engine
from contextlab.engine import ToolBreakdown, results
from contextlab.transcripts.models import MAX_ROW_ID


class RunIn(Schema):
    session_id: int = Field(..., ge=1, le=MAX_ROW_ID)
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
    progress: float = Field(..., description="fraction done, 0..1, of progress_stage")
    progress_stage: str = Field(
        ...,
        description=(
            "what progress measures: 'counting' (characters of the session counted into "
            "tokens), 'replaying' (requests replayed), '' (not started)"
        ),
    )
    error: str
    provisional: bool = Field(
        False,
        description=(
            "a live session's result that went on from the last replay (only the new requests "
            "replayed, the calibration as fitted before them): estimates provisional until "
            "the session ends and the run is replayed whole; recorded usage and cost are exact"
        ),
    )
    created_at: datetime
    finished_at: datetime | None
    summary: dict[str, Any]
    summarizer: SummarizerOut | None = Field(
        None, description="set when an LLM writes the run's summaries (null: extractive)"
    )


@functools.cache  # one model per TypedDict: the schema is built once per process
def model_of(typed: type) -> type[BaseModel]:
    """A pydantic model with the fields and types of an engine ``TypedDict`` (nested ones too).

    The engine's result rows are declared once, in ``contextlab.engine.results``; deriving the
    API schema from them keeps the OpenAPI document in step with what the engine emits. Keys
    the class does not declare are passed through (``extra="allow"``), so a row is never cut
    short on the way out; a test fails instead when the engine emits an undeclared key.

    A plain ``BaseModel``, not a ninja ``Schema``: the rows are dicts, so they need none of
    Schema's attribute resolution, whose per-object Python validator made a page of rows
    about twenty times slower to serve.
    """
    hints = typing.get_type_hints(typed)
    fields: dict[str, Any] = {name: (_api_type(hint), ...) for name, hint in hints.items()}
    model: type[BaseModel] = create_model(  # type: ignore[call-overload]
        typed.__name__,
        __config__=ConfigDict(extra="allow"),
        __doc__=typed.__doc__,
        **fields,
    )
    return model


def _api_type(hint: Any) -> Any:
    """``hint`` with every TypedDict in it replaced by its schema (``X | None``, ``list[X]``…)."""
    if is_typeddict(hint):
        return model_of(hint)
    origin = get_origin(hint)
    if origin is None:
        return hint
    args = tuple(_api_type(a) for a in get_args(hint))
    if origin in (Union, types.UnionType):
        return Union[args]  # noqa: UP007 (built from a tuple of types)
    if origin is list:
        return list[args[0]]  # type: ignore[valid-type]
    if origin is dict:
        return dict[args[0], args[1]]  # type: ignore[valid-type]
    return hint


#: One request of a run, as the engine emits it (``contextlab.engine.results.RequestRow``).
RequestRowOut = model_of(results.RequestRow)


class RequestPage(Schema):
    count: int
    items: list[RequestRowOut]  # type: ignore[valid-type]


#: A run's tools one by one (``contextlab.engine.results.tools.ToolBreakdown``).
ToolBreakdownOut = model_of(ToolBreakdown)


class CompositionPartOut(Schema):
    kind: str
    tokens: int
    share: float
    estimated: bool


class ContentPartOut(Schema):
    #: ``prose``, ``code``, ``json``, ``output``, ``cjk``, ``encoded`` or ``image``
    kind: str
    label: str
    tokens: int
    share: float


class RequestComposition(Schema):
    index: int
    number: int
    model_tokens: int
    parts: list[CompositionPartOut]
    content: list[ContentPartOut]


class WasteOut(Schema):
    """A finished run's waste findings and its compact-now-or-wait answer (estimates)."""

    run_id: int
    waste: model_of(engine.WasteReport)  # type: ignore[valid-type]
    idle: model_of(engine.IdleAnswer)  # type: ignore[valid-type]
