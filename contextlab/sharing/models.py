"""Share links: a token that opens a redacted, read-only snapshot of one session's report.

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

    token_hash = models.CharField(max_length=64, unique=True)
    transcript = models.ForeignKey(
        "transcripts.Transcript", on_delete=models.CASCADE, related_name="share_links"
    )
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="share_links")
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
    #: redaction categories the creator chose to keep (not redacted)
    kept: models.JSONField[list[str]] = models.JSONField(default=list, blank=True)
    #: [{category, count, locations, hints}] found when the link was made
    findings: models.JSONField[list[dict[str, Any]]] = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ("-created_at", "-pk")

    def __str__(self) -> str:
        return f"share of {self.transcript_id} ({self.audience})"

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
