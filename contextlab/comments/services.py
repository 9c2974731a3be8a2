"""Comments: who may write, edit and delete them; the writes; what pages, shares and exports read.

Who may (the issue's roles: an editor "comments"):
* viewers read comments and write none;
* editors and owners comment on any request or block of a session of their workspace;
* an author edits and deletes their own comments while they still may comment;
* owners delete anyone's comment (moderation), and edit only their own.

A session and its comments are found through the ownership gate (``workspaces.access``), so a
non-member gets 404 for a comment exactly as for its session, and losing membership ends
access at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from contextlab.comments import markdown
from contextlab.comments.models import Comment
from contextlab.engine import as_result
from contextlab.errors import FieldProblem
from contextlab.runs import services as run_services
from contextlab.transcripts.models import Transcript
from contextlab.workspaces import access
from contextlab.workspaces.models import Role

#: longest body, characters (after control characters are dropped)
MAX_BODY = 10_000
#: C0 controls but tab and newline, DEL, and the C1 controls: nothing a comment needs
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: an explorer row's anchor: "b-<message>-<block>", or "b-s-<position>" for a synthetic row
BLOCK = re.compile(r"^b-(?:\d{1,9}-\d{1,9}|s-\d{1,9})$")


class CommentError(FieldProblem):
    """Input that cannot be a comment; ``field`` names it (answered 422 beside that field)."""


def clean_body(body: str) -> str:
    """``body`` with line ends made ``\\n`` and control characters dropped; refuses an empty
    one and one longer than ``MAX_BODY``."""
    cleaned = _CONTROL.sub("", body.replace("\r\n", "\n").replace("\r", "\n")).strip()
    if not cleaned:
        raise CommentError("body", "Write something: the comment is empty.")
    if len(cleaned) > MAX_BODY:
        raise CommentError(
            "body", f"A comment has at most {MAX_BODY:,} characters ({len(cleaned):,} given)."
        )
    return cleaned


def clean_block(block: str | None) -> str:
    block = (block or "").strip()
    if block and not BLOCK.match(block):
        raise CommentError("block", "block must be an explorer row anchor such as b-12-0")
    return block


def request_count(transcript: Transcript) -> int:
    """How many requests the session's default run holds (what the explorer pages through);
    the uploaded count while no run has finished."""
    run = run_services.default_run(transcript)
    data = run_services.result_data(run) if run is not None else None
    if data is None:
        return transcript.request_count
    return len(as_result(data)["requests"])


def role_of(transcript: Transcript) -> Role | None:
    return access.member_role(transcript)


def may_comment(role: Role | None) -> bool:
    return role is not None and role.allows(access.WRITE)


def may_edit(comment: Comment, user: User, role: Role | None) -> bool:
    return may_comment(role) and comment.author_id == user.pk


def may_delete(comment: Comment, user: User, role: Role | None) -> bool:
    return may_edit(comment, user, role) or (role is not None and role.allows(access.MANAGE))


def create_comment(
    *, user: User, transcript: Transcript, request_index: int, body: str, block: str = ""
) -> Comment:
    """A new comment by ``user`` (the caller has the session from the gate with WRITE)."""
    if not may_comment(role_of(transcript)):
        raise PermissionDenied("commenting needs the editor role in the workspace")
    body = clean_body(body)
    block = clean_block(block)
    count = request_count(transcript)
    if not 0 <= request_index < count:
        raise CommentError(
            "request", f"request {request_index} does not exist (this session has {count})"
        )
    return Comment.objects.create(
        transcript=transcript, request_index=request_index, block=block, author=user, body=body
    )


@dataclass
class Gated:
    """A comment found through the gate, with the reader's role in its workspace."""

    comment: Comment
    role: Role | None


def comment_for(user: User, pk: int) -> Gated:
    """One comment whose session ``user`` may read (404 otherwise, as for the session)."""
    comment = Comment.objects.select_related("author").filter(pk=pk).first()
    if comment is None:
        raise Http404("no such comment")
    transcript = access.session_for(user, comment.transcript_id, access.READ)
    comment.transcript = transcript
    return Gated(comment, role_of(transcript))


def require_edit(user: User, gated: Gated) -> None:
    if not may_edit(gated.comment, user, gated.role):
        raise PermissionDenied("only its author (with the editor role) may edit a comment")


def edit_comment(*, user: User, gated: Gated, body: str) -> Comment:
    comment = gated.comment
    require_edit(user, gated)
    comment.body = clean_body(body)
    comment.edited_at = timezone.now()
    comment.save(update_fields=["body", "edited_at"])
    return comment


def delete_comment(*, user: User, gated: Gated) -> None:
    if not may_delete(gated.comment, user, gated.role):
        raise PermissionDenied("only its author or a workspace owner may delete a comment")
    gated.comment.delete()


# --- reading ---------------------------------------------------------------------------------


def of_session(transcript: Transcript) -> QuerySet[Comment]:
    return Comment.objects.filter(transcript=transcript).select_related("author")


def of_request(transcript: Transcript, request_index: int) -> list[Comment]:
    return list(of_session(transcript).filter(request_index=request_index))


def snapshot_comments(
    transcript: Transcript, *, for_redaction: bool = True
) -> list[dict[str, Any]]:
    """The session's comments as JSON for a share snapshot or an export, redacted with the
    rest and rendered from the redacted Markdown when shown. ``for_redaction``: a body whose
    Markdown hides a secret from the detectors is given as the text its rendering shows
    (``markdown.shareable``); False gives every body as written (an unredacted export)."""
    return [
        {
            "id": c.pk,
            "request": c.request_index,
            "block": c.block,
            "author": c.author_name,
            "body": markdown.shareable(c.body) if for_redaction else c.body,
            "created_at": c.created_at.isoformat(),
            "edited_at": c.edited_at.isoformat() if c.edited_at else None,
        }
        for c in of_session(transcript)
    ]
