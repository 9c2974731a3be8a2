"""JSON API for advice: ask which Claude Code settings to use for some sessions and a goal
(a job the worker runs), then read the recommendations."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from ninja import Router
from ninja.responses import Status

from contextlab.advice import reports, services
from contextlab.advice.schemas import AdviceCreatedOut, AdviceIn, AdviceOut
from contextlab.http import AuthedRequest
from contextlab.workspaces import access

router = Router(tags=["advice"])


@router.post(
    "", response={201: AdviceCreatedOut, 422: dict[str, Any]}, operation_id="create_advice"
)
def create_advice(request: AuthedRequest, payload: AdviceIn) -> Status[dict[str, Any]]:
    """Start an advice job: the what-if runs it needs are queued (identical ones reused)."""
    filters = services.filters_from(
        {
            "project": payload.project,
            "member": payload.member,
            "since": payload.since,
            "until": payload.until,
        }
    )
    transcripts = services.choose_sessions(
        request.user,
        session_ids=payload.session_ids,
        workspace_id=payload.workspace_id,
        filters=filters,
    )
    advice = services.create_advice(
        owner=request.user,
        transcripts=transcripts,
        goal=payload.goal,
        cost_cap=payload.cost_cap,
        knobs=payload.knobs,
        filters=filters,
        workspace_id=payload.workspace_id,
    )
    state = reports.progress(advice)
    return Status(
        201,
        {
            "id": advice.pk,
            "status": state["status"],
            "url": advice.get_absolute_url(),
            "total": state["total"],
        },
    )


@router.get("/{advice_id}", response=AdviceOut, operation_id="get_advice")
def get_advice(request: AuthedRequest, advice_id: int) -> dict[str, Any]:
    """Status and progress; once every run is done, the recommendations, best first."""
    return reports.answer(services.readable(request.user, advice_id))


@router.post("/{advice_id}/cancel", response={200: dict[str, int]}, operation_id="cancel_advice")
def cancel_advice(request: AuthedRequest, advice_id: int) -> dict[str, int]:
    """Stop the advice's queued and running runs that nothing else uses."""
    advice = services.readable(request.user, advice_id, access.WRITE)
    return {"cancelled": services.cancel(advice)}


@router.delete("/{advice_id}", response={204: None}, operation_id="delete_advice")
def delete_advice(request: AuthedRequest, advice_id: int) -> HttpResponse:
    """Delete the advice; its runs stay with their sessions."""
    services.delete(services.readable(request.user, advice_id, access.MANAGE))
    return HttpResponse(status=204)
