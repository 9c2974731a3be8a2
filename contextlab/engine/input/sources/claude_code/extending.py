"""A live session's main thread extended by its appended records, not built again from all of
them (``GrowingParse`` on a read kept in this process's memory).

Most appends only continue the main chain: each new record hangs from the one before it, the
first from the file's last record. The threads a whole build makes of the grown file are then
the earlier build's, its main thread's messages followed by the new records' (grouped by
``chains.MessageGrouper``, which goes on from where it stopped: a response split across the
append joins its message). That holds only where no earlier record can change place because of
the new ones, which ``extend`` checks, and the earlier build must have had no other thread than
the main one. Whatever it does not fit is built whole (``build_threads``), as before.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from contextlab.engine.input.loading import LineCursor
from contextlab.engine.input.model import Problem, ProblemList
from contextlab.engine.input.session import Thread
from contextlab.engine.input.uuid_set import UuidSet

from .chains import MainChainKept, build_threads, response_and_call_ids
from .records import Record, RecordParser

#: how the main file's threads of each growing read were made, in this process: "extended"
#: (the earlier build's, extended by the appended records) or "built whole"
READS: Counter[str] = Counter()
#: record types a main chain's walk can start from (``chains._main_leaf``)
_LEAF_TYPES = frozenset(("user", "assistant", "system", "attachment"))


@dataclass
class BuiltThreads:
    """A build of the main file's threads that later records can extend: only the main
    thread, its last record the file's last."""

    threads: list[Thread]
    kept: MainChainKept
    #: the problems building them reported (a whole build reports them again)
    problems: list[Problem]
    #: every record's uuid
    uuids: set[str]
    #: uuids records point to (parent, source assistant) that are no record's: a new record of
    #: one of them would give an earlier record a place on the chain
    dangling: set[str]
    #: the main chain's last record
    last: Record
    #: the records after it in the file (hook progress: no message)
    pending: list[Record]


@dataclass
class KeptRead:
    """A read of a growing session's main file kept in memory for the next append's: the
    parser as its records left it, where it stopped, the problems it had found before the
    file's end was reported (``RecordParser.finish``) and the threads built."""

    parser: RecordParser
    cursor: LineCursor
    #: the file's last bytes before ``cursor`` (a read on checks the file still holds them)
    tail: bytes
    feed_problems: ProblemList
    built: BuiltThreads | None = field(default=None)
    #: the uuids of the parser's records as this read left them (``Session.record_uuids``),
    #: which the next read adds its records' to instead of packing every uuid again
    uuids: UuidSet | None = field(default=None)


def main_threads(
    parser: RecordParser,
    problems: list[Problem],
    added: list[Record],
    earlier: BuiltThreads | None,
) -> tuple[list[Thread], BuiltThreads | None]:
    """The main file's threads (``build_threads`` of ``parser.records``, reporting into
    ``problems``), extended from ``earlier`` (the earlier read's build, whose records are those
    before ``added``) where the appended records allow it; and the build to keep for the next."""
    if earlier is not None and extend(earlier, added):
        READS["extended"] += 1
        problems.extend(earlier.problems)
        return earlier.threads, earlier
    READS["built whole"] += 1
    kept = MainChainKept()
    found: list[Problem] = []
    threads = build_threads(parser.records, found, parser.tfile.name, "main", "main", kept)
    problems.extend(found)
    return threads, _extendable(parser.records, threads, kept, found)


def _extendable(
    records: list[Record], threads: list[Thread], kept: MainChainKept, found: list[Problem]
) -> BuiltThreads | None:
    """The build kept to extend, when it is one ``extend`` can go on from: only a main
    thread, walked from the file's last record a chain can end on, the records after it
    (hook progress) holding no message and pointed to by no earlier record."""
    at = next((n for n in range(len(records) - 1, -1, -1) if _ends_chain(records[n])), None)
    if at is None or kept.grouper is None or len(threads) != 1 or threads[0].kind != "main":
        return None
    pending = records[at + 1 :]
    if any(r.message is not None or r.is_sidechain for r in pending):
        return None
    uuids = {r.uuid for r in records}
    pointed = {r.parent for r in records if r.parent} | {
        r.source_assistant for r in records if r.source_assistant
    }
    later = {r.uuid for r in pending}
    if later & {ref for r in records[: at + 1] for ref in (r.parent, r.source_assistant) if ref}:
        return None
    return BuiltThreads(threads, kept, found, uuids, pointed - uuids, records[at], pending)


def _ends_chain(record: Record) -> bool:
    """A record a main chain's walk starts from (``chains._main_leaf``)."""
    return record.type in _LEAF_TYPES and not record.synthetic and not record.is_sidechain


def extend(built: BuiltThreads, added: list[Record]) -> bool:
    """Extend ``built`` by the records ``added`` after its last, when a whole build of all the
    records would make the same threads with them (and the records pending after its chain's
    last) at the end of the main one; False (``built`` untouched) otherwise."""
    known = built.uuids
    fresh: set[str] = set()
    for record in added:
        if (
            record.uuid in known
            or record.uuid in fresh
            or record.uuid in built.dangling
            or record.parent is None
            or (record.parent not in known and record.parent not in fresh)
            or record.is_sidechain
            or record.synthetic
        ):
            return False
        fresh.add(record.uuid)
    after = built.pending + added
    at = next((n for n in range(len(after) - 1, -1, -1) if _ends_chain(after[n])), None)
    path: list[Record] = []
    if at is not None:
        # the walk from the new last record up to the chain's last, through these records only
        position = {r.uuid: n for n, r in enumerate(after)}
        node = at
        while True:
            path.append(after[node])
            parent = after[node].parent
            if parent == built.last.uuid:
                break
            up = position.get(parent or "")
            if up is None or up >= node:
                return False
            node = up
        path.reverse()
    on_path = {id(r) for r in path}
    rest = after[at + 1 :] if at is not None else after
    if any(r.message is not None for r in after if id(r) not in on_path):
        return False
    if _reattaches(built.kept.passed, path):
        return False
    grouper = built.kept.grouper
    assert grouper is not None  # an extendable build has one
    # the session of the records before keeps its thread and messages as they are
    thread = replace(built.threads[0], messages=list(built.threads[0].messages))
    grouper.go_on(thread)
    grouper.add(path)
    built.threads = [thread]
    built.uuids |= fresh
    built.dangling |= {
        r.source_assistant
        for r in added
        if r.source_assistant and r.source_assistant not in built.uuids
    }
    if path:
        built.last = path[-1]
    built.pending = list(rest)
    return True


def _reattaches(passed: list[Record], added: list[Record]) -> bool:
    """Whether a record that hangs from the chain but was not part of it would be with the
    ``added`` records on it: a response they continue, a tool call they answer
    (``chains.RecordTree.reattach``)."""
    if not passed:
        return False
    response_ids, tool_ids = response_and_call_ids(added)
    for record in passed:
        message = record.message
        if message is None:
            continue
        if record.type == "assistant" and message.message_id in response_ids:
            return True
        if message.kind == "tool_result" and any(
            b.type == "tool_result" and b.tool_use_id in tool_ids for b in message.blocks
        ):
            return True
    return False
