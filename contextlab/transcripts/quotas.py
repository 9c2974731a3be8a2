"""Upload quotas: how many sessions and bytes one user, and one workspace, may store.

Counted over the stored sessions (``Transcript.size``), so deleting sessions frees quota. The
limits are settings (``UPLOAD_QUOTA_*``, 0 for none); ``services.store_upload`` asks before it
keeps a new file, so a refused upload leaves nothing behind.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Count, Sum

from contextlab.transcripts.models import Transcript
from contextlab.workspaces.models import Workspace


def _megabytes(size: int) -> str:
    return f"{size / 1024**2:,.0f} MB"


def refusal(
    *, owner: User, workspace: Workspace, name: str, size: int, new_file: bool = True
) -> str | None:
    """Why an upload of ``size`` bytes by ``owner`` into ``workspace`` is over a quota, else
    None. ``new_file=False``: the bytes grow a session already counted (a live append)."""
    limits = (
        (
            "your uploads",
            Transcript.objects.filter(owner=owner),
            settings.UPLOAD_QUOTA_USER_FILES,
            settings.UPLOAD_QUOTA_USER_BYTES,
        ),
        (
            f"the workspace “{workspace.name}”",
            Transcript.objects.filter(workspace=workspace),
            settings.UPLOAD_QUOTA_WORKSPACE_FILES,
            settings.UPLOAD_QUOTA_WORKSPACE_BYTES,
        ),
    )
    for whose, stored, max_files, max_bytes in limits:
        usage = stored.aggregate(files=Count("pk"), size=Sum("size"))
        files, used = usage["files"] or 0, usage["size"] or 0
        if new_file and max_files and files + 1 > max_files:
            return (
                f"{name} was not kept: {whose} already hold {files:,} sessions, the most "
                f"allowed ({max_files:,}). Delete sessions you no longer need, then upload again."
            )
        if max_bytes and used + size > max_bytes:
            return (
                f"{name} was not kept: {whose} use {_megabytes(used)} of "
                f"{_megabytes(max_bytes)}, and this file ({_megabytes(size)}) would pass it. "
                "Delete sessions you no longer need, then upload again."
            )
    return None
