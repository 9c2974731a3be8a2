"""A session's ``messages_json`` as a store keeps it: in parts of bounded size (one
PostgreSQL ``jsonb`` value holds at most 256 MB), and a live session's later version as the
rows its append changed or added (``appended_messages_json``), put in on reading."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from contextlab.engine.input.session import Session
from contextlab.engine.measures.tokens import TiktokenCounter

# the explorer's own row writer and thread layout: stored rows are exactly its rows
from .explorer import SHARED_PREFIXES, _message_rows, _stored_threads, messages_json


def message_marks(session: Session) -> list[list[Any]]:
    """What a store of ``messages_json(session)`` keeps to take a later, longer version of
    the session by its appended rows (``appended_messages_json``): each thread's id, message
    count, last message's uuid, how many of its first messages are the main thread's
    (``SHARED_PREFIXES``) and how many records each message was made of, in order."""
    threads, _ = _stored_threads(session)
    return [
        [
            t.id,
            len(t.messages),
            t.messages[-1].uuid if t.messages else None,
            start,
            [len(m.uuids) for m in t.messages],
        ]
        for t, start in threads
    ]


def appended_messages_json(
    session: Session, marks: list[list[Any]]
) -> dict[str, dict[str, Any]] | None:
    """The rows of ``messages_json(session)`` a store of an earlier version of the session
    (its ``message_marks``: the session before lines were appended to its file) lacks: per
    thread, ``{"start": i, "rows": [...]}``, its stored rows from ``i`` on to be replaced by
    ``rows`` (``apply_appended_messages``). A thread's last stored message is written again (an
    append may complete a response written record by record), and so is every one after the
    first that an appended record was merged into (a response's next parallel tool call comes
    after the first call's result); a new thread after the stored ones comes whole. None when
    the session did not grow so: a thread stored is gone, moved, shorter or ends on another
    message, threads share an id, or one starts with another's messages (``SHARED_PREFIXES``,
    which a whole store handles), or the marks count no records (a store before they did):
    store it whole."""
    threads, shared = _stored_threads(session)
    ids = [thread.id for thread, _ in threads]
    if shared or len(set(ids)) < len(ids) or len(ids) < len(marks):
        return None
    if any(len(mark) != 5 or mark[3] for mark in marks):
        return None  # the store's threads shared a prefix, or its marks count no records
    counter = TiktokenCounter()
    out: dict[str, dict[str, Any]] = {}
    for n, (thread, _) in enumerate(threads):
        start = 0
        if n < len(marks):
            thread_id, count, last, _, sizes = marks[n]
            if thread_id != thread.id or len(thread.messages) < count or len(sizes) != count:
                return None
            if count and thread.messages[count - 1].uuid != last:
                return None
            start = max(0, count - 1)
            # the first message a record was merged into since (its rows on are written)
            start = next(
                (
                    mi
                    for mi, size in enumerate(sizes[:start])
                    if len(thread.messages[mi].uuids) != size
                ),
                start,
            )
            if start == len(thread.messages):
                continue  # an empty thread stays empty
        out[thread.id] = {
            "start": start,
            "rows": list(_message_rows(thread, start, counter, True, True)),
        }
    return out


def apply_appended_messages(
    data: dict[str, Any], appended: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """Stored ``messages_json`` output ``data`` with the rows ``appended_messages_json`` gave
    put in (a new mapping; ``data``'s lists are not changed, their rows are shared)."""
    out = dict(data)
    for thread, part in appended.items():
        out[thread] = list(out.get(thread) or [])[: part["start"]] + part["rows"]
    return out


#: ``messages_json_parts``: characters of a part's JSON at most (a single row longer than this
#: is a part of its own). A store keeps each part as one value: PostgreSQL's ``jsonb`` holds at
#: most 256 MB in one, which the messages of a session above about 550 MB exceed.
PART_CHARS = 4 * 1024 * 1024


def messages_json_head(session: Session) -> dict[str, Any]:
    """What ``messages_json(session)`` holds beside the threads' rows: its ``SHARED_PREFIXES``
    (empty when no thread shares another's messages)."""
    _, shared = _stored_threads(session)
    return {SHARED_PREFIXES: shared} if shared else {}


def messages_json_parts(session: Session, max_chars: int | None = None) -> Iterator[str]:
    """The threads' rows of ``messages_json(session)`` as the JSON texts of parts
    ``{"thread": id, "rows": [...]}``, in order: a thread's rows run on over its parts, each
    of at most ``max_chars`` (``PART_CHARS``) characters of rows. ``join_messages_parts`` with
    ``messages_json_head`` gives ``messages_json(session)`` back. One part's text is held at a
    time, never every text of the session."""
    limit = max_chars or PART_CHARS
    threads, _ = _stored_threads(session)
    if len({thread.id for thread, _ in threads}) < len(threads):
        # two threads of one id: the mapping keeps the first's place and the last's rows
        rows_of: Iterator[tuple[str, Iterator[dict[str, Any]]]] = (
            (thread_id, iter(rows))
            for thread_id, rows in messages_json(session).items()
            if thread_id != SHARED_PREFIXES
        )
    else:
        counter = TiktokenCounter()
        rows_of = (
            (thread.id, _message_rows(thread, start, counter, True, True))
            for thread, start in threads
        )
    for thread_id, rows in rows_of:
        head = f'{{"thread": {json.dumps(thread_id)}, "rows": ['
        batch: list[str] = []
        size = 0
        for row in rows:
            text = json.dumps(row)
            if batch and size + len(text) > limit:
                yield head + ", ".join(batch) + "]}"
                batch, size = [], 0
            batch.append(text)
            size += len(text) + 2
        yield head + ", ".join(batch) + "]}"  # a thread without rows is one empty part


def join_messages_parts(head: dict[str, Any], parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``messages_json``'s mapping from ``messages_json_head`` and the parsed parts of
    ``messages_json_parts``, in their order."""
    out: dict[str, Any] = {}
    for part in parts:
        out.setdefault(part["thread"], []).extend(part["rows"])
    if SHARED_PREFIXES in head:
        out[SHARED_PREFIXES] = head[SHARED_PREFIXES]
    return out
