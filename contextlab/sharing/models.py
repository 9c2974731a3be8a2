"""Share links: a token that opens a redacted, read-only snapshot of one session's report, one
comparison or one sweep (exactly one of the three).

Only the token's SHA-256 is stored; the token is shown once. The snapshot is built (and
redacted) when the link is made, so what the link shows never changes with the original and
the original is never changed by redaction.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone


class ShareLink(models.Model):
    class Audience(models.TextChoices):
        LINK = "link", "anyone with the link"
        WORKSPACE = "workspace", "members of the workspace"

    class Mode(models.TextChoices):
        """What the snapshot keeps, chosen before redaction runs."""

        FULL = "full", "everything, redacted"
        CONVERSATION = (
            "conversation",
            "the conversation: tool outputs, thinking and file contents left out",
        )

    token_hash = models.CharField(max_length=64, unique=True)
    transcript = models.ForeignKey(
        "transcripts.Transcript",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="share_links",
    )
    run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="share_links"
    )
    comparison = models.ForeignKey(
        "tuning.Comparison",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="share_links",
    )
    sweep = models.ForeignKey(
        "tuning.Sweep", null=True, blank=True, on_delete=models.CASCADE, related_name="share_links"
    )
    #: the session's workspace when the link was made: its owners see and revoke the link
    workspace = models.ForeignKey(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="share_links"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="share_links"
    )
    audience = models.CharField(max_length=10, choices=Audience.choices, default=Audience.LINK)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    views = models.PositiveIntegerField(default=0)
    last_viewed_at = models.DateTimeField(null=True, blank=True)
    #: what the snapshot keeps: everything, or the conversation without tool outputs,
    #: thinking and file contents (left out before redaction runs)
    mode = models.CharField(max_length=12, choices=Mode.choices, default=Mode.FULL)
    #: redaction categories the creator chose to keep (not redacted)
    kept: models.JSONField[list[str]] = models.JSONField(default=list, blank=True)
    #: [{category, count, locations, hints}] found when the link was made
    findings: models.JSONField[list[dict[str, Any]]] = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ("-created_at", "-pk")
        constraints = (
            # a link shows one thing: a session's report, a comparison or a sweep
            models.CheckConstraint(
                condition=(
                    models.Q(transcript__isnull=False, comparison__isnull=True, sweep__isnull=True)
                    | models.Q(
                        transcript__isnull=True, comparison__isnull=False, sweep__isnull=True
                    )
                    | models.Q(
                        transcript__isnull=True, comparison__isnull=True, sweep__isnull=False
                    )
                ),
                name="share_link_one_target",
            ),
        )

    def __str__(self) -> str:
        return f"share of {self.kind} {self.target_id} ({self.audience})"

    @property
    def kind(self) -> str:
        """What the link shows: "session", "comparison" or "sweep"."""
        if self.comparison_id is not None:
            return "comparison"
        if self.sweep_id is not None:
            return "sweep"
        return "session"

    @property
    def target_id(self) -> int | None:
        return self.comparison_id or self.sweep_id or self.transcript_id

    @property
    def target_label(self) -> str:
        """The target as the Shared links page names it."""
        if self.comparison_id is not None:
            return f"comparison #{self.comparison_id}"
        if self.sweep_id is not None:
            return f"sweep #{self.sweep_id}"
        return self.transcript.display_name if self.transcript is not None else "a deleted session"

    @property
    def target_url(self) -> str:
        target = self.comparison or self.sweep or self.transcript
        return target.get_absolute_url() if target is not None else ""

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_live(self) -> bool:
        return self.revoked_at is None and not self.is_expired

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.is_expired else "live"


class ShareSnapshot(models.Model):
    """The redacted data a link serves: session facts, the run's result, the messages."""

    link = models.OneToOneField(
        ShareLink, on_delete=models.CASCADE, primary_key=True, related_name="snapshot"
    )
    data: models.JSONField[dict[str, Any]] = models.JSONField()

    def __str__(self) -> str:
        return f"snapshot of {self.link_id}"
