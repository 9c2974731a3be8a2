"""Temporary upload files left behind by a web process that died mid-upload.

Django streams an uploaded file to a named temporary file (``FILE_UPLOAD_TEMP_DIR``) and
deletes it when the request ends; ``transcripts.services.store_upload`` copies it to a
``.partial-*`` file beside the stored uploads and renames or deletes that. A process killed
in between (``kill -9``, gunicorn's own worker timeout, an out-of-memory kill) runs neither
clean-up, and the file stays for good. Any such file untouched for UPLOAD_TEMP_STALE_AFTER
seconds is removed: a live upload writes to its file continuously.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from contextlab import blobs
from contextlab.transcripts.models import ResumableUpload

logger = logging.getLogger(__name__)

#: Django's temporary upload files: ``tempfile.NamedTemporaryFile(suffix=".upload" + ext)``
DJANGO_TEMP_PATTERN = "tmp*.upload*"
#: ``store_upload``'s copy in progress, in each owner's folder of MEDIA_ROOT/uploads
PARTIAL_PATTERN = "*/.partial-*"


def _candidates() -> Iterator[Path]:
    temp_dir = Path(settings.FILE_UPLOAD_TEMP_DIR or tempfile.gettempdir())
    yield from temp_dir.glob(DJANGO_TEMP_PATTERN)
    yield from (Path(settings.MEDIA_ROOT) / "uploads").glob(PARTIAL_PATTERN)
    # with an object store, uploads are spooled among this host's copies instead
    yield from (blobs.copies_dir() / "uploads").glob(PARTIAL_PATTERN)


def remove_stale_temp_files(*, now: float | None = None) -> list[Path]:
    """Delete the temporary upload files older than UPLOAD_TEMP_STALE_AFTER; returns them."""
    cutoff = (now if now is not None else time.time()) - settings.UPLOAD_TEMP_STALE_AFTER
    removed = []
    for path in _candidates():
        # gone meanwhile (its request finished), or not ours to delete: leave it
        with contextlib.suppress(OSError):
            if path.is_file() and path.stat().st_mtime < cutoff:
                path.unlink()
                removed.append(path)
    if removed:
        logger.warning(
            "removed %s temporary upload file(s) left by a request that died: %s",
            len(removed),
            ", ".join(p.name for p in removed[:10]),
        )
    return removed


def remove_stale_resumable(*, now: datetime | None = None) -> list[str]:
    """Give up on resumable uploads untouched for UPLOAD_RESUMABLE_STALE_AFTER: their pieces
    and rows go (a client that comes back gets 404 and starts again). Finished ones (stored,
    rejected) are forgotten after the same time. Returns the ids removed."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.UPLOAD_RESUMABLE_STALE_AFTER)
    stale = ResumableUpload.objects.filter(updated_at__lt=cutoff).exclude(
        state=ResumableUpload.State.COMPLETE
    )
    removed = []
    for upload in stale:
        for _offset, _size, name in upload.pieces:
            blobs.delete(name)
        _folders, files = blobs.listdir(f"incoming/{upload.pk}")
        for name in files:  # a piece whose request died before it was counted
            blobs.delete(f"incoming/{upload.pk}/{name}")
        removed.append(str(upload.pk))
        upload.delete()
    if removed:
        logger.warning("removed %s stale resumable upload(s): %s", len(removed), removed[:10])
    return removed


def unfinished_uploads(*, now: datetime | None = None) -> list[str]:
    """Complete uploads that no worker has stored for RUN_QUEUED_RESEND_AFTER (their task was
    lost, or the broker was down when the last piece came): their task is sent again."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.RUN_QUEUED_RESEND_AFTER)
    return [
        str(pk)
        for pk in ResumableUpload.objects.filter(
            state=ResumableUpload.State.COMPLETE, updated_at__lt=cutoff
        ).values_list("pk", flat=True)
    ]
