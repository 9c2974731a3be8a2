from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Schema


class ProblemOut(Schema):
    file: str = ""
    line: int = 0
    code: str = ""
    message: str
    severity: str = "warning"


class SessionOut(Schema):
    id: int
    name: str
    #: Claude Code's title for the session (or the one a user gave it); empty when none
    title: str = ""
    #: the one name the pages show: the title, else the first prompt (markup stripped), else
    #: the file name (``transcripts.naming``)
    display_name: str = ""
    #: when the session's first record was written; null when no record carries a time
    started_at: datetime | None = None
    #: the folder Claude Code ran in (the first recorded cwd); empty when none is recorded
    project: str = ""
    requests: int
    problems: list[ProblemOut]
    size: int
    sha256: str
    session_id: str
    version: str
    #: the workspace whose members see the session
    workspace_id: int
    #: the session of the same workspace this one continues (a resumed session's file, linked
    #: by the record its first record hangs from; replays read the two as one conversation)
    continues: int | None = None
    created_at: datetime
    #: the same bytes were already uploaded: nothing changed
    duplicate: bool = False
    #: a longer version of a session already uploaded (same sessionId, the old transcript its
    #: start): that session now reads the new file, and its runs replay again
    grew: bool = False


class RunBrief(Schema):
    id: int
    mode: str
    preset: str
    status: str
    progress: float
    error: str


class SessionDetailOut(SessionOut):
    threads: list[dict[str, Any]]
    runs: list[RunBrief]


class MoveIn(Schema):
    workspace_id: int = Field(..., ge=1, description="the workspace to move to (you: editor)")


class MovedOut(Schema):
    id: int
    workspace_id: int
    #: live share links of the session revoked by the move (their audience would change)
    revoked_links: int
