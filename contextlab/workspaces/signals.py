"""Every new user gets a personal workspace (existing ones got theirs in migration 0002)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models.signals import post_save
from django.dispatch import receiver


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="workspaces.personal")
def _create_personal_workspace(*, instance: Any, created: bool, **kwargs: Any) -> None:
    if created and not kwargs.get("raw"):
        from contextlab.workspaces.services import personal_workspace

        personal_workspace(instance)
