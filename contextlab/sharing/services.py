"""Share links: build the redacted snapshot, make, resolve, count and revoke links."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from cachetools import LRUCache
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.http import Http404
from django.utils import timezone

from contextlab import engine, redaction
from contextlab.comments import services as comments
from contextlab.engine import as_result
from contextlab.errors import FieldProblem
from contextlab.jobs.replay import WASTE_KEY
from contextlab.runs import services as run_services
from contextlab.runs import waste
from contextlab.runs.models import Run
from contextlab.sharing.models import ShareLink, ShareSnapshot
from contextlab.transcripts.models import Transcript
from contextlab.workspaces import access
from contextlab.workspaces.models import Membership, Role

#: expiry choices in days; None (never) only for links limited to workspace members
EXPIRY_DAYS: tuple[int, ...] = (1, 7, 30)
DEFAULT_EXPIRY_DAYS = 7
#: 32 random bytes: 256 bits, well above the 128 the link needs
TOKEN_BYTES = 32
TOKEN_PREFIX = "cls_"


class ShareError(FieldProblem):
    """A share request that cannot be done; ``field`` names the bad input."""


class ShareBlocked(ShareError):
    """The outgoing bytes still hold a finding of a category the user chose to drop."""


def display_name(user: User) -> str:
    """How a share names its sharer: their first and last name, else their username with any
    e-mail address in it masked (``c…@….io``), never a raw address."""
    full = user.get_full_name().strip()
    if full:
        return full
    return redaction.mask_emails(user.username)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _locator(source: dict[str, Any]) -> Callable[[redaction.Path], str]:
    """Where a snapshot string is, in the words the dialog uses: the first request that sent a
    message, with the message and block ("request 12 · message 40, block 2")."""
    first_request: dict[str, list[tuple[int, int]]] = {}
    for index, request in enumerate(as_result(source["result"])["requests"]):
        first_request.setdefault(request["thread"], []).append((request["message"], index))

    def request_of(thread: str, message: int) -> int | None:
        # a request includes every message before the one it was made at
        for at, index in first_request.get(thread, []):
            if at >= message:
                return index
        return None

    def locate(path: redaction.Path) -> str:
        if not path:
            return "session"
        head = path[0]
        if head == "messages" and len(path) >= 3 and isinstance(path[2], int):
            thread, message = str(path[1]), path[2]
            where = f"message {message + 1}"
            if thread != "main":
                where = f"thread {thread}, {where}"
            if len(path) >= 5 and path[3] == "blocks":
                where += f", block {path[4] + 1}" if isinstance(path[4], int) else ", one block"
            elif len(path) >= 4 and path[3] == "original_output":
                where += ", persisted output"
            request = request_of(thread, message)
            # the dialog numbers requests from 1, as every page does
            return f"request {request + 1} · {where}" if request is not None else where
        if head == "result" and len(path) >= 3 and path[1] == "requests":
            return f"request {path[2] + 1}" if isinstance(path[2], int) else "requests"
        if head == "result" and len(path) >= 3 and path[1] == "summaries":
            return f"summary {path[2] + 1}" if isinstance(path[2], int) else "summaries"
        if head == "result" and len(path) >= 3 and path[1] == "subagents":
            return f"subagent {path[2] + 1}" if isinstance(path[2], int) else "subagents"
        if head == "comments" and len(path) >= 2 and isinstance(path[1], int):
            comment = (source.get("comments") or [])[path[1]]
            block = _anchor_words(str(comment.get("block") or ""))
            return f"comment on request {int(comment['request']) + 1}{block}"
        if head == "transcript" and len(path) >= 2:
            return {
                "name": "session name",
                "display_name": "session name",
                "project": "project folder",
                "problems": "transcript problems",
            }.get(str(path[1]), f"session {path[1]}")
        # anything else in words: the part of the replay it sits in, never the result's keys
        if head == "result":
            return {
                "views": "the model's views (summaries and previews the replay wrote)",
                "session": "the session's details",
            }.get(str(path[1]) if len(path) > 1 else "", "the replay's results")
        return "the session's details"

    return locate


def redaction_note(findings: list[dict[str, Any]], kept: list[str]) -> str:
    """What redaction did to a copy, each kind counted apart: secrets and personal details
    replaced, home folders shortened to ``~`` (a home folder is not a secret)."""
    counts = {"secret": 0, "personal data": 0, "home folder": 0}
    for f in findings:
        if f["category"] not in kept:
            counts[redaction.kind_of(str(f["category"]))] += int(f["count"])

    def some(n: int, one: str, many: str) -> str:
        return f"{n:,} {one if n == 1 else many}"

    replaced = [
        some(counts["secret"], "secret", "secrets"),
        some(counts["personal data"], "personal detail", "personal details"),
    ]
    homes = counts["home folder"]
    verb = "was" if counts["secret"] + counts["personal data"] == 1 else "were"
    note = f"{replaced[0]} and {replaced[1]} {verb} redacted"
    if homes:
        note += f"; {some(homes, 'home-folder path', 'home-folder paths')} shortened to ~"
    return note


def _anchor_words(anchor: str) -> str:
    """An explorer row anchor (``b-12-0``) in the words the dialog uses: ", message 13, block 1"."""
    found = re.fullmatch(r"b-(\d+)-(\d+)", anchor)
    if found is None:
        return ", on one message" if anchor else ""
    return f", message {int(found[1]) + 1}, block {int(found[2]) + 1}"


def snapshot_source(transcript: Transcript, run: Run) -> dict[str, Any]:
    """Everything a shared report and its explorer show, before redaction."""
    data = run_services.result_data(run)
    if data is None:
        raise ShareError("run", f"run {run.pk} is {run.status}: share a finished run", 409)
    return {
        "transcript": {
            "name": transcript.name,
            "display_name": transcript.display_name,
            "project": transcript.project,
            "started_at": transcript.when.isoformat(),
            "version": transcript.version,
            "agent": transcript.agent,
            "session_id": transcript.session_id,
            "request_count": transcript.request_count,
            "size": transcript.size,
            "uploaded_at": transcript.created_at.isoformat(),
            "threads": transcript.threads,
            "problems": transcript.problems,
        },
        "run": {
            "id": run.pk,
            "label": run.label,
            "mode": run.mode,
            "preset": run.resolved_preset or run.preset,
            "summary": run.summary,
        },
        # with the report's tools and waste cards as the owner's report shows them (worked
        # out here for a result stored before the worker stored them), redacted with the rest
        "result": {
            **data,
            engine.TOOL_BREAKDOWN_KEY: run_services.tool_breakdown(run, data),
            WASTE_KEY: waste.run_waste_report(transcript, run, data),
        },
        "messages": run_services.session_messages(transcript),
        # the comments as they are when the link is made, redacted with everything else
        "comments": comments.snapshot_comments(transcript),
    }


@dataclass
class Redacted:
    data: dict[str, Any]
    #: [{category, count, locations, hints}], kept categories included
    findings: list[dict[str, Any]]


#: tools whose input is a file's contents (what the conversation mode leaves out of them)
FILE_WRITING_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
#: what a block left out by the share mode says instead of its text
LEFT_OUT = "[left out of this share: {what}, {size:,} characters]"


def _left_out(what: str, text: str) -> str:
    return LEFT_OUT.format(what=what, size=len(text))


def apply_mode(source: dict[str, Any], mode: str) -> dict[str, Any]:
    """The snapshot source with what ``mode`` leaves out replaced by a line saying so (token
    counts stay): for the conversation mode, tool outputs (persisted ones too), thinking and
    the file contents a tool wrote. The input is not changed. Also records, under
    ``left_out``, how many blocks of each kind went, for the shared pages to say."""
    if mode == ShareLink.Mode.FULL:
        return source
    if mode != ShareLink.Mode.CONVERSATION:
        raise ShareError("mode", "mode must be full or conversation")
    counts = {"tool outputs": 0, "thinking": 0, "file contents": 0}
    threads: dict[str, list[dict[str, Any]]] = {}
    # a thread's shared prefix is the very same row objects as the main thread's: one copy each
    copies: dict[int, dict[str, Any]] = {}
    for thread, messages in (source.get("messages") or {}).items():
        rows = []
        for message in messages:
            copy = copies.get(id(message))
            if copy is None:
                copy = _conversation_only(message, counts)
                copies[id(message)] = copy
            rows.append(copy)
        threads[thread] = rows
    left_out = [{"what": what, "blocks": n} for what, n in counts.items() if n]
    return {**source, "messages": threads, "mode": mode, "left_out": left_out}


def _conversation_only(message: dict[str, Any], counts: dict[str, int]) -> dict[str, Any]:
    blocks = []
    for block in message.get("blocks") or []:
        kind = block.get("type")
        text = str(block.get("text") or "")
        what = None
        if kind == "tool_result":
            what = "tool outputs"
        elif kind in ("thinking", "redacted_thinking"):
            what = "thinking"
        elif kind == "tool_use" and block.get("tool_name") in FILE_WRITING_TOOLS:
            what = "file contents"
        if what is None:
            blocks.append(block)
            continue
        counts[what] += 1
        shown = _left_out(what, text)
        if kind == "tool_use":
            shown = f"{block.get('tool_name')} {shown}"
        blocks.append({**block, "text": shown})
    out = {**message, "blocks": blocks}
    if out.get("original_output") is not None:
        counts["tool outputs"] += 1
        out["original_output"] = _left_out("tool outputs", str(out["original_output"]))
    return out


def redact_snapshot(
    source: dict[str, Any], keep: list[str], mode: str = ShareLink.Mode.FULL
) -> Redacted:
    """The snapshot with what ``mode`` leaves out gone, then redacted."""
    source = apply_mode(source, mode)
    result = redaction.redact_tree(source, keep=keep, locate=_locator(source))
    return Redacted(result.tree, result.by_category())


def check_outgoing(payload: str, keep: list[str]) -> None:
    """Scan the bytes about to be published again, as a reader decodes them; any finding not
    kept blocks them."""
    remaining = redaction.scan_outgoing(payload, keep)
    if remaining:
        raise ShareBlocked(
            "redaction",
            "the redacted snapshot still contains "
            + ", ".join(remaining)
            + "; nothing was published",
            409,
        )


def parse_expiry(audience: str, days: int | None) -> timedelta | None:
    if audience not in ShareLink.Audience.values:
        raise ShareError("audience", "audience must be link or workspace")
    if days is None:
        if audience == ShareLink.Audience.LINK:
            raise ShareError(
                "expires_in_days", "a link anyone can open must expire: 1, 7 or 30 days"
            )
        return None
    if days not in EXPIRY_DAYS:
        raise ShareError("expires_in_days", "expiry must be 1, 7 or 30 days")
    return timedelta(days=days)


def create_share(
    *,
    user: User,
    transcript: Transcript,
    run: Run | None = None,
    audience: str = ShareLink.Audience.LINK,
    days: int | None = DEFAULT_EXPIRY_DAYS,
    keep: list[str] | None = None,
    mode: str = ShareLink.Mode.FULL,
) -> tuple[ShareLink, str]:
    """Make a link to a redacted snapshot of the session's report (the default run unless
    told), keeping what ``mode`` keeps. The caller checked ``user`` may share (editor).
    Returns the link and its token, which is shown once and never stored."""
    run = run or run_services.default_run(transcript)
    if run is None or run.transcript_id != transcript.pk:
        raise ShareError("run", "this session has no finished run to share", 409)
    chosen = run  # narrowed to a Run, for the closure below
    return publish(
        user=user,
        workspace_id=transcript.workspace_id,
        audience=audience,
        days=days,
        keep=keep,
        redact=lambda kept: redact_snapshot(snapshot_source(transcript, chosen), kept, mode),
        mode=mode,
        transcript=transcript,
        run=run,
    )


def publish(
    *,
    user: User,
    workspace_id: int,
    audience: str,
    days: int | None,
    keep: list[str] | None,
    redact: Callable[[list[str]], Redacted],
    mode: str = ShareLink.Mode.FULL,
    **target: Any,
) -> tuple[ShareLink, str]:
    """What every kind of link goes through: check the audience, expiry and kept categories,
    redact (``redact(kept)``), scan the outgoing bytes again, then write the link (``target``:
    its transcript and run, its comparison or its sweep) and its snapshot. Returns the link and
    its token, which is never stored."""
    expiry = parse_expiry(audience, days)
    if mode not in ShareLink.Mode.values:
        raise ShareError("mode", "mode must be full or conversation")
    kept = sorted(set(keep or []))
    unknown = set(kept) - set(redaction.categories())
    if unknown:
        raise ShareError("keep", f"unknown redaction categories: {', '.join(sorted(unknown))}")
    redacted = redact(kept)
    check_outgoing(json.dumps(redacted.data, ensure_ascii=False), kept)
    token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
    with transaction.atomic():
        link = ShareLink.objects.create(
            token_hash=hash_token(token),
            workspace_id=workspace_id,
            created_by=user,
            audience=audience,
            expires_at=timezone.now() + expiry if expiry else None,
            kept=kept,
            mode=mode,
            findings=redacted.findings,
            **target,
        )
        ShareSnapshot.objects.create(link=link, data=redacted.data)
    return link, token


def preview_findings(
    transcript: Transcript, run: Run | None = None, mode: str = ShareLink.Mode.FULL
) -> list[dict[str, Any]]:
    """What redaction would find in a share of this session (for the dialog)."""
    run = run or run_services.default_run(transcript)
    if run is None:
        raise ShareError("run", "this session has no finished run to share", 409)
    return redact_snapshot(snapshot_source(transcript, run), [], mode).findings


class LinkGone(Exception):
    """A revoked or expired link (answered 410)."""

    def __init__(self, link: ShareLink) -> None:
        super().__init__(link.state)
        self.link = link


def resolve(token: str) -> ShareLink | None:
    """The link of a token; None when unknown. Raises LinkGone for revoked/expired links.

    The lookup is by the token's hash (an index, which says nothing about how close a wrong
    token was); the hash is then compared in constant time."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 100:
        return None
    wanted = hash_token(token)
    link = (
        ShareLink.objects.select_related("created_by", "transcript")
        .filter(token_hash=wanted)
        .first()
    )
    if link is None or not hmac.compare_digest(link.token_hash, wanted):
        return None
    if not link.is_live:
        raise LinkGone(link)
    return link


def can_open(link: ShareLink, user: User | Any) -> bool:
    """Anyone may open a "link" link; a "workspace" one needs a member of its workspace."""
    if link.audience == ShareLink.Audience.LINK:
        return True
    if not getattr(user, "is_authenticated", False):
        return False
    return access.role_in(user, link.workspace_id) is not None


def record_view(link: ShareLink) -> None:
    ShareLink.objects.filter(pk=link.pk).update(views=F("views") + 1, last_viewed_at=timezone.now())


def visible_links(user: User) -> QuerySet[ShareLink]:
    """The links a user made, and every link of the workspaces they own."""
    owned = Membership.objects.filter(user=user, role=Role.OWNER).values("workspace_id")
    return ShareLink.objects.filter(Q(created_by=user) | Q(workspace_id__in=owned)).select_related(
        "transcript", "comparison", "sweep", "created_by", "workspace"
    )


def link_for(user: User, pk: int) -> ShareLink | None:
    return visible_links(user).filter(pk=pk).first()


def revoke(link: ShareLink) -> None:
    if link.revoked_at is None:
        link.revoked_at = timezone.now()
        link.save(update_fields=["revoked_at"])


def pick_run(transcript: Transcript, run_id: int | None) -> Run:
    """The run an export or share names (one of the session's), else its default run."""
    if run_id is not None:
        run = Run.objects.filter(pk=run_id, transcript=transcript).first()
        if run is None:
            raise Http404("no such run")
        return run
    run = run_services.default_run(transcript)
    if run is None:
        raise ShareError("run", "this session has no run yet", 409)
    return run


#: parsed snapshots kept in the process: a snapshot never changes once written, so a link's
#: pages (report, explorer, fragments) read it from the database once, not per request
_snapshots: LRUCache[str, dict[str, Any]] = LRUCache(maxsize=8)
_snapshots_lock = threading.Lock()


def snapshot_data(link: ShareLink) -> dict[str, Any]:
    """The link's redacted snapshot (the caller checked the link is live). Cached by the
    token's hash, which no other link ever has (a row id can come back after a delete)."""
    key = link.token_hash
    with _snapshots_lock:
        cached = _snapshots.get(key)
    if cached is not None:
        return cached
    data: dict[str, Any] = ShareSnapshot.objects.values_list("data", flat=True).get(link_id=link.pk)
    with _snapshots_lock:
        _snapshots[key] = data
    return data
