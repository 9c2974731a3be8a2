"""Writing the search index (the worker, after a replay is stored; the ``index_sessions``
command and the periodic recovery for sessions stored before) and searching it.

A block's request is the first request of its thread whose history holds it (the explorer
shows it there); a block after the thread's last request (its last answer) gets that last
request, marked as coming after it.
"""

from __future__ import annotations

import json
import logging
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.db import transaction
from django.db.models import Max, Min, Q, QuerySet
from django.urls import reverse
from django.utils.safestring import SafeString

from contextlab.runs.models import Run, RunResult
from contextlab.search import backends
from contextlab.search.models import Entry, IndexedSession
from contextlab.search.query import Query, snippet
from contextlab.transcripts.models import AppendedMessages, Transcript, TranscriptMessages

logger = logging.getLogger(__name__)

#: a block's text is indexed in parts of this many characters (a ``tsvector`` holds at most
#: 1 MB and positions up to 16,383), each overlapping the next so a phrase across is found
PART_CHARS = 8000
PART_OVERLAP = 200
#: characters of one block indexed at most (a tool's output can be megabytes)
MAX_BLOCK_CHARS = 200_000
#: block kinds a search can be narrowed to
KINDS = ("prompt", "assistant", "thinking", "tool_input", "tool_output", "summary", "other")
KIND_LABELS = {
    "prompt": "prompt",
    "assistant": "assistant text",
    "thinking": "thinking",
    "tool_input": "tool input",
    "tool_output": "tool output",
    "summary": "summary",
    "other": "other",
}
_PATH_KEYS = ("file_path", "notebook_path", "path")
#: the key under which ``messages_json`` says which threads share the main thread's messages
_SHARED = "__shared_prefixes__"


def block_kind(role: str, message_kind: str, block_type: str) -> str | None:
    """The kind a search names a block by; None for a block holding no text to search."""
    if block_type == "thinking":
        return "thinking"
    if block_type == "tool_use":
        return "tool_input"
    if block_type == "tool_result":
        return "tool_output"
    if block_type != "text":
        return "other"
    if message_kind == "summary":
        return "summary"
    return "assistant" if role == "assistant" else "prompt"


def tool_path(text: str) -> str:
    """The file path a tool call's input names, if any."""
    try:
        data = json.loads(text)
    except ValueError:
        return ""
    if isinstance(data, dict):
        for key in _PATH_KEYS:
            value = data.get(key)
            if isinstance(value, str) and value:
                return value[:500]
    return ""


def parts(text: str) -> Iterator[str]:
    """The text in overlapping parts of ``PART_CHARS`` (one part for a short text)."""
    text = text[:MAX_BLOCK_CHARS]
    step = PART_CHARS - PART_OVERLAP
    for start in range(0, max(1, len(text) - PART_OVERLAP), step):
        yield text[start : start + PART_CHARS]


def _request_finder(requests: list[dict[str, Any]]) -> dict[str, tuple[list[int], list[int]]]:
    """Per thread: the history lengths of its requests (running maximum, so bisectable) and
    their positions in the result."""
    out: dict[str, tuple[list[int], list[int]]] = {}
    # a request's place in the result is its explorer address (and its number, from 1)
    ordered = sorted(enumerate(requests), key=lambda p: (p[1]["thread"], p[1]["thread_request"]))
    for position, req in ordered:
        ends, indexes = out.setdefault(str(req["thread"]), ([], []))
        end = int((req.get("view") or {}).get("end") or 0)
        ends.append(max(end, ends[-1]) if ends else end)
        indexes.append(position)
    return out


def entries_for(
    transcript_id: int,
    messages: dict[str, Any] | Iterable[tuple[str, list[dict[str, Any]]]],
    requests: list[dict[str, Any]],
    start: dict[str, int] | None = None,
) -> Iterator[Entry]:
    """The index rows of a session's stored messages (their mapping, or its pieces in order,
    ``TranscriptMessages.pieces``: a thread's rows may run on over several), numbered by a
    replay's requests (``start``: only those of each thread's messages from that index on)."""
    finder = _request_finder(requests)
    pieces = messages.items() if isinstance(messages, dict) else messages
    #: per thread: a tool result names its tool through its call's id
    tool_names_of: dict[str, dict[str, str]] = {}
    for thread, rows in pieces:
        if thread == _SHARED or thread not in finder or not isinstance(rows, list):
            continue
        ends, indexes = finder[thread]
        first = (start or {}).get(thread, 0)
        tool_names = tool_names_of.setdefault(thread, {})
        for row in rows:
            m = int(row.get("index") or 0)
            if m < first:
                _learn_tool_names(row, tool_names)
                continue
            # the first request whose history (messages 0..end-1) holds message m
            position = bisect_right(ends, m)
            in_prompt = position < len(ends)
            request = indexes[min(position, len(ends) - 1)]
            for b, block in enumerate(row.get("blocks") or []):
                text = str(block.get("text") or "").replace("\x00", "")
                kind = block_kind(
                    str(row.get("role")), str(row.get("kind")), str(block.get("type"))
                )
                if kind is None or not text.strip():
                    continue
                call = str(block.get("tool_use_id") or "")
                tool = str(block.get("tool_name") or "")[:100] or tool_names.get(call, "")
                if call and tool:
                    tool_names[call] = tool
                path = tool_path(text) if kind == "tool_input" else ""
                for part in parts(text):
                    yield Entry(
                        transcript_id=transcript_id,
                        thread=thread,
                        message=m,
                        block=b,
                        request=request,
                        in_prompt=in_prompt,
                        kind=kind,
                        tool=tool,
                        path=path,
                        body=part,
                    )


class _FirstPrompt:
    """The session's first prompt (the main thread's, else the first thread's), as plain text,
    seen while the stored messages' pieces pass through ``watch``."""

    def __init__(self) -> None:
        self.first_thread: str | None = None
        self.main = ""
        self.main_rows = False
        self.first = ""

    def watch(
        self, pieces: Iterable[tuple[str, list[dict[str, Any]]]]
    ) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        for thread, rows in pieces:
            if self.first_thread is None:
                self.first_thread = thread
            if thread == "main":
                self.main_rows = self.main_rows or bool(rows)
                self.main = self.main or _prompt_in(rows)
            elif thread == self.first_thread:
                self.first = self.first or _prompt_in(rows)
            yield thread, rows

    @property
    def text(self) -> str:
        return self.main if self.main_rows else self.first


def _prompt_in(rows: Any) -> str:
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and row.get("kind") == "prompt":
            for block in row.get("blocks") or []:
                text = " ".join(str(block.get("text") or "").split())
                if text:
                    return text[:200]
    return ""


def indexing_run(transcript: Transcript) -> Run | None:
    """The run whose result numbers the session's requests: its latest finished recorded
    replay, else any finished run (every run of a session has the same requests)."""
    done = transcript.runs.filter(status=Run.Status.DONE, result__isnull=False)
    return (
        done.filter(mode=Run.Mode.RECORDED).order_by("-finished_at", "-pk").first()
        or done.order_by("-finished_at", "-pk").first()
    )


def _learn_tool_names(row: dict[str, Any], tool_names: dict[str, str]) -> None:
    """``entries_for``'s tool names of a message it does not index (a result after it may
    name its tool through a call of this one)."""
    for block in row.get("blocks") or []:
        call = str(block.get("tool_use_id") or "")
        tool = str(block.get("tool_name") or "")[:100]
        if call and tool and str(block.get("text") or "").replace("\x00", "").strip():
            tool_names[call] = tool


def _kept_before_append(transcript: Transcript, requests: list[dict[str, Any]]) -> dict[str, int]:
    """Per thread, the first message whose rows are to be written: after those a live
    session's append kept (``forget(appended=True)``), which this replay's requests number as
    they were numbered. Empty (index the session whole) when no row was kept or one would be
    numbered otherwise now: each request's first and last message kept must still be that
    request's (a provisional replay keeps the earlier requests as they were)."""
    finder = _request_finder(requests)
    spans = (
        Entry.objects.filter(transcript=transcript)
        .values_list("thread", "request", "in_prompt")
        .annotate(first=Min("message"), last=Max("message"))
    )
    start: dict[str, int] = {}
    for thread, request, in_prompt, first, last in spans:
        if not in_prompt or thread not in finder:
            return {}
        ends, indexes = finder[thread]
        for m in (first, last):
            position = bisect_right(ends, m)
            if position >= len(ends) or indexes[position] != request:
                return {}
        start[thread] = max(start.get(thread, 0), last + 1)
    return start


def index_session(
    transcript: Transcript,
    run: Run | None = None,
    requests: list[dict[str, Any]] | None = None,
) -> IndexedSession | None:
    """(Re)build the session's index rows; None when it has no stored messages or finished
    run yet (it is indexed when one finishes). After a live session's append replayed
    provisionally (``run.provisional``), only the rows of what the append changed are
    written; the others, kept, are numbered as they were. Those rows are read from the
    append's stored rows alone (``AppendedMessages``, ``_appended_pieces``) when they hold
    every message to index: what is read grows with the append, not the session; else the
    stored messages are read whole. ``requests``: the run's result's, when the caller holds
    them (else its stored result is read)."""
    run = run or indexing_run(transcript)
    messages = TranscriptMessages.of_file(transcript) if run is not None else None
    if run is None or messages is None:
        return None
    if requests is None:
        result = RunResult.objects.filter(run=run).first()
        if result is None or not result.data:
            return None
        requests = result.requests()
    started = time.perf_counter()
    with transaction.atomic():
        kept = Entry.objects.filter(transcript=transcript)
        start = _kept_before_append(transcript, requests) if run.provisional else {}
        appended = _appended_pieces(transcript, start) if start else None
        if appended is not None:
            pieces, prompt = appended
            first_prompt: Callable[[], str] = lambda: prompt  # noqa: E731
            entries: Iterable[Entry] = _changed_only(
                transcript, list(entries_for(transcript.pk, pieces, requests)), start
            )
        else:
            # the stored messages read one part at a time (a long session's are gigabytes)
            stored = TranscriptMessages.current_pieces(transcript, messages)
            if stored is None:
                return None
            watched = _FirstPrompt()
            first_prompt = lambda: watched.text  # noqa: E731 (seen once the rows are read)
            entries = entries_for(transcript.pk, watched.watch(stored), requests, start)
        if start:
            count = kept.count()
            tools: set[str] = set(kept.exclude(tool="").values_list("tool", flat=True).distinct())
        else:
            kept.delete()
            count = 0
            tools = set()
        count += backends.write_entries(_naming_tools(entries, tools))
        # one INSERT … ON CONFLICT (update_or_create took five round trips: two savepoints)
        (state,) = IndexedSession.objects.bulk_create(
            [
                IndexedSession(
                    transcript=transcript,
                    run=run,
                    blocks=count,
                    tools=sorted(tools),
                    first_prompt=first_prompt(),
                )
            ],
            update_conflicts=True,
            unique_fields=["transcript"],
            update_fields=["run", "blocks", "tools", "first_prompt", "indexed_at"],
        )
    logger.info(
        "session %s: %s search rows indexed in %.2f s%s",
        transcript.pk,
        count,
        time.perf_counter() - started,
        (
            " (the append's rows only)"
            if appended is not None
            else " (the rows before the append kept)"
        )
        if start
        else "",
    )
    return state


def _naming_tools(entries: Iterable[Entry], tools: set[str]) -> Iterator[Entry]:
    """``entries``, adding the tool each names to ``tools`` as it passes."""
    for entry in entries:
        if entry.tool:
            tools.add(entry.tool)
        yield entry


#: appends' stored rows read back at most to find the rows an index update writes
APPENDED_PARTS_READ = 8


def _appended_pieces(
    transcript: Transcript, start: dict[str, int]
) -> tuple[list[tuple[str, list[dict[str, Any]]]], str] | None:
    """The rows to index after a live session's append (``start``: per thread, the first
    message with no kept row), read from the last appends' stored rows alone (their
    ``AppendedMessages``, the newest of the session's file, each the one before's next), and
    the session's first prompt as indexed before; None when they do not hold them all within
    ``APPENDED_PARTS_READ`` appends (the index kept is of a much earlier version), a result's
    tool is named by a call before them, or the first prompt was not the main thread's. A
    message they write again that had rows kept is compared with them (``_changed_only``)."""
    indexed = IndexedSession.objects.filter(transcript=transcript).only("first_prompt").first()
    if indexed is None or not indexed.first_prompt or "main" not in start:
        return None  # the first prompt is read from the main thread's first rows
    parts = (
        AppendedMessages.objects.filter(messages_id=transcript.pk)
        .order_by("-id")
        .values_list("sha256", "previous_sha256", "data")
    )
    rows_of: dict[str, tuple[int, list[dict[str, Any]]]] = {}
    sha256 = transcript.sha256
    for n, (part_sha256, previous, data) in enumerate(parts.iterator(chunk_size=1)):
        if part_sha256 != sha256 or n == APPENDED_PARTS_READ:
            return None
        sha256 = previous
        for thread, part in data.items():
            first, rows = int(part["start"]), part["rows"]
            if thread not in rows_of:
                if n == 0:
                    rows_of[thread] = (first, rows)
                continue  # (a thread the newest rows hold no longer)
            later, later_rows = rows_of[thread]
            if later > start.get(thread, 0) and first <= later <= first + len(rows):
                # this append's rows up to where the later one's take over
                rows_of[thread] = (first, rows[: later - first] + later_rows)
        if all(first <= start.get(thread, 0) for thread, (first, _) in rows_of.items()):
            break
    else:
        return None
    if set(start) - set(rows_of):
        return None
    pieces = [(thread, rows) for thread, (_, rows) in rows_of.items()]
    if not _tools_named(pieces):
        return None
    return pieces, indexed.first_prompt


def _tools_named(pieces: list[tuple[str, list[dict[str, Any]]]]) -> bool:
    """Whether every result of ``pieces`` that is named by its call (``entries_for``) has
    that call before it in them."""
    for _, rows in pieces:
        calls: set[str] = set()
        for row in rows:
            for block in row.get("blocks") or []:
                call = str(block.get("tool_use_id") or "")
                if not call or not str(block.get("text") or "").replace("\x00", "").strip():
                    continue
                if block.get("tool_name"):
                    calls.add(call)
                elif call not in calls:
                    return False
    return True


def _changed_only(
    transcript: Transcript, entries: list[Entry], start: dict[str, int]
) -> list[Entry]:
    """``entries`` without those of messages with rows kept that are the kept rows: an append
    writes a thread's last stored message again, and every one after a response a record
    was merged into (``engine.appended_messages_json``). A message whose rows changed has its
    kept rows deleted, and its new ones written."""
    fields = ("message", "block", "request", "in_prompt", "kind", "tool", "path", "body")
    out: list[Entry] = []
    by_thread: dict[str, list[Entry]] = {}
    for entry in entries:
        if entry.message < start.get(entry.thread, 0):
            by_thread.setdefault(entry.thread, []).append(entry)
        else:
            out.append(entry)
    for thread, again in by_thread.items():
        first = min(e.message for e in again)
        rows = Entry.objects.filter(
            transcript=transcript, thread=thread, message__gte=first, message__lt=start[thread]
        )
        before = sorted(rows.values_list(*fields))
        if before != sorted(tuple(getattr(e, f) for f in fields) for e in again):
            rows.delete()
            out.extend(again)
    return out


def index_after_run(run_id: int, requests: list[dict[str, Any]] | None = None) -> None:
    """The worker's step after a run is stored: index its session if it is not yet.
    ``requests``: the stored result's (the worker holds them: not read back, a second copy
    of a long session's result)."""
    run = Run.objects.select_related("transcript").filter(pk=run_id).first()
    indexed = IndexedSession.objects.filter(transcript_id=run.transcript_id) if run else None
    if run is None or indexed is None or indexed.filter(run__isnull=False).exists():
        return
    index_session(run.transcript, run, requests)


def forget(transcript_id: int, *, appended: bool = False) -> None:
    """Drop a session's index (its stored messages are gone; the next replay indexes it).
    ``appended`` (a live session's append): the rows of blocks some request's prompt holds
    stay (found meanwhile, at the same places; the next replay writes only the others), the
    rows of each thread's last answer go (the append's request may now hold it), and the
    session's ``IndexedSession`` stays, with no run (it counts as not indexed), for what the
    next replay keeps of it (its first prompt)."""
    rows = Entry.objects.filter(transcript_id=transcript_id)
    (rows.filter(in_prompt=False) if appended else rows).delete()
    indexed = IndexedSession.objects.filter(transcript_id=transcript_id)
    if appended:
        indexed.update(run=None)
    else:
        indexed.delete()


def unindexed(limit: int | None = None) -> QuerySet[Transcript]:
    """Sessions with a finished run but no index rows yet (or those of an earlier version:
    ``forget(appended=True)``), oldest first."""
    sessions = (
        Transcript.objects.filter(runs__status=Run.Status.DONE)
        .filter(Q(search_index__isnull=True) | Q(search_index__run__isnull=True))
        .distinct()
        .order_by("pk")
    )
    return sessions[:limit] if limit is not None else sessions


def index_missing(limit: int | None = None) -> list[int]:
    """Index the sessions stored before the index (or whose indexing failed); their ids."""
    done = []
    for transcript in unindexed(limit):
        try:
            if index_session(transcript) is not None:
                done.append(transcript.pk)
        except Exception:
            logger.exception("session %s: indexing failed", transcript.pk)
    return done


# --- searching ------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _request_url() -> str:
    """The explorer's address with ``{session}`` and ``{request}`` to fill (reversed once)."""
    return (
        reverse("runs:request", args=[111111111, 222222222])
        .replace("111111111", "{session}")
        .replace("222222222", "{request}")
    )


@dataclass(frozen=True)
class Hit:
    session_id: int
    session_name: str
    request: int
    #: False: the block comes after the last request (no request's prompt holds it)
    in_prompt: bool
    thread: str
    message: int
    block: int
    kind: str
    tool: str
    path: str
    snippet: SafeString

    @property
    def number(self) -> int:
        """The request number as users read it (from 1)."""
        return self.request + 1

    @property
    def block_id(self) -> str:
        return f"b-{self.message}-{self.block}"

    @property
    def kind_label(self) -> str:
        return KIND_LABELS.get(self.kind, self.kind)

    @property
    def url(self) -> str:
        """The explorer at the hit's request, with the block in view and marked."""
        base = _request_url().format(session=self.session_id, request=self.request)
        if not self.in_prompt:
            return base  # the last request: the block came after it
        return f"{base}?block={self.block_id}#{self.block_id}"


@dataclass(frozen=True)
class Results:
    hits: list[Hit]
    #: more hits than shown
    more: bool


#: the fields of an index row a hit shows
HIT_FIELDS = (
    "id",
    "transcript",
    "thread",
    "message",
    "block",
    "request",
    "in_prompt",
    "kind",
    "tool",
    "path",
    "body",
)


def session_name(transcript: Transcript, first_prompt: str = "") -> str:
    """The name a hit shows: the session's one display name (title, else first prompt markup
    stripped, else its file), with the index's first prompt for a session stored before
    transcripts kept theirs."""
    if not transcript.first_prompt and first_prompt:
        transcript.first_prompt = first_prompt  # in memory only, for this answer
    return transcript.display_name


def search(
    query: Query,
    sessions: Iterable[int],
    *,
    tool: str = "",
    kind: str = "",
    limit: int = 50,
) -> Results:
    """Blocks of ``sessions`` holding every term of ``query``, in session then request order
    (the newest session first), one hit per block."""
    ids = list(sessions)
    entries = Entry.objects.filter(transcript_id__in=ids)
    if tool:
        entries = entries.filter(tool=tool)
    if kind:
        entries = entries.filter(kind=kind)
    found = backends.first_matches(
        entries,
        ids,
        query,
        order=("-transcript_id", "request", "message", "block", "id"),
        fields=("id", "transcript_id", "thread", "message", "block"),
        count=limit * 4 + 1,
        narrowed=bool(tool or kind),
    )
    seen: set[tuple[int, str, int, int]] = set()
    keep: list[int] = []
    more = False
    for entry_id, session_id, thread, message, block in found:
        key = (session_id, thread, message, block)
        if key in seen:
            continue
        if len(keep) == limit:
            more = True
            break
        seen.add(key)
        keep.append(entry_id)
    # only the names of the session (its problems and threads are large JSON)
    rows = (
        Entry.objects.filter(id__in=keep)
        .select_related("transcript")
        .only(*HIT_FIELDS, "transcript__title", "transcript__name", "transcript__first_prompt")
    )
    names = dict(
        IndexedSession.objects.filter(
            transcript_id__in={r.transcript_id for r in rows}
        ).values_list("transcript_id", "first_prompt")
    )
    by_id = {row.pk: row for row in rows}
    hits = []
    for entry_id in keep:
        row = by_id[entry_id]
        hits.append(
            Hit(
                session_id=row.transcript_id,
                session_name=session_name(row.transcript, names.get(row.transcript_id, "")),
                request=row.request,
                in_prompt=row.in_prompt,
                thread=row.thread,
                message=row.message,
                block=row.block,
                kind=row.kind,
                tool=row.tool,
                path=row.path,
                snippet=snippet(row.body, query),
            )
        )
    return Results(hits, more)


def tools_of(transcript_id: int) -> list[str]:
    """The tool names a session's indexed blocks carry (for the filter)."""
    found = IndexedSession.objects.filter(transcript_id=transcript_id).values_list(
        "tools", flat=True
    )
    return list(found.first() or [])


def not_indexed(session_ids: Iterable[int]) -> int:
    """How many of the sessions have no index yet."""
    ids = set(session_ids)
    indexed = IndexedSession.objects.filter(transcript_id__in=ids, run__isnull=False)
    return len(ids) - indexed.count()
