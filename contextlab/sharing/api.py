"""JSON API for share links and exports."""

from __future__ import annotations

from typing import Any, Literal

from django.http import Http404, HttpResponse
from django.urls import reverse
from ninja import Router
from ninja.responses import Status

from contextlab import redaction
from contextlab.comments import services as comments
from contextlab.http import AuthedRequest, api_json
from contextlab.runs.models import Run
from contextlab.sharing import export, services, targets
from contextlab.sharing.models import ShareLink
from contextlab.sharing.schemas import ShareCreatedOut, ShareIn, ShareOut
from contextlab.tuning.models import Comparison, Sweep
from contextlab.workspaces import access

router = Router(tags=["sharing"])
exports = Router(tags=["sessions"])


def _share_out(link: ShareLink) -> dict[str, Any]:
    return {
        "id": link.pk,
        "kind": link.kind,
        "session_id": link.transcript_id,
        "run_id": link.run_id,
        "comparison_id": link.comparison_id,
        "sweep_id": link.sweep_id,
        "audience": link.audience,
        "mode": link.mode,
        "created_by": link.created_by.username,
        "created_at": link.created_at,
        "expires_at": link.expires_at,
        "revoked_at": link.revoked_at,
        "state": link.state,
        "views": link.views,
        "last_viewed_at": link.last_viewed_at,
    }


@router.post(
    "",
    response={201: ShareCreatedOut, 403: dict[str, Any], 409: dict[str, Any], 422: dict[str, Any]},
    operation_id="create_share",
    summary="Share a session's report, a comparison or a sweep: a redacted, read-only snapshot "
    "behind a random token",
)
def create_share(request: AuthedRequest, payload: ShareIn) -> Status[dict[str, Any]]:
    named = [
        name
        for name in ("session_id", "comparison_id", "sweep_id")
        if getattr(payload, name) is not None
    ]
    if len(named) != 1:
        raise services.ShareError(
            "session_id", "name exactly one of session_id, comparison_id, sweep_id"
        )
    keep = redaction.categories() if not payload.redact else payload.keep
    if payload.session_id is not None:
        transcript = access.session_for(request.user, payload.session_id, access.WRITE)
        run = None
        if payload.run_id is not None:
            run = Run.objects.filter(pk=payload.run_id, transcript=transcript).first()
            if run is None:
                raise Http404("no such run")
        link, token = services.create_share(
            user=request.user,
            transcript=transcript,
            run=run,
            audience=payload.audience,
            days=payload.expiry_days(),
            keep=keep,
            mode=payload.mode,
        )
    else:
        target: Comparison | Sweep
        if payload.comparison_id is not None:
            target = access.item_for(
                request.user, Comparison.objects.all(), payload.comparison_id, access.WRITE
            )
        else:
            target = access.item_for(
                request.user, Sweep.objects.all(), payload.sweep_id or 0, access.WRITE
            )
        link, token = targets.create_share(
            user=request.user,
            target=target,
            audience=payload.audience,
            days=payload.expiry_days(),
            keep=keep,
            mode=payload.mode,
        )
    return Status(
        201,
        {
            "id": link.pk,
            "url": request.build_absolute_uri(reverse("sharing:shared", args=[token])),
            "expires_at": link.expires_at,
            "mode": link.mode,
            "findings": [{"category": f["category"], "count": f["count"]} for f in link.findings],
        },
    )


@router.get("", response=list[ShareOut], operation_id="list_shares")
def list_shares(request: AuthedRequest) -> list[dict[str, Any]]:
    return [_share_out(link) for link in services.visible_links(request.user)]


@router.delete("/{share_id}", response={204: None}, operation_id="revoke_share")
def revoke_share(request: AuthedRequest, share_id: int) -> HttpResponse:
    """Revoke a link you made (or, as workspace owner, any link of the workspace)."""
    link = services.link_for(request.user, share_id)
    if link is None:
        raise Http404("no such share")
    services.revoke(link)
    return HttpResponse(status=204)


@exports.get(
    "/{session_id}/export",
    response={200: dict[str, Any], 409: dict[str, Any], 422: dict[str, Any]},
    operation_id="export_session",
    summary="The session's replay result as JSON (redacted unless redact=false), or a "
    "self-contained, always redacted HTML report (format=html)",
)
def export_session(
    request: AuthedRequest,
    session_id: int,
    format: Literal["json", "html"] = "json",
    redact: bool = True,
    run_id: int | None = None,
) -> Status[dict[str, Any]] | HttpResponse:
    transcript = access.session_for(request.user, session_id, access.READ)
    run = services.pick_run(transcript, run_id)
    if format == "html":
        if not redact:
            raise services.ShareError("redact", "the HTML export is always redacted")
        try:
            html, _ = export.html_export(transcript, run)
        except services.ShareError as exc:
            return Status(409, {"detail": exc.message})
        response = HttpResponse(html, content_type="text/html; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="session-{transcript.pk}.html"'
        return response
    try:
        source = services.snapshot_source(transcript, run)
    except services.ShareError as exc:
        return Status(409, {"detail": exc.message})
    body = {
        "session": source["transcript"],
        "run": source["run"],
        "result": source["result"],
        "comments": source["comments"]
        if redact
        else comments.snapshot_comments(transcript, for_redaction=False),
    }
    findings: list[dict[str, Any]] = []
    if redact:
        redacted = redaction.redact_tree(body)
        body = redacted.tree
        findings = [
            {"category": f["category"], "count": f["count"]} for f in redacted.by_category()
        ]
    body["redaction"] = {"redacted": redact, "findings": findings}
    response = api_json(request, body)
    response["Content-Disposition"] = f'attachment; filename="session-{transcript.pk}.json"'
    return response
