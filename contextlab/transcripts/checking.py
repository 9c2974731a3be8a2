"""An upload's check, without Django: the engine's parse of a stored upload, the session row's
columns from what it read, and the parse left in the session cache for the first replay.

``services.check_upload`` runs ``check_here`` in its own process (a small file) or in a child
process (``upload_check``, a file of at least UPLOAD_CHECK_CHILD_MIN_BYTES), which imports only
this module and the engine: a child that set Django up would hold some 45 MB more beside the
parse of a multi-gigabyte session, which is the most a worker holds at once (issue #25). The
request and the answer cross as pickles of the classes here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contextlab import engine
from contextlab.engine import dropped_problems, keep_parsed
from contextlab.transcripts import naming

logger = logging.getLogger(__name__)

#: problems kept on the row (a broken file can report one per line)
MAX_STORED_PROBLEMS = 1000
#: the largest value of a PositiveIntegerField on PostgreSQL
MAX_INT32 = 2**31 - 1
#: characters a file name may not carry into the database or a page (C0 controls, DEL)
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


@dataclass
class UploadRejected(Exception):
    """The upload cannot become a session; ``message`` is the one clear reason."""

    message: str
    problems: list[dict[str, Any]] = field(default_factory=list)
    #: HTTP status the caller should answer with
    status: int = 400

    def __str__(self) -> str:
        return self.message


def stored_problems(problems: list[engine.Problem]) -> list[dict[str, Any]]:
    """The engine's problems as JSON, capped, with a last line saying how many were left out."""
    out = [p.to_json() for p in problems[:MAX_STORED_PROBLEMS]]
    # past the cap, errors still say why reading stopped (a bomb, too many bad lines)
    late_errors = [p for p in problems[MAX_STORED_PROBLEMS:] if p.severity == "error"][:5]
    out += [p.to_json() for p in late_errors]
    # the loader keeps only the first problems in memory and counts the rest
    left_out = max(0, len(problems) - MAX_STORED_PROBLEMS - len(late_errors)) + dropped_problems(
        problems
    )
    if left_out:
        out.append(
            {
                "file": "",
                "line": 0,
                "code": "more_problems",
                "message": f"{left_out} more problem(s) not listed",
                "severity": "info",
            }
        )
    return out


def _request_count(session: engine.Session) -> int:
    ids = {
        m.message_id
        for m in session.main.messages
        if m.role == "assistant" and getattr(m, "message_id", None)
    }
    return len(ids)


def _started(session: engine.Session) -> datetime | None:
    """The time of the session's first timed record, None when no record has one."""
    for m in session.main.messages:
        stamp = engine.parse_time(m.timestamp)
        if stamp is not None:
            return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)
    return None


def session_fields(
    session: engine.Session, *, stored_name: str, name: str, size: int, sha256: str
) -> dict[str, Any]:
    """A session row's columns from the file and what the engine read in it."""
    return {
        "name": name,
        "file": stored_name,
        "size": size,
        "sha256": sha256,
        # what the file says, cut to the columns (a hostile file may say anything)
        "session_id": (session.session_id or "")[:100],
        "title": CONTROL_CHARS.sub(" ", session.title or "").strip()[:200],
        "first_prompt": naming.first_prompt(
            "".join(b.text for b in m.blocks if b.type == "text")
            for m in session.main.messages
            if m.role == "user" and m.kind == "prompt" and not m.is_meta
        ),
        "started_at": _started(session),
        "project": CONTROL_CHARS.sub(" ", session.project or "").strip()[:500],
        "version": (session.version or "")[:40],
        "agent": session.agent[:40],
        "request_count": min(_request_count(session), MAX_INT32),
        "max_prompt_tokens": min(session.max_recorded_prompt, MAX_INT32),
        "threads": [
            {
                "id": t.id,
                "kind": t.kind,
                "messages": len(t.messages),
                # the main thread's recorded auto compactions (preTokens): the evidence
                # resolve_config uses for the window "auto" picks
                **({"auto_compactions": session.recorded_auto_compactions} if n == 0 else {}),
                # the window the agent recorded (Codex), "auto"'s window for the session
                **(
                    {"context_window": session.context_window}
                    if n == 0 and session.context_window
                    else {}
                ),
            }
            for n, t in enumerate(session.threads)
        ],
        "problems": stored_problems(session.problems),
        "continues_uuid": linkable_uuid(session.continues_uuid),
    }


def linkable_uuid(value: str | None) -> str:
    """The ``parentUuid`` a session's file starts from, as stored: empty when there is none, or
    when it cannot be the uuid of a record (past the column, control characters), so a hostile
    value is never searched for."""
    if not value or len(value) > 100 or CONTROL_CHARS.search(value):
        return ""
    return value


@dataclass(frozen=True)
class CheckRequest:
    """What the check reads: the stored file and the columns the upload already knows."""

    path: Path
    name: str
    stored_name: str
    size: int
    sha256: str
    #: where to leave the parse for the replay (the session cache folder)
    cache_dir: Path
    #: the child's answer (pickled ``Checked`` or ``UploadRejected``)
    out: Path


@dataclass(frozen=True)
class Checked:
    """A file the engine read: the session row's columns (``session_fields``), the
    uuids of its records (to link the sessions that continue it) and the parse left for the
    replay in the session cache (None when it could not be written)."""

    fields: dict[str, Any]
    record_uuids: AbstractSet[str]
    parsed: Path | None


def check_here(request: CheckRequest) -> Checked:
    """The check in this process; ``UploadRejected`` for a file the engine refuses."""
    try:
        session = engine.load_session(str(request.path), name=request.name)
    except engine.TranscriptError as exc:
        # a reading error (a bomb stopped, a corrupt stream) is the reason worth naming
        errors = [p for p in exc.problems if p.severity == "error"]
        raise UploadRejected(
            f"{request.name}: {exc}" + (f" ({errors[0].message})" if errors else ""),
            [p.to_json() for p in exc.problems[:MAX_STORED_PROBLEMS]],
        ) from None
    except Exception:
        # An engine bug must not leave a half-imported session behind; the log has details.
        logger.exception("engine failed to load upload %s", request.name)
        raise UploadRejected(
            f"{request.name}: ContextLab could not read this file (internal error; see the "
            "server log)."
        ) from None
    try:
        fields = session_fields(
            session,
            stored_name=request.stored_name,
            name=request.name,
            size=request.size,
            sha256=request.sha256,
        )
        parsed = _keep_parse(request, session)
        return Checked(fields=fields, record_uuids=session.record_uuids, parsed=parsed)
    finally:
        session.close()


def _keep_parse(request: CheckRequest, session: engine.Session) -> Path | None:
    """Leave the parse in the session cache for the first replay, so the worker does not read
    and parse the file a second time. Only a speed-up: a failure leaves the replay to parse
    the file itself. (The object store's mirror gets it from the caller, once the upload is
    kept.)"""
    try:
        return keep_parsed(
            request.path, session, cache_dir=request.cache_dir, sha256=request.sha256
        )
    except Exception:  # an unpicklable oddity must not refuse a good upload
        logger.exception("could not keep the parsed session of %s for its replay", request.name)
        return None
