"""A Claude Code session file that grows (a live session): its main file read from where the
last read stopped.

Reading records is a walk over lines whose whole state is the ``RecordParser`` (records, side
records, problems so far) and where it stopped (``LineCursor``). ``GrowingParse`` continues that
walk from a saved state instead of reading the file again, and saves the state it ends in for
the next append. The records are the same objects, in the same order, as a read from the first
byte makes, so what is built from them (threads, subagents, compaction forks) is too. A saved
state is only used on the file it was saved from (same name, same bytes before its offset) and
only saved where the walk can go on as a whole read would: at a line end, with no reading error.
"""

from __future__ import annotations

import pickle

from contextlab.engine.input.loading import LineCursor, TranscriptFile
from contextlab.engine.input.model import ProblemList
from contextlab.engine.input.session import SideRecords

from .records import RecordParser

#: Bump when ``RecordParser``'s state, ``Record`` or ``Message`` change shape.
STATE_VERSION = 1
#: bytes before the saved offset a resumed read compares with the file, to refuse a state
#: saved from another file
_TAIL_BYTES = 256


class GrowingParse:
    """The main file's read, resumed from ``saved`` (a ``state`` of the file's earlier
    version) when it fits the file; ``state`` is then the read's own, None when it cannot be
    continued, and ``resumed`` says whether the read started from ``saved``."""

    def __init__(self, saved: bytes | None = None) -> None:
        self.saved = saved
        self.state: bytes | None = None
        self.resumed = False

    def parse_main(self, tfile: TranscriptFile, upload_problems: ProblemList) -> RecordParser:
        restored = _restore(self.saved, tfile) if self.saved and not upload_problems else None
        if restored is not None:
            parser, cursor = restored
            self.resumed = True
        else:
            parser = RecordParser(tfile, ProblemList(upload_problems), SideRecords())
            cursor = LineCursor()
        parser.feed(cursor)
        self.state = _save(parser, cursor) if not upload_problems else None
        parser.finish()
        return parser


def _save(parser: RecordParser, cursor: LineCursor) -> bytes | None:
    """The parser's state after its last line, or None where a later read could differ from
    a whole one (a last line without its end, a read that stopped on an error)."""
    if any(p.severity == "error" for p in parser.problems):
        return None
    tail = _read_tail(parser.tfile, cursor.offset)
    if not tail or not tail.endswith(b"\n"):
        return None
    tfile, parser.tfile = parser.tfile, None  # type: ignore[assignment]  # its opener does not pickle
    try:
        return pickle.dumps(
            (STATE_VERSION, tfile.name, cursor, tail, parser), protocol=pickle.HIGHEST_PROTOCOL
        )
    finally:
        parser.tfile = tfile


def _restore(saved: bytes, tfile: TranscriptFile) -> tuple[RecordParser, LineCursor] | None:
    try:
        version, name, cursor, tail, parser = pickle.loads(saved)
    except Exception:  # a state of another version or a damaged file: read from the start
        return None
    if version != STATE_VERSION or name != tfile.name or not isinstance(parser, RecordParser):
        return None
    if _read_tail(tfile, cursor.offset) != tail:
        return None  # not the file the state was saved from
    parser.tfile = tfile
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
