"""Comment hooks for the explorer, the report, shared pages and the HTML export: each page asks
for its comments once (an include and one query), so the views that render those pages need
not know about comments."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from contextlab.comments import presenting, services

register = template.Library()


def _run_id(context: template.Context) -> int | None:
    run = context.get("run")
    return getattr(run, "pk", None)


@register.inclusion_tag("comments/_panel.html", takes_context=True)
def comments_panel(context: template.Context) -> dict[str, Any]:
    """The explorer's panel: this request's comments, and the form for editors and owners."""
    return presenting.panel_context(
        context["request"], context["transcript"], int(context["index"]), _run_id(context)
    )


def _mark(
    anchor: str, count: int, first: int | None, can_comment: bool, oob: bool = False
) -> SafeString:
    count_html = (
        format_html(
            '<a class="cm-count" href="#c-{}" title="{} comment{} on this block">{}</a>',
            first,
            count,
            "" if count == 1 else "s",
            count,
        )
        if count
        else ""
    )
    add_html = (
        format_html(
            '<button type="button" class="cm-add" data-block="{}" '
            'title="Comment on this block" aria-label="comment on this block">+</button>',
            anchor,
        )
        if can_comment
        else ""
    )
    return format_html(
        '<span class="cmark" id="cm-{}"{}>{}{}</span>',
        anchor,
        mark_safe(' hx-swap-oob="true"') if oob else "",
        count_html,
        add_html,
    )


@register.simple_tag(takes_context=True)
def comment_mark(context: template.Context, anchor: str) -> SafeString:
    """The gutter mark of one explorer row: how many comments its block has (a link to the
    first) and, for those who may comment, the button that points the form at the block."""
    request = context["request"]
    transcript = context["transcript"]
    index = int(context["index"])
    # grouped by block once per page (every row asks), from the page's one query
    marks: dict[tuple[int, int], dict[str, list[Any]]] = request.__dict__.setdefault(
        "_comment_marks", {}
    )
    key = (transcript.pk, index)
    if key not in marks:
        comments = presenting.request_comments(request, transcript, index)
        marks[key] = presenting.marks(comments, lambda c: str(c.block))
    on_block = marks[key].get(anchor) or []
    return _mark(
        anchor,
        len(on_block),
        on_block[0].pk if on_block else None,
        services.may_comment(services.role_of(transcript)),
    )


@register.simple_tag
def comment_mark_of(mark: dict[str, Any], oob: bool = False) -> SafeString:
    """A mark from ``presenting.mark_context`` (the answer to a comment change, out of band)."""
    return _mark(mark["anchor"], mark["count"], mark["first"], mark["can_comment"], oob)


@register.inclusion_tag("comments/_report_list.html", takes_context=True)
def report_comments(context: template.Context) -> dict[str, Any]:
    """Every comment of the session, on its report, each linking to its request."""
    request = context["request"]
    transcript = context["transcript"]
    role = services.role_of(transcript)
    url = presenting.explorer_url(transcript, _run_id(context))
    comments = presenting.live_items(services.of_session(transcript), request.user, role, url)
    return {"comments": comments, "request": request}


def _snapshot_comments(context: template.Context) -> list[dict[str, Any]]:
    return list((context.get("snapshot") or {}).get("comments") or [])


@register.inclusion_tag("comments/_shared_list.html", takes_context=True)
def shared_comments(context: template.Context, scope: str = "session") -> dict[str, Any]:
    """A share link's comments, read-only and redacted (the link's snapshot): every one on the
    shared report, the request's own on the shared explorer (``scope="request"``)."""
    comments = _snapshot_comments(context)
    if scope == "request":
        index = int(context["index"])
        comments = [c for c in comments if c.get("request") == index]
    root = str(context["share_root"])

    def url(index: int, block: str) -> str:
        return f"{root}requests/{index}/" + (f"#{block}" if block else "")

    return {
        "comments": presenting.shared_items(comments, context.get("kept") or [], url),
        "scope": scope,
        # the element id keeps the index (as addresses do); the heading says the number
        "index": int(context["index"]) if scope == "request" else None,
        "number": int(context["index"]) + 1 if scope == "request" else None,
    }


@register.simple_tag(takes_context=True)
def shared_comment_mark(context: template.Context, anchor: str) -> SafeString:
    # grouped once per page render (every row of the page asks)
    key = "shared-comment-marks"
    by_block: dict[str, list[Any]] | None = context.render_context.get(key)
    if by_block is None:
        index = int(context["index"])
        by_block = presenting.marks(
            (c for c in _snapshot_comments(context) if c.get("request") == index),
            lambda c: str(c.get("block") or ""),
        )
        context.render_context[key] = by_block
    on_block = by_block.get(anchor) or []
    return _mark(anchor, len(on_block), on_block[0]["id"] if on_block else None, False)
