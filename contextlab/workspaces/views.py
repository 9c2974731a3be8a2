"""Pages for workspaces: your workspaces and their members, and joining through an invite."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from contextlab.http import AuthedRequest
from contextlab.workspaces import access, services
from contextlab.workspaces.forms import (
    InviteForm,
    MemberForm,
    MemberRemoveForm,
    WorkspaceForm,
    first_error,
)
from contextlab.workspaces.models import Membership, Role


@login_required
def workspace_list(request: AuthedRequest) -> HttpResponse:
    memberships = list(Membership.objects.filter(user=request.user).select_related("workspace"))
    rows = [
        {
            "workspace": m.workspace,
            "role": m.role,
            "can_manage": Role(m.role).allows(access.MANAGE) and not m.workspace.is_personal,
            "members": Membership.objects.filter(workspace=m.workspace).select_related("user"),
        }
        for m in sorted(memberships, key=lambda m: (not m.workspace.is_personal, m.workspace.name))
    ]
    invite_url = request.session.pop("invite_url", None)
    return render(
        request,
        "workspaces/list.html",
        {"rows": rows, "roles": Role.choices, "invite_url": invite_url},
    )


@login_required
@require_POST
def workspace_create(request: AuthedRequest) -> HttpResponse:
    form = WorkspaceForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Workspace not created: {first_error(form)}.")
        return redirect("workspaces:list")
    try:
        workspace = services.create_workspace(creator=request.user, name=form.cleaned_data["name"])
    except services.WorkspaceError as exc:
        messages.error(request, f"Workspace not created: {exc.message}.")
    else:
        messages.success(request, f"Created workspace “{workspace.name}”; you own it.")
    return redirect("workspaces:list")


@login_required
@require_POST
def member_set(request: AuthedRequest, pk: int) -> HttpResponse:
    workspace = access.workspace_for(request.user, pk, access.MANAGE)
    form = MemberForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"{first_error(form)}.")
        return redirect("workspaces:list")
    try:
        membership = services.set_member(
            workspace=workspace,
            username=form.cleaned_data["username"],
            role=form.cleaned_data["role"],
        )
    except services.WorkspaceError as exc:
        messages.error(request, f"{exc.message}.")
    else:
        messages.success(request, f"{membership.user.username} is now {membership.role}.")
    return redirect("workspaces:list")


@login_required
@require_POST
def member_remove(request: AuthedRequest, pk: int) -> HttpResponse:
    workspace = access.workspace_for(request.user, pk, access.MANAGE)
    form = MemberRemoveForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"{first_error(form)}.")
        return redirect("workspaces:list")
    username = form.cleaned_data["username"]
    try:
        services.remove_member(workspace=workspace, username=username)
    except services.WorkspaceError as exc:
        messages.error(request, f"{exc.message}.")
    else:
        messages.success(request, f"Removed {username}; their access ended.")
    return redirect("workspaces:list")


@login_required
@require_POST
def invite_create(request: AuthedRequest, pk: int) -> HttpResponse:
    workspace = access.workspace_for(request.user, pk, access.MANAGE)
    form = InviteForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"{first_error(form)}.")
        return redirect("workspaces:list")
    try:
        _, token = services.create_invite(
            workspace=workspace, creator=request.user, role=form.cleaned_data["role"]
        )
    except services.WorkspaceError as exc:
        messages.error(request, f"{exc.message}.")
        return redirect("workspaces:list")
    # shown once, on the next page: only the hash is stored
    request.session["invite_url"] = request.build_absolute_uri(
        reverse("workspaces:invite", args=[token])
    )
    return redirect("workspaces:list")


def invite(request: HttpRequest, token: str) -> HttpResponse:
    """An invite link: log in or sign up first (the link comes back), then join."""
    if not request.user.is_authenticated:
        return render(
            request, "workspaces/invite.html", {"next": request.get_full_path()}, status=200
        )
    if request.method != "POST":
        return render(request, "workspaces/invite.html", {"token": token})
    try:
        membership = services.accept_invite(token=token, user=request.user)
    except services.WorkspaceError as exc:
        return render(
            request, "workspaces/invite.html", {"token": token, "error": exc.message}, status=410
        )
    messages.success(request, f"You joined “{membership.workspace.name}” as {membership.role}.")
    return redirect("transcripts:list")
