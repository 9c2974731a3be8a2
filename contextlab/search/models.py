"""The search index: one row per block (a long block in several parts) of a session's stored
messages, with the request it first appears in. The full-text index itself is the database's
(``migrations/0001``): a GIN-indexed ``tsvector`` column on PostgreSQL (made by a trigger,
``migrations/0003``), an FTS5 table kept in step by triggers on SQLite; ``search.backends``
writes and queries it."""

from __future__ import annotations

from django.db import models

from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript


class IndexedSession(models.Model):
    """A session whose blocks are in the index, and the run whose requests numbered them."""

    transcript = models.OneToOneField(
        Transcript, on_delete=models.CASCADE, primary_key=True, related_name="search_index"
    )
    run = models.ForeignKey(Run, null=True, on_delete=models.SET_NULL, related_name="+")
    #: the first prompt (for a session without a title), as plain text
    first_prompt = models.CharField(max_length=200, blank=True, default="")
    blocks = models.PositiveIntegerField(default=0)
    #: the tools its blocks name, sorted (the search box's filter)
    tools: models.JSONField[list[str]] = models.JSONField(default=list)
    indexed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"search index of session {self.transcript_id}"


class Entry(models.Model):
    """One block (or one part of a long block) of a session, as the index holds it."""

    transcript = models.ForeignKey(Transcript, on_delete=models.CASCADE, related_name="+")
    thread = models.CharField(max_length=200)
    #: the message's and the block's positions in the thread (the explorer's ``b-<m>-<b>``)
    message = models.PositiveIntegerField()
    block = models.PositiveIntegerField()
    #: 0-based index of the first request whose history holds the block (the page address)
    request = models.PositiveIntegerField()
    #: False for a block after the thread's last request (its last answer): no request's
    #: prompt holds it, so ``request`` is that last request and the explorer cannot show it
    in_prompt = models.BooleanField(default=True)
    #: prompt, assistant, thinking, tool_input, tool_output, summary or other
    kind = models.CharField(max_length=16)
    tool = models.CharField(max_length=100, blank=True, default="")
    #: a file path the tool call names (``file_path``, ``path``, ``notebook_path``)
    path = models.CharField(max_length=500, blank=True, default="")
    body = models.TextField()

    class Meta:
        # the order hits are listed in (newest session first, then request order)
        indexes = (
            models.Index(
                fields=["-transcript", "request", "message", "block"], name="search_entry_order"
            ),
        )
        verbose_name_plural = "entries"

    def __str__(self) -> str:
        return f"{self.transcript_id}:{self.thread}:{self.message}:{self.block}"
