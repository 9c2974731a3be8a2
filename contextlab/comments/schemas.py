from __future__ import annotations

from datetime import datetime

from ninja import Field, Schema


class CommentIn(Schema):
    request: int = Field(..., ge=0, description="the request's 0-based index, as the explorer")
    block: str = Field(
        "",
        max_length=40,
        description="an explorer row anchor (b-<message>-<block>); empty: the whole request",
    )
    body: str = Field(..., description="Markdown, at most 10,000 characters")


class CommentEdit(Schema):
    body: str = Field(..., description="Markdown, at most 10,000 characters")


class CommentOut(Schema):
    id: int
    session_id: int
    #: 0-based index (the explorer's URL); ``request_number`` is the page's number, from 1
    request: int
    request_number: int
    block: str
    author: str
    body: str
    #: the body rendered (raw HTML escaped, links allow-listed)
    html: str
    created_at: datetime
    edited_at: datetime | None
