"""Moving a session to another workspace: the session is ``transcripts``' to move, so the
workspaces app (which every other app's gate rests on) imports no app above it."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from contextlab.errors import FieldProblem
from contextlab.sharing.models import ShareLink
from contextlab.transcripts import continuations
from contextlab.transcripts.models import Transcript
from contextlab.workspaces.models import Membership, Role, Workspace


class MoveRefused(FieldProblem):
    """A move that cannot be done; ``field`` is ``workspace_id``."""


def move_targets(user: User, transcript: Transcript) -> list[Workspace]:
    """The workspaces ``user`` may move a session to: where they are an editor, but its own."""
    return list(
        Workspace.objects.filter(
            memberships__user=user,
            memberships__role__in=[Role.EDITOR, Role.OWNER],
        ).exclude(pk=transcript.workspace_id)
    )


def move_session(*, user: User, transcript: Transcript, workspace_id: int) -> int:
    """Move a session (and so its runs, which belong to it) to another workspace where
    ``user`` is an editor; the caller checked they are an editor of its current one.

    Its live share links are revoked: whoever it was shared with was chosen for the old
    workspace (a "members only" link would silently change audience). Comparisons and sweeps
    of the old workspace keep the session; members who cannot read the new workspace no
    longer see it there, and those pages say how many sessions are left out. Links between
    sessions that continue each other stay within a workspace (``continuations.relink_moved``).
    Returns how many share links were revoked.
    """
    target = Workspace.objects.filter(
        pk=workspace_id,
        memberships__user=user,
    ).first()
    if target is None:
        raise MoveRefused("workspace_id", "no such workspace")
    role = Role(Membership.objects.get(workspace=target, user=user).role)
    if not role.allows(Role.EDITOR):
        raise MoveRefused(
            "workspace_id",
            f"you are a {role} of {target.name}; moving a session there needs editor",
        )
    if target.pk == transcript.workspace_id:
        raise MoveRefused("workspace_id", f"the session is already in {target.name}")
    with transaction.atomic():
        locked = Transcript.objects.select_for_update().get(pk=transcript.pk)
        if Transcript.objects.filter(workspace=target, sha256=locked.sha256).exists():
            raise MoveRefused(
                "workspace_id", f"{target.name} already has a session with the same transcript"
            )
        locked.workspace = target
        locked.save(update_fields=["workspace"])
        revoked = ShareLink.objects.filter(transcript=locked, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    transcript.workspace = target
    continuations.relink_moved(transcript=transcript)
    return revoked
