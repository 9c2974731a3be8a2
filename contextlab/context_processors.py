"""Template context shared by every page."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def limits(request: HttpRequest) -> dict[str, int]:
    return {"UPLOAD_MAX_BYTES": settings.UPLOAD_MAX_BYTES}
