"""The Share dialog's parts used by every kind of link, the dialog of a comparison and of a
sweep, and their read-only shared pages (tables and charts; no forms)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from contextlab.http import AuthedRequest
from contextlab.sharing import services, targets
from contextlab.sharing.models import ShareLink
from contextlab.tuning import services as tuning
from contextlab.tuning import verdicts
from contextlab.tuning.models import Comparison, Sweep
from contextlab.workspaces import access


def share_form(request: HttpRequest) -> dict[str, Any]:
    """The dialog's choices: ``audience``, ``days`` (None: never), ``keep`` and ``mode``."""
    raw_days = request.POST.get("expires_in_days", "")
    return {
        "audience": request.POST.get("audience", ShareLink.Audience.LINK),
        "days": int(raw_days) if raw_days.isdigit() else None,
        "keep": request.POST.getlist("keep"),
        "mode": request.POST.get("mode", ShareLink.Mode.FULL),
    }


def dialog_context(
    *,
    target_kind: str,
    target_name: str,
    back_url: str,
    crumbs: list[tuple[str, str]],
    workspace_name: str,
    not_ready: str,
) -> dict[str, Any]:
    """What the one Share dialog (and its "created" page) needs of whatever is shared."""
    return {
        "target_kind": target_kind,
        "target_name": target_name,
        "back_url": back_url,
        "crumbs": [*crumbs, (back_url, target_name)],
        "workspace_name": workspace_name,
        "not_ready": not_ready,
        "expiry_days": services.EXPIRY_DAYS,
        "default_days": services.DEFAULT_EXPIRY_DAYS,
    }


def dialog_answer(
    request: HttpRequest,
    context: dict[str, Any],
    *,
    create: Callable[[dict[str, Any]], tuple[ShareLink, str]],
    findings: Callable[[], list[dict[str, Any]] | None],
) -> HttpResponse:
    """The Share dialog for anything shared. GET: audience, expiry and what redaction found
    (keep or drop by category); POST: ``create(choices)`` and show the link once, or the
    dialog again with the reason."""
    if request.method == "POST":
        try:
            link, token = create(share_form(request))
        except services.ShareError as exc:
            context["error"] = exc
            context["findings"] = findings()
            return render(request, "sharing/dialog.html", context, status=exc.http_status)
        context["link"] = link
        context["url"] = request.build_absolute_uri(reverse("sharing:shared", args=[token]))
        return render(request, "sharing/created.html", context, status=201)
    context["findings"] = findings()
    return render(request, "sharing/dialog.html", context)


def _target_dialog(request: AuthedRequest, target: Comparison | Sweep) -> HttpResponse:
    """GET: audience, expiry and the redaction findings; POST: make the link, show it once."""
    kind = "comparison" if isinstance(target, Comparison) else "sweep"
    context = dialog_context(
        target_kind=kind,
        target_name=f"{kind} #{target.pk}",
        back_url=target.get_absolute_url(),
        crumbs=[(reverse("tuning:index"), "Tune")],
        workspace_name=target.workspace.name,
        not_ready=f"This {kind}'s replays are not all done: share it once they are.",
    )
    return dialog_answer(
        request,
        context,
        create=lambda form: targets.create_share(user=request.user, target=target, **form),
        findings=lambda: _target_findings(target, request),
    )


def _target_findings(
    target: Comparison | Sweep, request: AuthedRequest
) -> list[dict[str, Any]] | None:
    try:
        return targets.preview_findings(target, request.user)
    except services.ShareError:
        return None


def _gated(request: AuthedRequest, queryset: QuerySet[Any], pk: int) -> Any:
    # sharing is an editor's action, as for a session
    return access.item_for(request.user, queryset, pk, access.WRITE)


@login_required
def comparison_dialog(request: AuthedRequest, pk: int) -> HttpResponse:
    return _target_dialog(
        request, _gated(request, Comparison.objects.select_related("workspace"), pk)
    )


@login_required
def sweep_dialog(request: AuthedRequest, pk: int) -> HttpResponse:
    return _target_dialog(request, _gated(request, Sweep.objects.select_related("workspace"), pk))


def shared_target(request: HttpRequest, link: ShareLink, base: dict[str, Any]) -> HttpResponse:
    """The shared page of a comparison or sweep link (``base``: what every shared page has)."""
    snapshot = services.snapshot_data(link)
    context = {**base, "snapshot": snapshot}
    if link.kind == "comparison":
        delta = snapshot["delta"]
        goal = verdicts.DEFAULT_GOAL
        context.update(
            {
                "comparison": snapshot["comparison"],
                "readings": verdicts.read_delta(delta, goal) if delta else {},
                "headline": verdicts.headline(delta, goal) if delta else "",
                "pairs": [
                    {
                        **pair,
                        # unique ids per session: app.js draws every [data-chart] it finds
                        "charts": [
                            (f"{chart['id']}-{number}", chart["figure"])
                            for chart in pair["figures"] or []
                        ],
                    }
                    for number, pair in enumerate(snapshot["pairs"])
                ],
            }
        )
        return render(request, "sharing/comparison.html", context)
    context.update(
        {
            "sweep": snapshot["sweep"],
            "points": snapshot["points"],
            "figure": snapshot["figure"],
            "measures": tuning.MEASURES,
        }
    )
    return render(request, "sharing/sweep.html", context)
