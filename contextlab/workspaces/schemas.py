from __future__ import annotations

from datetime import datetime

from ninja import Field, Schema


class WorkspaceIn(Schema):
    name: str = Field(..., min_length=1, max_length=100)


class MemberOut(Schema):
    username: str
    role: str


class WorkspaceOut(Schema):
    id: int
    name: str
    personal: bool
    #: the caller's role in it
    role: str
    members: list[MemberOut]


class MemberIn(Schema):
    username: str = Field(..., min_length=1)
    role: str = Field("viewer", description="viewer, editor or owner")


class InviteIn(Schema):
    role: str = Field("viewer", description="viewer, editor or owner")
    days: int = Field(7, ge=1, le=30)


class InviteOut(Schema):
    id: int
    role: str
    expires_at: datetime
    #: the invite link; shown once, only its hash is stored
    url: str
