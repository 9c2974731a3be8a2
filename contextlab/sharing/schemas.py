from __future__ import annotations

from datetime import datetime
from typing import Literal

from ninja import Field, Schema

#: a link anyone can open must expire: this many days when the request does not say
LINK_DEFAULT_EXPIRY_DAYS = 7


class ShareIn(Schema):
    """Exactly one of ``session_id``, ``comparison_id`` and ``sweep_id``."""

    session_id: int | None = Field(None, description="share this session's report")
    comparison_id: int | None = Field(None, description="share this comparison's page")
    sweep_id: int | None = Field(None, description="share this sweep's page")
    run_id: int | None = Field(
        None, description="the run to show; default the session's default run"
    )
    audience: Literal["link", "workspace"] = "link"
    expires_in_days: int | None = Field(
        None,
        description="1, 7 or 30; null (never) only for audience workspace. Left out: 7 for "
        "audience link (a link anyone can open must expire), never for audience workspace",
    )
    redact: bool = Field(True, description="false keeps every category (nothing redacted)")
    keep: list[str] = Field(default_factory=list, description="redaction categories to keep")
    mode: Literal["full", "conversation"] = Field(
        "full",
        description="full: everything, redacted; conversation: tool outputs, thinking and file "
        "contents left out before redaction runs",
    )

    def expiry_days(self) -> int | None:
        """The expiry asked for, or the audience's default when it was left out."""
        if "expires_in_days" in self.model_fields_set:
            return self.expires_in_days
        return LINK_DEFAULT_EXPIRY_DAYS if self.audience == "link" else None


class FindingOut(Schema):
    category: str
    count: int


class ShareCreatedOut(Schema):
    id: int
    #: opens without login (for audience link); shown once, only its hash is stored
    url: str
    expires_at: datetime | None
    mode: str
    findings: list[FindingOut]


class ShareOut(Schema):
    id: int
    kind: Literal["session", "comparison", "sweep"]
    session_id: int | None
    run_id: int | None
    comparison_id: int | None
    sweep_id: int | None
    audience: str
    mode: str
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    state: str
    views: int
    last_viewed_at: datetime | None
