"""The one Celery task of uploads: a worker joins a resumable upload's pieces into a session
(``resumable.finish``), so the web process never parses a multi-gigabyte transcript."""

from __future__ import annotations

import logging
import uuid

from django.db import InterfaceError, OperationalError

from contextlab.celery import app
from contextlab.transcripts import resumable

logger = logging.getLogger(__name__)

#: the name ``jobs.tasks.recover`` sends again for an upload whose task was lost
FINISH_UPLOAD = "contextlab.transcripts.tasks.finish_upload"


@app.task(
    name=FINISH_UPLOAD,
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def finish_upload(upload_id: str) -> None:
    resumable.finish(upload_id)


def send_finish(upload_id: uuid.UUID) -> None:
    """Publish the task; with the broker down the upload stays complete, and the periodic
    recovery sends it again (``jobs.uploads.unfinished_uploads``)."""
    try:
        finish_upload.delay(str(upload_id))
    except Exception:
        logger.warning("could not queue upload %s; the recovery will", upload_id, exc_info=True)
