"""API tokens. Only a SHA-256 of the token is stored; the token itself is shown once."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    #: hex SHA-256 of the token; tokens are random, so an unsalted hash is enough
    key_hash = models.CharField(max_length=64, unique=True)
    #: first characters, to tell tokens apart in the admin without revealing them
    prefix = models.CharField(max_length=12)
    name = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    #: the token stops working then (null: never; API_TOKEN_DAYS sets the default)
    expires_at = models.DateTimeField(null=True, blank=True)
    #: set when its owner (or an admin) revoked it; a revoked token never works again
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def status(self) -> str:
        """ "active", "expired" or "revoked", for the tokens page."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return "expired"
        return "active"
