"""JSON API for tuning: A/B comparisons and one-field sweeps, each in a workspace (members read
it, editors create, owners delete)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpResponse
from ninja import Router
from ninja.responses import Status

from contextlab import engine
from contextlab.http import AuthedRequest
from contextlab.tuning import configs as tuning_configs
from contextlab.tuning import reports as tuning_reports
from contextlab.tuning import services
from contextlab.tuning.models import Comparison, Sweep
from contextlab.tuning.schemas import (
    ComparisonIn,
    ComparisonListOut,
    ComparisonOut,
    ConfigFieldOut,
    ConfigIn,
    CreatedOut,
    SweepIn,
    SweepListOut,
    SweepOut,
)
from contextlab.workspaces import access

router = Router(tags=["tuning"])


def _sessions(request: AuthedRequest, ids: list[int]) -> list[Any]:
    transcripts = services.owned_sessions(request.user, ids)
    if transcripts is None:
        raise Http404("no such session")
    return transcripts


def _spec(request: AuthedRequest, side: ConfigIn, prefix: str) -> tuning_configs.ConfigSpec:
    return tuning_configs.config_spec(
        owner=request.user,
        preset=side.preset,
        overrides=side.config,
        version_id=side.version_id,
        prefix=prefix,
    )


@router.get("/config-fields", response=list[ConfigFieldOut], operation_id="list_config_fields")
def list_config_fields(request: AuthedRequest) -> list[dict[str, Any]]:
    """Every what-if config field with the Claude Code setting or environment variable that
    produces it (from which version, within which limits), or ``experiment`` when none does."""
    return [{**spec, **spec["counterpart"]} for spec in engine.field_specs()]


@router.post(
    "/comparisons",
    response={201: CreatedOut, 422: dict[str, Any]},
    operation_id="create_comparison",
)
def create_comparison(request: AuthedRequest, payload: ComparisonIn) -> Status[dict[str, Any]]:
    transcripts = _sessions(request, payload.session_ids)
    comparison = services.create_comparison(
        owner=request.user,
        workspace=services.target_workspace(request.user, payload.workspace_id),
        transcripts=transcripts,
        a=_spec(request, payload.a, "a"),
        b=_spec(request, payload.b, "b"),
    )
    return Status(
        201,
        {
            "id": comparison.pk,
            "status": tuning_reports.comparison_status(comparison),
            "url": comparison.get_absolute_url(),
        },
    )


@router.get("/comparisons", response=list[ComparisonListOut], operation_id="list_comparisons")
def list_comparisons(request: AuthedRequest) -> list[dict[str, Any]]:
    """The caller's comparisons, newest first."""
    comparisons = tuning_reports.workspace_comparisons(request.user)
    readable = set(access.sessions(request.user).values_list("pk", flat=True))
    return [
        {
            "id": c.pk,
            "workspace_id": c.workspace_id,
            "status": tuning_reports.items_status(c.items.all()),
            "url": c.get_absolute_url(),
            "a_label": c.a_label,
            "b_label": c.b_label,
            "session_ids": sorted(s.pk for s in c.sessions.all() if s.pk in readable),
            "created_at": c.created_at,
        }
        for c in comparisons
    ]


@router.get("/comparisons/{comparison_id}", response=ComparisonOut, operation_id="get_comparison")
def get_comparison(request: AuthedRequest, comparison_id: int) -> dict[str, Any]:
    comparison = access.item_for(request.user, Comparison.objects.all(), comparison_id)
    report = tuning_reports.comparison_report(comparison, reader=request.user)

    def side(name: str) -> dict[str, Any]:
        return {
            "label": comparison.side_label(name),
            "preset": getattr(comparison, f"{name}_preset"),
            "config": getattr(comparison, f"{name}_overrides"),
            "claude_code": engine.claude_code_settings(
                getattr(comparison, f"{name}_overrides")
            ).as_dict(),
            **report[name],
        }

    return {
        "id": comparison.pk,
        "workspace_id": comparison.workspace_id,
        "status": report["status"],
        "done_sessions": report["done_sessions"],
        "a": side("a"),
        "b": side("b"),
        "delta": report["delta"],
        "sessions": [
            {
                "session_id": pair.transcript.pk,
                "name": pair.transcript.name,
                "display_name": pair.transcript.display_name,
                "a_run_id": pair.a.pk if pair.a else None,
                "b_run_id": pair.b.pk if pair.b else None,
                "a": pair.a_measures,
                "b": pair.b_measures,
                "delta": pair.delta,
                "first_divergence": pair.divergence,
                "first_divergence_number": (
                    pair.divergence + 1 if pair.divergence is not None else None
                ),
            }
            for pair in report["pairs"]
        ],
    }


@router.post(
    "/sweeps", response={201: CreatedOut, 422: dict[str, Any]}, operation_id="create_sweep"
)
def create_sweep(request: AuthedRequest, payload: SweepIn) -> Status[dict[str, Any]]:
    transcripts = _sessions(request, payload.session_ids)
    sweep = services.create_sweep(
        owner=request.user,
        workspace=services.target_workspace(request.user, payload.workspace_id),
        transcripts=transcripts,
        base=_spec(request, payload.base, "base"),
        field_name=payload.field,
        values=payload.values,
    )
    return Status(
        201,
        {
            "id": sweep.pk,
            "status": tuning_reports.sweep_status(sweep),
            "url": sweep.get_absolute_url(),
        },
    )


@router.get("/sweeps", response=list[SweepListOut], operation_id="list_sweeps")
def list_sweeps(request: AuthedRequest) -> list[dict[str, Any]]:
    """The caller's sweeps, newest first."""
    sweeps = tuning_reports.workspace_sweeps(request.user)
    readable = set(access.sessions(request.user).values_list("pk", flat=True))
    return [
        {
            "id": s.pk,
            "workspace_id": s.workspace_id,
            "status": tuning_reports.items_status(s.items.all()),
            "url": s.get_absolute_url(),
            "field": s.field,
            "values": s.values,
            "base_label": s.base_label,
            "session_ids": sorted(t.pk for t in s.sessions.all() if t.pk in readable),
            "created_at": s.created_at,
        }
        for s in sweeps
    ]


@router.get("/sweeps/{sweep_id}", response=SweepOut, operation_id="get_sweep")
def get_sweep(request: AuthedRequest, sweep_id: int) -> dict[str, Any]:
    sweep = access.item_for(request.user, Sweep.objects.all(), sweep_id)
    report = tuning_reports.sweep_report(sweep, reader=request.user)
    return {
        "id": sweep.pk,
        "workspace_id": sweep.workspace_id,
        "status": report["status"],
        "field": sweep.field,
        "base": {
            "label": sweep.base_label,
            "preset": sweep.base_preset,
            "config": sweep.base_overrides,
        },
        "session_ids": list(
            sweep.sessions.filter(pk__in=access.sessions(request.user).values("pk"))
            .order_by("pk")
            .values_list("pk", flat=True)
        ),
        "points": report["points"],
        "best": report["best"],
    }


@router.delete(
    "/comparisons/{comparison_id}", response={204: None}, operation_id="delete_comparison"
)
def delete_comparison(request: AuthedRequest, comparison_id: int) -> HttpResponse:
    """Delete the comparison; its runs stay with their sessions."""
    comparison = access.item_for(
        request.user, Comparison.objects.all(), comparison_id, access.MANAGE
    )
    services.delete_owned(comparison)
    return HttpResponse(status=204)


@router.delete("/sweeps/{sweep_id}", response={204: None}, operation_id="delete_sweep")
def delete_sweep(request: AuthedRequest, sweep_id: int) -> HttpResponse:
    """Delete the sweep; its runs stay with their sessions."""
    sweep = access.item_for(request.user, Sweep.objects.all(), sweep_id, access.MANAGE)
    services.delete_owned(sweep)
    return HttpResponse(status=204)
