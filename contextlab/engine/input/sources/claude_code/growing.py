"""A Claude Code session file that grows (a live session): its main file read from where the
last read stopped.

Reading records is a walk over lines whose whole state is the ``RecordParser`` (records, side
records, problems so far) and where it stopped (``LineCursor``). ``GrowingParse`` continues that
walk from a saved state instead of reading the file again, and gives the state it ends in for
the next append. The records are the same, in the same order, as a read from the first byte
makes, so what is built from them (threads, subagents, compaction forks) is too. A saved state
is only used on the file it was saved from (same name, same bytes before its offset) and only
saved where the walk can go on as a whole read would: at a line end, with no reading error.

A state is a run of pickles: a header, then one frame per read, each holding the records that
read added (the parser only ever appends records) and the parser's other fields as they stood
after it. A read that continued a state adds one frame, so what is written per append grows
with the append, not with the session.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import replace
from typing import Any

from contextlab.engine.input.loading import LineCursor, TranscriptFile
from contextlab.engine.input.model import Problem, ProblemList
from contextlab.engine.input.session import SideRecords, Thread
from contextlab.engine.input.uuid_set import UuidSet

from .extending import BuiltThreads, KeptRead, main_threads
from .records import Record, RecordParser

#: Bump when ``RecordParser``'s state, ``Record`` or ``Message`` change shape (3: a thinking
#: block keeps its signature's length).
STATE_VERSION = 3
#: bytes before the saved offset a resumed read compares with the file, to refuse a state
#: saved from another file
_TAIL_BYTES = 256
#: the parser's fields besides its records and file, saved whole in every frame (small:
#: problems are capped, side records are titles, replacements and collapse commits)
_FIELDS = ("versions", "session_id", "usable", "unknown_types", "unknown_attachments")


class GrowingParse:
    """The main file's read, resumed from ``saved`` (the state of the file's earlier
    version) when it fits the file, or from ``kept`` (the earlier version's read kept in
    memory: its records not unpickled, its threads extended, ``extending``). After
    ``parse_main``: ``resumed`` says whether the read started from either; ``state`` is what
    to keep for the next read, None when it cannot go on from here: when resumed, only a frame
    to append to ``saved``, else a whole state; ``kept`` the read to keep in memory for the
    next (once the threads are built, ``main_threads``), None likewise."""

    def __init__(self, saved: bytes | None = None, kept: KeptRead | None = None) -> None:
        self.saved = saved
        self.state: bytes | None = None
        self.resumed = False
        self.kept = kept
        #: the earlier read's threads, to extend by ``added`` (the records this read added)
        self._earlier: BuiltThreads | None = None
        #: the earlier read's record uuids (``KeptRead.uuids``), when this read went on from it
        self._earlier_uuids: UuidSet | None = None
        self.added: list[Record] = []

    def parse_main(self, tfile: TranscriptFile, upload_problems: ProblemList) -> RecordParser:
        kept, self.kept = self.kept, None
        restored = None
        if kept is not None and not upload_problems:
            restored = _restore_kept(kept, tfile)
            self._earlier = kept.built if restored is not None else None
            self._earlier_uuids = kept.uuids if restored is not None else None
        if restored is None and self.saved and not upload_problems:
            restored = _restore(self.saved, tfile)
        if restored is not None:
            parser, cursor = restored
            self.resumed = True
        else:
            parser = RecordParser(tfile, ProblemList(upload_problems), SideRecords())
            cursor = LineCursor()
        known = len(parser.records)
        parser.feed(cursor)
        self.added = parser.records[known:]
        frame = _frame(parser, cursor, self.added) if not upload_problems else None
        if frame is not None:
            self.state = frame if self.resumed else _header(tfile.name) + frame
        problems = parser.problems
        if frame is not None and isinstance(problems, ProblemList):
            # the problems as a read on from here finds them (``finish`` adds its own)
            tail = _read_tail(tfile, cursor.offset) or b""
            self.kept = KeptRead(parser, cursor, tail, ProblemList(problems, limit=problems.limit))
        parser.finish()
        return parser

    def record_uuids(self, parser: RecordParser) -> UuidSet:
        """The uuids of the main file's records (``parse_main``'s ``parser``): the earlier
        read's with the appended records' added, when this read went on from a kept one (the
        parser only appends records), else all of them; kept for the next read."""
        earlier, self._earlier_uuids = self._earlier_uuids, None
        if earlier is not None:
            uuids = earlier.with_added(r.uuid for r in self.added)
        else:
            uuids = UuidSet(r.uuid for r in parser.records)
        if self.kept is not None:
            self.kept.uuids = uuids
        return uuids

    def main_threads(self, parser: RecordParser, problems: list[Problem]) -> list[Thread]:
        """The main file's threads (``build_threads``), extended from the earlier read's
        when that read was kept in memory and the appended records allow it."""
        threads, built = main_threads(parser, problems, self.added, self._earlier)
        self._earlier = None
        if self.kept is not None:
            self.kept.built = built
        return threads


def _restore_kept(kept: KeptRead, tfile: TranscriptFile) -> tuple[RecordParser, LineCursor] | None:
    """The parser of a read kept in memory, to go on over ``tfile`` (None when it is not the
    file that read was of)."""
    parser = kept.parser
    if parser.tfile.name != tfile.name or _read_tail(tfile, kept.cursor.offset) != kept.tail:
        return None
    parser.tfile = tfile
    parser.problems = kept.feed_problems
    # the session of the read before keeps its side records as they are
    side = parser.side
    parser.side = replace(
        side,
        content_replacements=dict(side.content_replacements),
        collapse_commits=list(side.collapse_commits),
        titles=list(side.titles),
    )
    return parser, kept.cursor


def _header(name: str) -> bytes:
    return pickle.dumps((STATE_VERSION, name), protocol=pickle.HIGHEST_PROTOCOL)


def _frame(parser: RecordParser, cursor: LineCursor, added: list[Record]) -> bytes | None:
    """This read's frame, or None where a later read could differ from a whole one (a last
    line without its end, a read that stopped on an error)."""
    if any(p.severity == "error" for p in parser.problems):
        return None
    tail = _read_tail(parser.tfile, cursor.offset)
    if not tail or not tail.endswith(b"\n"):
        return None
    fields = {name: getattr(parser, name) for name in _FIELDS}
    fields["problems"], fields["side"] = parser.problems, parser.side
    return pickle.dumps((cursor, tail, added, fields), protocol=pickle.HIGHEST_PROTOCOL)


def _restore(saved: bytes, tfile: TranscriptFile) -> tuple[RecordParser, LineCursor] | None:
    try:
        stream = io.BytesIO(saved)
        version, name = pickle.load(stream)
        if version != STATE_VERSION or name != tfile.name:
            return None
        records: list[Record] = []
        frame: tuple[LineCursor, bytes, list[Record], dict[str, Any]] | None = None
        while stream.tell() < len(saved):
            frame = pickle.load(stream)
            records.extend(frame[2])
    except Exception:  # a state of another version, a frame cut short: read from the start
        return None
    if frame is None:
        return None
    cursor, tail, _, fields = frame
    if _read_tail(tfile, cursor.offset) != tail:
        return None  # not the file the state was saved from
    parser = RecordParser(tfile, fields.pop("problems"), fields.pop("side"))
    parser.records = records
    for field, value in fields.items():
        setattr(parser, field, value)
    return parser, cursor


def _read_tail(tfile: TranscriptFile, offset: int) -> bytes | None:
    """The last bytes of the file before ``offset`` (None when it cannot be read there)."""
    start = max(0, offset - _TAIL_BYTES)
    try:
        with tfile.opener() as fh:
            fh.seek(start)
            data = fh.read(offset - start)
    except Exception:  # not seekable, gone: no state
        return None
    return data if len(data) == offset - start else None
