"""Workspace writes: personal workspaces, team workspaces, members and invites."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from contextlab.errors import FieldProblem
from contextlab.workspaces.models import Invite, Membership, Role, Workspace

#: how long an invite link works unless told otherwise
INVITE_DAYS = 7
INVITE_PREFIX = "clw_"


class WorkspaceError(FieldProblem):
    """A request about a workspace that cannot be done; ``field`` names the bad input."""


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def personal_workspace(user: User) -> Workspace:
    """The user's personal workspace (they own it), created on first need."""
    existing = Workspace.objects.filter(personal_for=user).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            workspace = Workspace.objects.create(
                name=f"{user.username} (personal)", personal_for=user, created_by=user
            )
            Membership.objects.create(workspace=workspace, user=user, role=Role.OWNER)
    except IntegrityError:  # created concurrently
        return Workspace.objects.get(personal_for=user)
    return workspace


def create_workspace(*, creator: User, name: str) -> Workspace:
    name = name.strip()
    if not name:
        raise WorkspaceError("name", "a workspace needs a name")
    if len(name) > 100:
        raise WorkspaceError("name", "at most 100 characters")
    with transaction.atomic():
        workspace = Workspace.objects.create(name=name, created_by=creator)
        Membership.objects.create(workspace=workspace, user=creator, role=Role.OWNER)
    return workspace


def parse_role(value: str) -> Role:
    try:
        return Role(value)
    except ValueError:
        raise WorkspaceError(
            "role", f"unknown role {value!r}: use viewer, editor or owner"
        ) from None


def set_member(*, workspace: Workspace, username: str, role: str) -> Membership:
    """Add ``username`` with ``role``, or change their role."""
    parsed = parse_role(role)
    if workspace.is_personal:
        raise WorkspaceError("workspace", "a personal workspace has no other members")
    user = User.objects.filter(username=username).first()
    if user is None:
        raise WorkspaceError("username", f"no user named {username!r}")
    with transaction.atomic():
        membership, created = Membership.objects.select_for_update().get_or_create(
            workspace=workspace, user=user, defaults={"role": parsed}
        )
        if not created and membership.role != parsed:
            if membership.role == Role.OWNER and parsed != Role.OWNER:
                _keep_an_owner(workspace, leaving=user)
            membership.role = parsed
            membership.save(update_fields=["role"])
    return membership


def _keep_an_owner(workspace: Workspace, *, leaving: User) -> None:
    others = (
        Membership.objects.filter(workspace=workspace, role=Role.OWNER)
        .exclude(user=leaving)
        .count()
    )
    if others == 0:
        raise WorkspaceError("username", "a workspace needs at least one owner")


def remove_member(*, workspace: Workspace, username: str) -> None:
    """Remove a member; their access ends with this call (the gate reads memberships live)."""
    membership = (
        Membership.objects.select_related("user")
        .filter(workspace=workspace, user__username=username)
        .first()
    )
    if membership is None:
        raise WorkspaceError("username", f"{username!r} is not a member of {workspace.name}")
    if workspace.is_personal:
        raise WorkspaceError("username", "the owner of a personal workspace cannot leave it")
    if membership.role == Role.OWNER:
        _keep_an_owner(workspace, leaving=membership.user)
    membership.delete()


def create_invite(
    *, workspace: Workspace, creator: User, role: str, days: int = INVITE_DAYS
) -> tuple[Invite, str]:
    """A one-use invite; returns the row and the clear-text token (never stored)."""
    parsed = parse_role(role)
    if workspace.is_personal:
        raise WorkspaceError("workspace", "a personal workspace has no other members")
    if not 1 <= days <= 30:
        raise WorkspaceError("days", "an invite lasts 1 to 30 days")
    token = INVITE_PREFIX + secrets.token_urlsafe(24)
    invite = Invite.objects.create(
        workspace=workspace,
        role=parsed,
        token_hash=_hash(token),
        created_by=creator,
        expires_at=timezone.now() + timedelta(days=days),
    )
    return invite, token


def accept_invite(*, token: str, user: User) -> Membership:
    """Join the invite's workspace; an invite works once and until it expires."""
    with transaction.atomic():
        invite = (
            Invite.objects.select_for_update()
            .select_related("workspace")
            .filter(token_hash=_hash(token))
            .first()
        )
        if invite is None:
            raise WorkspaceError("token", "this invite link is not valid")
        if invite.used_at is not None:
            raise WorkspaceError("token", "this invite link was already used")
        if invite.expires_at <= timezone.now():
            raise WorkspaceError("token", "this invite link has expired")
        invite.used_at = timezone.now()
        invite.used_by = user
        invite.save(update_fields=["used_at", "used_by"])
        membership, created = Membership.objects.get_or_create(
            workspace=invite.workspace, user=user, defaults={"role": invite.role}
        )
        if not created and not Role(membership.role).allows(Role(invite.role)):
            membership.role = invite.role
            membership.save(update_fields=["role"])
    return membership
