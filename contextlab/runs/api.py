"""JSON API for runs: queue a replay, poll it, page through its per-request results."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from ninja import Field as NinjaField
from ninja import Query, Router, Schema
from ninja.responses import Status

from contextlab.engine import as_result
from contextlab.http import AuthedRequest, api_json
from contextlab.runs import explorer as explorer_builder
from contextlab.runs import services, waste
from contextlab.runs.models import Run
from contextlab.runs.schemas import (
    RequestComposition,
    RequestPage,
    RunIn,
    RunOut,
    ToolBreakdownOut,
    WasteOut,
)
from contextlab.summaries import services as summaries
from contextlab.workspaces import access

router = Router(tags=["runs"])


def _run_out(run: Run) -> dict[str, Any]:
    return {
        "id": run.pk,
        "session_id": run.transcript_id,
        "mode": run.mode,
        "preset": run.preset,
        "status": run.status,
        "progress": run.progress,
        "progress_stage": run.progress_stage,
        "error": run.error,
        "provisional": run.provisional,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
        "summary": run.summary,
        "summarizer": summaries.summarizer_status(run),
    }


@router.post(
    "", response={201: RunOut, 403: dict[str, Any], 422: dict[str, Any]}, operation_id="create_run"
)
def create_run(request: AuthedRequest, payload: RunIn) -> Status[dict[str, Any]]:
    transcript = access.session_for(request.user, payload.session_id, access.WRITE)
    run = services.start_run(
        owner=request.user,
        transcript=transcript,
        mode=payload.mode,
        preset=payload.preset or "",
        overrides=payload.config,
        summarizer=payload.summarizer,
        summary_model=payload.summary_model or "",
        spend_cap_usd=payload.spend_cap_usd,
    )
    return Status(201, _run_out(run))


@router.get("/{run_id}", response=RunOut, operation_id="get_run")
def get_run(request: AuthedRequest, run_id: int) -> dict[str, Any]:
    run = access.run_for(request.user, run_id, access.READ)
    return _run_out(services.refresh_run(run))


@router.post(
    "/{run_id}/cancel",
    response={200: RunOut, 403: dict[str, Any], 409: dict[str, Any]},
    operation_id="cancel_run",
)
def cancel_run(request: AuthedRequest, run_id: int) -> Status[dict[str, Any]]:
    """Stop a queued or running run: it ends failed with "Cancelled" (409 if it had ended).
    Editors and owners of the session's workspace."""
    run = access.run_for(request.user, run_id, access.WRITE)
    if not services.cancel_run(run):
        return Status(409, {"detail": f"run {run.pk} is {run.status}; only an active run stops"})
    run.refresh_from_db()
    return Status(200, _run_out(run))


class PageParams(Schema):
    offset: int = NinjaField(0, ge=0)
    limit: int = NinjaField(100, ge=1, le=1000)


@router.get(
    "/{run_id}/requests",
    response={200: RequestPage, 409: dict[str, Any]},
    operation_id="list_run_requests",
)
def list_run_requests(
    request: AuthedRequest, run_id: int, page: Query[PageParams]
) -> Status[dict[str, Any]] | HttpResponse:
    run = access.run_for(request.user, run_id, access.READ)
    data = services.result_data(run)
    if data is None:
        return Status(
            409, {"detail": f"run {run.pk} is {run.status}; results exist once it is done"}
        )
    requests = as_result(data)["requests"]
    body = {"count": len(requests), "items": requests[page.offset : page.offset + page.limit]}
    # The rows go out as stored, not validated again against RequestPage: the engine builds
    # them to the declared shape (mypy checks it; tests compare the keys and value types it
    # emits with this schema), and validating every value again made a 1,000-row page about
    # twice as slow to serve.
    return api_json(request, body)


@router.get(
    "/{run_id}/tools",
    response={200: ToolBreakdownOut, 409: dict[str, Any]},
    operation_id="get_run_tools",
)
def get_run_tools(request: AuthedRequest, run_id: int) -> Status[dict[str, Any]] | HttpResponse:
    """Each tool of the session: calls and errors (recorded), tokens of its calls and results
    in the full history, in the model's view at the last request and sent over every request,
    and an estimated share of the cost (``attribution`` says how; not a recorded figure).
    ``requests``: the 0-based indexes of the requests whose response calls the tool."""
    run = access.run_for(request.user, run_id, access.READ)
    data = services.result_data(run)
    if data is None:
        return Status(
            409, {"detail": f"run {run.pk} is {run.status}; results exist once it is done"}
        )
    return api_json(request, dict(services.tool_breakdown(run, data)))


@router.get(
    "/{run_id}/requests/{index}/composition",
    response={200: RequestComposition, 404: dict[str, Any], 409: dict[str, Any]},
    operation_id="get_request_composition",
)
def get_request_composition(
    request: AuthedRequest, run_id: int, index: int
) -> Status[dict[str, Any]]:
    """What one request's prompt is made of, as its explorer page shows it: the parts (system
    and tools estimated, user and assistant text, tool calls and results, ...) and the kinds of
    content of its messages, in display tokens. ``index`` is the row's ``index`` (0-based);
    ``number`` is the request's number on the pages (1-based)."""
    run = access.run_for(request.user, run_id, access.READ)
    data = services.result_data(run)
    if data is None:
        return Status(
            409, {"detail": f"run {run.pk} is {run.status}; results exist once it is done"}
        )
    count = len(as_result(data)["requests"])
    if not 0 <= index < count:
        return Status(404, {"detail": f"request index {index} does not exist (0 to {count - 1})"})
    shown = explorer_builder.request_view(
        data, services.session_messages(run.transcript), index, show_replaced=False
    )
    composition = shown["composition"]
    return Status(
        200,
        {
            "index": index,
            "number": index + 1,
            "model_tokens": shown["req"]["model_tokens"],
            "parts": composition["parts"],
            "content": composition["content"],
        },
    )


@router.get(
    "/{run_id}/waste",
    response={200: WasteOut, 409: dict[str, Any]},
    operation_id="get_run_waste",
)
def get_run_waste(request: AuthedRequest, run_id: int) -> Status[dict[str, Any]]:
    """The run's waste findings (files read again unchanged, oversized outputs later cleared,
    results no later request used, tool definitions never called, cache breaks the 1-hour cache
    would have avoided), each with its cost (an estimate), its requests (0-based positions in
    the run's requests) and a fix; and, per idle gap longer than the cache TTL, compacting at
    the gap against what was paid."""
    run = access.run_for(request.user, run_id, access.READ)
    data = services.result_data(run)
    if data is None:
        return Status(
            409, {"detail": f"run {run.pk} is {run.status}; results exist once it is done"}
        )
    found = waste.run_waste(run.transcript, run, data)
    return Status(200, {"run_id": run.pk, **found})
