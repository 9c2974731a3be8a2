"""What the Tune pages share: the config and workspace pickers of their forms, the Tune
page itself, and deleting or cancelling a config, comparison or sweep."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from contextlab import engine
from contextlab.http import AuthedRequest, back_to
from contextlab.transcripts.models import Transcript
from contextlab.tuning import configs as tuning_configs
from contextlab.tuning import reports as tuning_reports
from contextlab.tuning import services
from contextlab.tuning.models import Comparison, SavedConfig, Sweep
from contextlab.workspaces import access
from contextlab.workspaces import services as workspace_services
from contextlab.workspaces.models import Role, Workspace

# --- shared form helpers -----------------------------------------------------------------------


def _config_choices(request: AuthedRequest) -> list[dict[str, str]]:
    """Options for a "config" select: every preset, then the user's saved configs (latest)."""
    options = [
        {
            "value": f"preset:{name}",
            "label": name,
            "group": "Presets",
            "description": engine.PRESET_DESCRIPTIONS.get(
                name, "the preset matching each session's Claude Code version"
            ),
        }
        for name in engine.PRESET_NAMES
    ]
    for saved in tuning_reports.readable_configs(request.user):
        latest = saved.latest
        if latest is not None:
            options.append(
                {
                    "value": f"version:{latest.pk}",
                    "label": latest.label,
                    "group": f"Configs of {saved.workspace.name}",
                    "description": f"{latest.base_preset} + {len(latest.overrides)} change(s)",
                }
            )
    return options


def _spec_from_form(
    request: AuthedRequest, values: dict[str, Any], prefix: str
) -> tuning_configs.ConfigSpec:
    """The config of side ``prefix`` of a comparison's or sweep's form (its cleaned values)."""
    choice = str(values[f"{prefix}_config"])
    try:
        overrides = engine.parse_overrides(values[f"{prefix}_overrides"])
    except engine.FieldError as exc:
        raise exc.within(prefix) from None
    preset: str | None = None
    version_id: int | None = None
    kind, _, value = choice.partition(":")
    if kind == "version" and value.isdigit():
        version_id = int(value)
    elif kind == "preset":
        preset = value
    else:
        raise engine.FieldError(f"{prefix}.preset", "pick a preset or a saved config")
    return tuning_configs.config_spec(
        owner=request.user,
        preset=preset,
        overrides=overrides,
        version_id=version_id,
        prefix=prefix,
    )


def _error(exc: engine.FieldError) -> dict[str, Any]:
    return {"field": exc.field, "message": exc.message, "side": exc.field.split(".")[0]}


def _selected_sessions(request: AuthedRequest) -> list[Transcript]:
    ids = request.POST.getlist("sessions")
    if not all(i.isdigit() for i in ids):
        raise Http404("no such session")
    transcripts = services.owned_sessions(request.user, [int(i) for i in ids])
    if transcripts is None:
        raise Http404("no such session")
    return transcripts


def _workspace_choices(request: AuthedRequest) -> list[Workspace]:
    """The workspaces a new config, comparison or sweep may go to (where the user is an
    editor), the personal one first: it is the default."""
    personal = workspace_services.personal_workspace(request.user)
    others = access.workspaces(request.user, access.WRITE).exclude(pk=personal.pk)
    return [personal, *others]


def _workspace_from_form(request: AuthedRequest, workspace_id: int | None = None) -> Workspace:
    """The workspace a new config, comparison or sweep goes to (None: the personal one)."""
    if workspace_id is None:
        raw = request.POST.get("workspace_id", "")
        workspace_id = int(raw) if raw.isdigit() else None
    return services.target_workspace(request.user, workspace_id)


def _sessions_workspace(request: AuthedRequest) -> str:
    """The form's default workspace: that of the sessions it was opened for (``?session=``),
    when they share one the user may create in, else "" (the personal one)."""
    picked = _preselected(request)
    if not picked:
        return ""
    found = set(
        access.sessions(request.user, access.WRITE)
        .filter(pk__in=picked)
        .values_list("workspace_id", flat=True)
    )
    return str(found.pop()) if len(found) == 1 else ""


def _preselected(request: AuthedRequest) -> set[int]:
    return {int(i) for i in request.GET.getlist("session") if i.isdigit()}


def _sessions_for_form(request: AuthedRequest) -> list[Transcript]:
    return list(access.sessions(request.user, access.WRITE).order_by("-created_at", "-pk"))


# --- overview ----------------------------------------------------------------------------------


def _with_status(items: Iterable[Comparison | Sweep], user: User) -> list[dict[str, Any]]:
    """``{"item", "status", "sessions"}`` rows for the Tune page (runs prefetched: no query per
    row); only the sessions the user can read are named."""
    readable = set(access.sessions(user).values_list("pk", flat=True))
    return [
        {
            "item": item,
            "status": tuning_reports.items_status(item.items.all()),
            "sessions": [s for s in item.sessions.all() if s.pk in readable],
        }
        for item in items
    ]


@login_required
def index(request: AuthedRequest) -> HttpResponse:
    user = request.user
    return render(
        request,
        "tuning/index.html",
        {
            "configs": tuning_reports.readable_configs(user),
            "comparisons": _with_status(tuning_reports.workspace_comparisons(user)[:50], user),
            "sweeps": _with_status(tuning_reports.workspace_sweeps(user)[:50], user),
            "has_sessions": access.sessions(user, access.WRITE).exists(),
        },
    )


Owned = TypeVar("Owned", SavedConfig, Comparison, Sweep)


def _delete_owned(request: AuthedRequest, model: type[Owned], pk: int) -> HttpResponse:
    """POST only: delete a config, comparison or sweep (an owner of its workspace) and go back
    to the Tune page."""
    item = access.item_for(request.user, model.objects.all(), pk, access.MANAGE)
    name = f"config “{item.name}”" if isinstance(item, SavedConfig) else str(item)
    services.delete_owned(item)
    messages.success(request, f"Deleted {name}. The runs it used stay with their sessions.")
    return redirect("tuning:index")


@login_required
@require_POST
def config_delete(request: AuthedRequest, pk: int) -> HttpResponse:
    return _delete_owned(request, SavedConfig, pk)


Runnable = TypeVar("Runnable", Comparison, Sweep)


def _cancel_owned(request: AuthedRequest, model: type[Runnable], pk: int) -> HttpResponse:
    """POST only: stop a comparison's or sweep's queued and running runs (an editor of its
    workspace: whoever may start one may stop one)."""
    item = access.item_for(request.user, model.objects.all(), pk, access.WRITE)
    stopped, shared = services.cancel_owned(item)
    note = (
        f" {shared} run{'s' if shared != 1 else ''} another comparison or sweep also uses went on."
        if shared
        else ""
    )
    messages.success(
        request, f"Cancelled {stopped} run{'s' if stopped != 1 else ''} of {item}.{note}"
    )
    return back_to(request, item.get_absolute_url())


@login_required
@require_POST
def comparison_cancel(request: AuthedRequest, pk: int) -> HttpResponse:
    return _cancel_owned(request, Comparison, pk)


@login_required
@require_POST
def sweep_cancel(request: AuthedRequest, pk: int) -> HttpResponse:
    return _cancel_owned(request, Sweep, pk)


@login_required
@require_POST
def comparison_delete(request: AuthedRequest, pk: int) -> HttpResponse:
    return _delete_owned(request, Comparison, pk)


@login_required
@require_POST
def sweep_delete(request: AuthedRequest, pk: int) -> HttpResponse:
    return _delete_owned(request, Sweep, pk)


def _role_allows(item: SavedConfig | Comparison | Sweep, need: Role) -> bool:
    """Whether the role the gate annotated on ``item`` allows ``need`` (for buttons)."""
    role = access.member_role(item)
    return role is not None and role.allows(need)
