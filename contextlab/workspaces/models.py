"""Workspaces: who may see and change which sessions.

Every user has a personal workspace (created with the account); anyone can create a team
workspace and add members. A session belongs to one workspace; runs of a session belong to it
through the session. ``contextlab.workspaces.access`` is the one place that turns a membership
into a permission.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    """What a member may do; each role can do everything the roles before it can."""

    VIEWER = "viewer"  # read everything in the workspace
    EDITOR = "editor"  # also upload, run, compare, share
    OWNER = "owner"  # also manage members, delete

    @property
    def rank(self) -> int:
        return ROLE_ORDER.index(self)

    def allows(self, needed: Role) -> bool:
        return self.rank >= needed.rank


ROLE_ORDER: tuple[Role, ...] = (Role.VIEWER, Role.EDITOR, Role.OWNER)


def roles_at_least(needed: Role) -> list[str]:
    """The role values that include ``needed`` (for ``role__in`` filters)."""
    return [str(role) for role in ROLE_ORDER[needed.rank :]]


class Workspace(models.Model):
    name = models.CharField(max_length=100)
    #: set on a user's personal workspace (exactly one per user); None on team workspaces
    personal_for = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="personal_workspace",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("name", "pk")

    def __str__(self) -> str:
        return self.name

    @property
    def is_personal(self) -> bool:
        return self.personal_for_id is not None


class Membership(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("workspace", "user__username")
        constraints = (
            models.UniqueConstraint(fields=["workspace", "user"], name="membership_unique_user"),
        )

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"


class Invite(models.Model):
    """A one-use link that lets someone (with or without an account yet) join a workspace."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="invites")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    #: hex SHA-256 of the token; the token itself is shown once, to its creator
    token_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"invite to {self.workspace} as {self.role}"
