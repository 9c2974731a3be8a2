"""JSON API for workspaces: create one, list yours, add, change and remove members, invite."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.urls import reverse
from ninja import Router
from ninja.responses import Status

from contextlab.http import AuthedRequest
from contextlab.transcripts.api import field_error
from contextlab.workspaces import access, services
from contextlab.workspaces.models import Membership, Workspace
from contextlab.workspaces.schemas import (
    InviteIn,
    InviteOut,
    MemberIn,
    MemberOut,
    MovedOut,
    MoveIn,
    WorkspaceIn,
    WorkspaceOut,
)

router = Router(tags=["workspaces"])
#: mounted under /sessions: moving a session is an action on the session
sessions = Router(tags=["sessions"])


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
    try:
        workspace = services.create_workspace(creator=request.user, name=payload.name)
    except services.WorkspaceError as exc:
        return Status(422, field_error(exc.field, exc.message))
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
    try:
        membership = services.set_member(
            workspace=workspace, username=payload.username, role=payload.role
        )
    except services.WorkspaceError as exc:
        return Status(422, field_error(exc.field, exc.message))
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
    try:
        services.remove_member(workspace=workspace, username=username)
    except services.WorkspaceError as exc:
        return Status(422, field_error(exc.field, exc.message))
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
    try:
        invite, token = services.create_invite(
            workspace=workspace, creator=request.user, role=payload.role, days=payload.days
        )
    except services.WorkspaceError as exc:
        return Status(422, field_error(exc.field, exc.message))
    url = request.build_absolute_uri(reverse("workspaces:invite", args=[token]))
    return Status(
        201, {"id": invite.pk, "role": invite.role, "expires_at": invite.expires_at, "url": url}
    )


@sessions.post(
    "/{session_id}/move",
    response={200: MovedOut, 403: dict[str, Any], 422: dict[str, Any]},
    operation_id="move_session",
    summary="Move a session and its runs to another workspace (editor of both); its live "
    "share links are revoked",
)
def move_session(
    request: AuthedRequest, session_id: int, payload: MoveIn
) -> Status[dict[str, Any]]:
    transcript = access.session_for(request.user, session_id, access.WRITE)
    try:
        revoked = services.move_session(
            user=request.user, transcript=transcript, workspace_id=payload.workspace_id
        )
    except services.WorkspaceError as exc:
        return Status(422, field_error(exc.field, exc.message))
    return Status(
        200,
        {"id": transcript.pk, "workspace_id": transcript.workspace_id, "revoked_links": revoked},
    )
