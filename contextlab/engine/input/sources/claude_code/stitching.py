"""Resumed Claude Code sessions: files that continue one another, read as one conversation."""

from __future__ import annotations

from contextlab.engine.input.loading import Upload
from contextlab.engine.input.model import Problem, ProblemList
from contextlab.engine.input.session import SideRecords

from .records import RecordParser


def stitched_chain(upload: Upload, problems: ProblemList, side: SideRecords) -> RecordParser:
    """The main file with the session files it continues (and that continue it), as one parse.

    A resumed or continued session writes a new file whose first record's ``parentUuid`` is a
    record of the older file. Files are linked that way, earliest first, and their records read
    as one stream (a record already read from an earlier file is skipped, as Claude Code skips
    uuids it has written); so the "earlier history not in this file" is the real history.
    Files that neither continue nor are continued by the chain are reported and left out.
    """
    assert upload.main is not None
    parsed: list[RecordParser] = []
    for tfile in [upload.main, *upload.siblings]:
        parser = RecordParser(tfile, problems, side)
        parser.parse()
        parsed.append(parser)
    uuids = [{r.uuid for r in p.records} for p in parsed]

    def continued(i: int) -> int | None:
        """The file whose record the first record of file ``i`` hangs from."""
        roots = [r for r in parsed[i].records if not r.is_sidechain]
        parent = roots[0].parent if roots else None
        if parent is None or parent in uuids[i]:
            return None
        return next((j for j in range(len(parsed)) if j != i and parent in uuids[j]), None)

    before = {i: continued(i) for i in range(len(parsed))}
    chain = [0]
    while (earlier := before[chain[0]]) is not None and earlier not in chain:
        chain.insert(0, earlier)
    while (
        later := next((i for i, b in before.items() if b == chain[-1] and i not in chain), None)
    ) is not None:
        chain.append(later)
    for i, parser in enumerate(parsed):
        if i not in chain:
            problems.append(
                Problem(
                    0,
                    "extra_transcript",
                    f"{parser.tfile.name}: a second session file in the archive was not read "
                    "(it neither continues this session nor is continued by it)",
                    upload.name,
                    "info",
                )
            )
    stitched = RecordParser(parsed[chain[-1]].tfile, problems, side)
    seen: set[str] = set()
    for i in chain:
        parser = parsed[i]
        stitched.records.extend(r for r in parser.records if r.uuid not in seen)
        seen |= uuids[i]
        stitched.usable += parser.usable
        stitched.versions.extend(v for v in parser.versions if v not in stitched.versions)
        # the newest file's id names the session (it is the one Claude Code resumes)
        stitched.session_id = parser.session_id or stitched.session_id
    if len(chain) > 1:
        problems.append(
            Problem(
                0,
                "stitched_files",
                "read as one conversation, earliest first: "
                + ", ".join(parsed[i].tfile.name for i in chain),
                upload.name,
                "info",
            )
        )
    return stitched
