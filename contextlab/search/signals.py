"""A session's index goes with its stored messages: they are deleted when its file grew or the
history it continues changed, and the replay that follows stores new ones and indexes them
(``services.index_after_run``); until then its blocks are not searched (it counts as not
indexed) rather than found at stale places. A live session's append (the stored messages
marked ``grown_by_append``) keeps the rows it leaves where they were."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete
from django.dispatch import receiver

from contextlab.transcripts.models import TranscriptMessages


@receiver(post_delete, sender=TranscriptMessages, dispatch_uid="search.forget")
def _forget_index(*, instance: TranscriptMessages, **kwargs: Any) -> None:
    from contextlab.search.services import forget

    forget(instance.transcript_id, appended=instance.grown_by_append)
