"""What the comment templates show: one dict per comment, for live pages (with the reader's
rights) and for shares and exports (redacted, read-only). Templates never see a Comment's raw
body as HTML: ``html`` is the rendered, safe Markdown."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest
from django.urls import reverse

from contextlab.comments import markdown, services
from contextlab.comments.models import Comment
from contextlab.transcripts.models import Transcript
from contextlab.workspaces.models import Role

Url = Callable[[int, str], str]


def explorer_url(transcript: Transcript, run_id: int | None) -> Url:
    """The explorer page of a comment's request (with the block's anchor: the explorer loads
    more rows until the block is there)."""
    prefix = reverse("runs:request", args=[transcript.pk, 0])[: -len("0/")]
    query = f"?run={run_id}" if run_id else ""

    def url(index: int, block: str) -> str:
        return f"{prefix}{index}/{query}" + (f"#{block}" if block else "")

    return url


def live_item(comment: Comment, user: User, role: Role | None, url: Url) -> dict[str, Any]:
    return {
        "pk": comment.pk,
        "request": comment.request_index,
        "number": comment.request_index + 1,
        "block": comment.block,
        "author": comment.author_name,
        "created_at": comment.created_at,
        "edited_at": comment.edited_at,
        "html": markdown.render(comment.body),
        "body": comment.body,
        "url": url(comment.request_index, comment.block),
        "can_edit": services.may_edit(comment, user, role),
        "can_delete": services.may_delete(comment, user, role),
    }


def live_items(
    comments: Iterable[Comment], user: User, role: Role | None, url: Url
) -> list[dict[str, Any]]:
    return [live_item(c, user, role, url) for c in comments]


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def shared_items(
    comments: Iterable[dict[str, Any]], keep: Collection[str], url: Url
) -> list[dict[str, Any]]:
    """Snapshot comments (already redacted with the rest of the snapshot) for a shared page or
    an export: rendered through ``markdown.render_redacted``, no rights."""
    return [
        {
            "pk": c["id"],
            "request": c["request"],
            # every page numbers requests from 1 (URLs and anchors keep the index)
            "number": int(c["request"]) + 1,
            "block": c.get("block") or "",
            "author": c.get("author") or "",
            "created_at": _when(c.get("created_at")),
            "edited_at": _when(c.get("edited_at")),
            "html": markdown.render_redacted(str(c.get("body") or ""), keep),
            "url": url(int(c["request"]), c.get("block") or ""),
        }
        for c in comments
    ]


def request_comments(request: HttpRequest, transcript: Transcript, index: int) -> list[Comment]:
    """The comments of one request, read once per page (the panel and every gutter mark of the
    page, the rows loaded later included, share this one query)."""
    cache: dict[tuple[int, int], list[Comment]] = request.__dict__.setdefault(
        "_request_comments", {}
    )
    key = (transcript.pk, index)
    if key not in cache:
        cache[key] = services.of_request(transcript, index)
    return cache[key]


def marks(comments: Iterable[Any], block_of: Callable[[Any], str]) -> dict[str, list[Any]]:
    """Comments by block (the request's own, with no block, left out)."""
    out: dict[str, list[Any]] = {}
    for comment in comments:
        block = block_of(comment)
        if block:
            out.setdefault(block, []).append(comment)
    return out


def panel_context(
    request: HttpRequest,
    transcript: Transcript,
    index: int,
    run_id: int | None,
    **extra: Any,
) -> dict[str, Any]:
    """The explorer's comment panel of one request: its comments, and the form for those who
    may comment."""
    user: User = request.user  # type: ignore[assignment]  # the explorer is behind the login
    role = services.role_of(transcript)
    comments = request_comments(request, transcript, index)
    return {
        "request": request,
        "transcript": transcript,
        "index": index,
        "number": index + 1,
        "run_id": run_id,
        "comments": live_items(comments, user, role, explorer_url(transcript, run_id)),
        "can_comment": services.may_comment(role),
        "max_body": services.MAX_BODY,
        "form_values": {"body": "", "block": ""},
        **extra,
    }


def mark_context(
    request: HttpRequest, transcript: Transcript, index: int, block: str
) -> dict[str, Any]:
    """One block's gutter mark after a change (sent out of band with the panel)."""
    comments = [c for c in services.of_request(transcript, index) if c.block == block]
    return {
        "anchor": block,
        "count": len(comments),
        "first": comments[0].pk if comments else None,
        "can_comment": services.may_comment(services.role_of(transcript)),
    }
