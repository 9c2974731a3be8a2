"""The Claude Code adapter: recognises its JSONL and builds the engine's ``Session`` from an upload.

An upload holds the session file, the ``subagents/agent-*.jsonl`` files of the subagents it
started (compaction forks among them) and, for a resumed session, the files it continues. Each
file is read into records (``records``), its records walked into threads (``chains``), resumed
files stitched into one conversation (``stitching``) and compaction forks joined to the main
chain they continue (``compaction_fork``).
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from contextlab.engine.input.loading import TranscriptFile, Upload
from contextlab.engine.input.model import Problem, ProblemList, TranscriptError
from contextlab.engine.input.session import Session, SideRecords, Thread, link_tool_results
from contextlab.engine.input.uuid_set import UuidSet

from .chains import build_threads
from .compaction_fork import COMPACTION_FORK_ID, continue_main, fork_point_of
from .growing import GrowingParse
from .records import (
    CONVERSATION_TYPES,
    PIPELINE_SIDE_TYPES,
    SIDE_TYPES,
    RecordParser,
)
from .stitching import stitched_chain

#: Record types of Claude Code's that are not conversation records (which also need a uuid).
_OTHER_TYPES = SIDE_TYPES | PIPELINE_SIDE_TYPES | {"cost-state"}


class ClaudeCodeAdapter:
    """Claude Code's session JSONL, as a ``sources.SourceAdapter``."""

    name = "claude_code"
    label = "Claude Code"

    def detect(self, head: Sequence[Any]) -> float:
        """The share of the first records that are Claude Code's: a conversation record type
        with a ``uuid``, or one of the side records Claude Code writes."""
        records = [record for record in head if isinstance(record, dict)]
        if not records:
            return 0.0
        return sum(1 for record in records if _is_claude_code_record(record)) / len(records)

    def parse(self, upload: Upload) -> Session:
        return build_session(upload)


def _is_claude_code_record(record: dict[str, Any]) -> bool:
    kind = record.get("type")
    if not isinstance(kind, str):  # hostile input: a list or object is no type (nor hashable)
        return False
    if kind in CONVERSATION_TYPES:
        return isinstance(record.get("uuid"), str)
    return kind in _OTHER_TYPES


def build_session(upload: Upload, growing: GrowingParse | None = None) -> Session:
    """Parse every file of an upload into threads; with ``growing``, the main file's records
    are read on from the state it was given (a file that grew) and its new state kept there.

    Raises ``TranscriptError`` when nothing usable was found; otherwise problems are returned on
    the session and the replay goes on with what was valid.
    """
    problems = ProblemList(upload.problems)
    side = SideRecords()
    main_parser: RecordParser | None = None
    if growing is not None and upload.main is not None and not upload.siblings:
        # the main file is read first: what it found starts the problems and side records
        main_parser = growing.parse_main(upload.main, problems)
        problems, side = main_parser.problems, main_parser.side  # type: ignore[assignment]
    threads: list[Thread] = []
    versions: list[str] = []
    session_id: str | None = None
    total_usable = 0
    record_count = 0
    files: list[tuple[TranscriptFile, str, str]] = []
    forks: list[tuple[Thread, str]] = []
    #: uuid → parent of every main-file record (system and progress records included), to
    #: find the message a compaction fork hangs from when its parent is a turn-end record
    main_parents: dict[str, str | None] = {}
    record_uuids: AbstractSet[str] = frozenset()
    if upload.main is not None:
        files.append((upload.main, "main", "main"))
    for sub in upload.subagents:
        files.append((sub, "subagent", f"agent-{sub.agent_id}"))
    chain = stitched_chain(upload, problems, side) if upload.siblings else None
    for tfile, kind, thread_id in files:
        if kind == "main" and chain is not None:
            parser = chain
        elif kind == "main" and main_parser is not None:
            parser = main_parser
        else:
            parser = RecordParser(tfile, problems, side)
            parser.parse()
        total_usable += parser.usable
        record_count += len(parser.records)
        session_id = session_id or parser.session_id
        for v in parser.versions:
            if v not in versions:
                versions.append(v)
        subagent_file = bool(parser.records) and (
            kind == "subagent" or all(r.is_sidechain for r in parser.records)
        )
        if subagent_file:
            # a subagent file (or one uploaded on its own) is one chain of sidechain records
            for r in parser.records:
                r.is_sidechain = False
        if kind == "main" and parser is main_parser and growing is not None:
            record_uuids = growing.record_uuids(parser)
        elif kind == "main":
            record_uuids = UuidSet(r.uuid for r in parser.records)
        if kind == "main" and upload.subagents:
            main_parents = {r.uuid: r.parent for r in parser.records}
        if (
            parser is main_parser
            and growing is not None
            and not (upload.subagents or subagent_file)
        ):
            # a live session's main file: its earlier read's threads extended where they can be
            file_threads = growing.main_threads(parser, problems)
        else:
            if growing is not None and parser is main_parser:
                growing.kept = (
                    None  # its records change below: the next read goes on from the state
                )
            file_threads = build_threads(
                parser.records, problems, parser.tfile.name, kind, thread_id
            )
        fork_point = (
            fork_point_of(parser.records)
            if kind == "subagent" and COMPACTION_FORK_ID.fullmatch(tfile.agent_id or "")
            else None
        )
        if fork_point is not None and len(file_threads) == 1:
            forks.append((file_threads[0], fork_point))
        if kind == "main" and not file_threads:
            file_threads = [Thread(id="main", kind="main", messages=[], file=tfile.name)]
        if kind == "main" and subagent_file:
            # a subagent's file uploaded alone hangs from the conversation that started it:
            # not a resumed session, and no stitching reads the two as one conversation
            file_threads[0].continues_uuid = None
        threads.extend(file_threads)
    link_tool_results(threads, problems)
    if threads and threads[0].kind == "main":
        for thread, fork_point in forks:
            continue_main(thread, threads[0], fork_point, main_parents)
    has_messages = any(t.messages for t in threads)
    if total_usable == 0 or not has_messages:
        reason = _nothing_usable_reason(problems, total_usable)
        raise TranscriptError(reason, problems)
    if not threads or threads[0].kind != "main":
        threads.insert(0, Thread(id="main", kind="main", messages=[], file=""))
    return Session(
        name=upload.name,
        session_id=session_id,
        threads=threads,
        problems=problems,
        side=side,
        versions=versions,
        upload=upload,
        record_count=record_count,
        record_uuids=record_uuids,
    )


def _nothing_usable_reason(problems: list[Problem], usable: int) -> str:
    bad = [
        p
        for p in problems
        if p.code in ("invalid_json", "not_an_object", "truncated_line", "missing_type")
    ]
    if not problems and usable == 0:
        return "the file is empty: no transcript records found"
    if bad and usable == 0:
        return (
            f"not a Claude Code transcript: none of the lines is a transcript record "
            f"({len(bad)} line(s) rejected, first: {bad[0]})"
        )
    return "no conversation messages found: the file has no user or assistant records"
