"""Comments: a workspace member's note on one request of a session, or on one block of the
request's model view. A comment belongs to its session's workspace (through the session), so the
ownership gate that decides who sees the session decides who sees its comments.

Deleting removes the row (no soft delete): a deleted comment is gone from every page and every
later share or export.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Comment(models.Model):
    transcript = models.ForeignKey(
        "transcripts.Transcript", on_delete=models.CASCADE, related_name="comments"
    )
    #: the request's position in the run's result (0-based, as the explorer's URL counts);
    #: every run of a session replays the same recorded requests, so it holds for each run
    request_index = models.PositiveIntegerField()
    #: the block of the model view ("b-<message>-<block>", "b-s-<position>" for a summary),
    #: the explorer row's anchor; empty for a comment on the whole request
    block = models.CharField(max_length=40, blank=True, default="")
    #: None once the author's account is deleted (the comment stays, unsigned)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.SET_NULL,
        related_name="comments",
    )
    #: Markdown source; rendered (HTML disabled, links allow-listed) by comments.markdown
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    edited_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("request_index", "created_at", "pk")
        indexes = (models.Index(fields=["transcript", "request_index"], name="comment_request"),)

    def __str__(self) -> str:
        return f"comment on {self.transcript_id} request {self.request_index}"

    @property
    def author_name(self) -> str:
        return self.author.username if self.author is not None else "deleted user"
