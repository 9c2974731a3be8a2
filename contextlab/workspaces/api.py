"""JSON API for workspaces: create one, list yours, add, change and remove members, invite."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.urls import reverse
from ninja import Router
from ninja.responses import Status

from contextlab.http import AuthedRequest
from contextlab.workspaces import access, services
from contextlab.workspaces.models import Membership, Workspace
from contextlab.workspaces.schemas import (
    InviteIn,
    InviteOut,
    MemberIn,
    MemberOut,
    WorkspaceIn,
    WorkspaceOut,
)

router = Router(tags=["workspaces"])


def workspace_out(workspace: Workspace, role: str) -> dict[str, Any]:
    members = Membership.objects.filter(workspace=workspace).select_related("user")
    return {
        "id": workspace.pk,
        "name": workspace.name,
        "personal": workspace.is_personal,
        "role": role,
        "members": [{"username": m.user.username, "role": m.role} for m in members],
    }


@router.post("", response={201: WorkspaceOut, 422: dict[str, Any]}, operation_id="create_workspace")
def create_workspace(request: AuthedRequest, payload: WorkspaceIn) -> Status[dict[str, Any]]:
    workspace = services.create_workspace(creator=request.user, name=payload.name)
    return Status(201, workspace_out(workspace, "owner"))


@router.get("", response=list[WorkspaceOut], operation_id="list_workspaces")
def list_workspaces(request: AuthedRequest) -> list[dict[str, Any]]:
    memberships = Membership.objects.filter(user=request.user).select_related("workspace")
    return [workspace_out(m.workspace, m.role) for m in memberships]


@router.get("/{workspace_id}", response=WorkspaceOut, operation_id="get_workspace")
def get_workspace(request: AuthedRequest, workspace_id: int) -> dict[str, Any]:
    workspace = access.workspace_for(request.user, workspace_id, access.READ)
    return workspace_out(workspace, str(access.role_in(request.user, workspace.pk)))


@router.post(
    "/{workspace_id}/members",
    response={201: MemberOut, 403: dict[str, Any], 422: dict[str, Any]},
    operation_id="add_workspace_member",
    summary="Add a member by username (or change their role); owners only",
)
def add_member(
    request: AuthedRequest, workspace_id: int, payload: MemberIn
) -> Status[dict[str, Any]]:
    workspace = access.workspace_for(request.user, workspace_id, access.MANAGE)
    membership = services.set_member(
        workspace=workspace, username=payload.username, role=payload.role
    )
    return Status(201, {"username": membership.user.username, "role": membership.role})


@router.delete(
    "/{workspace_id}/members/{username}",
    response={204: None, 403: dict[str, Any], 422: dict[str, Any]},
    operation_id="remove_workspace_member",
    summary="Remove a member; their access ends at once. Owners only",
)
def remove_member(
    request: AuthedRequest, workspace_id: int, username: str
) -> Status[dict[str, Any]] | HttpResponse:
    workspace = access.workspace_for(request.user, workspace_id, access.MANAGE)
    services.remove_member(workspace=workspace, username=username)
    return HttpResponse(status=204)


@router.post(
    "/{workspace_id}/invites",
    response={201: InviteOut, 403: dict[str, Any], 422: dict[str, Any]},
    operation_id="create_workspace_invite",
    summary="A one-use invite link (shown once); owners only",
)
def create_invite(
    request: AuthedRequest, workspace_id: int, payload: InviteIn
) -> Status[dict[str, Any]]:
    workspace = access.workspace_for(request.user, workspace_id, access.MANAGE)
    invite, token = services.create_invite(
        workspace=workspace, creator=request.user, role=payload.role, days=payload.days
    )
    url = request.build_absolute_uri(reverse("workspaces:invite", args=[token]))
    return Status(
        201, {"id": invite.pk, "role": invite.role, "expires_at": invite.expires_at, "url": url}
    )
