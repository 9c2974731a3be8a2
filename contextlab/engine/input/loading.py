"""Open a transcript upload: ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst`` (Codex keeps cold rollouts
so), or a ``.zip`` / ``.tar.gz`` session folder.

Files are streamed line by line; nothing holds a whole file in memory, and archive members are
read straight from the archive (tool-results are opened only when someone asks for them).

Uploads come from strangers, so every reading step has a bound, and what goes past it becomes a
``Problem`` (or, when nothing can be read at all, a ``TranscriptError``), never an exception that
takes the process down: a line is read at most ``MAX_LINE_BYTES`` at a time (a longer one is
skipped without being held), a compressed stream stops after ``MAX_EXPANSION`` times the upload's
size (a gzip or zstd bomb), archives are refused past ``MAX_ARCHIVE_MEMBERS`` members or past that
expansion in declared sizes, the problem list keeps its first ``MAX_PROBLEMS`` entries and counts
the rest (``model.ProblemList``), and ``json_line.decode_json_line`` turns hostile JSON into a
reason or a cleaned value.
"""

from __future__ import annotations

import io
import os
import posixpath
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

from .compressed import ZSTD_MAGIC, ExpansionLimitExceeded, open_gzip, open_zstd
from .model import MAX_PROBLEMS, Problem, ProblemList, TranscriptError

if TYPE_CHECKING:  # imported where used: a plain .jsonl needs none of them
    import tarfile
    import zipfile

#: Refuse archive members bigger than this when uncompressed (zip-bomb guard), bytes.
MAX_MEMBER_BYTES = 4 * 1024**3
#: Lines longer than this are reported and skipped rather than parsed, bytes. The longest line
#: of the corpus is about 5 MB (a base64 image); a line is held as bytes, text and parsed JSON
#: at once, so this bounds a reader's memory at a few hundred MB.
MAX_LINE_BYTES = 64 * 1024**2
#: A compressed upload may expand to this many times its own size (real transcripts: 5-15x) ...
MAX_EXPANSION = 100
#: ... but always to at least this many bytes (a small gzip of a normal session).
MIN_EXPANSION_BYTES = 512 * 1024**2
#: Archives with more members than this are refused before they are indexed (a session folder
#: holds the session, its subagents and tool-results: hundreds, rarely thousands).
MAX_ARCHIVE_MEMBERS = 20_000
#: Reading stops once this many problems were dropped past MAX_PROBLEMS: a file of a few
#: kilobytes of gzip can hold millions of bad lines, each costing time, not memory.
MAX_DROPPED_PROBLEMS = 100_000
#: How much is read at a time while skipping the rest of an over-long line, bytes.
_SKIP_CHUNK = 1024**2


Opener = Callable[[], IO[bytes]]


@dataclass
class TranscriptFile:
    """One JSONL stream inside an upload."""

    name: str
    opener: Opener
    #: "main" for the session file, "subagent" for subagents/agent-*.jsonl
    role: str = "main"
    agent_id: str | None = None


@dataclass
class Upload:
    """Everything found in one upload."""

    name: str
    main: TranscriptFile | None
    subagents: list[TranscriptFile] = field(default_factory=list)
    #: other session files beside the main one (an archive of a project folder): a file the
    #: main continues (or that continues it) is stitched to it by ``parentUuid``
    siblings: list[TranscriptFile] = field(default_factory=list)
    #: tool_use_id -> opener of tool-results/<id>.txt|.json
    tool_results: dict[str, Opener] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=ProblemList)
    _closers: list[Callable[[], None]] = field(default_factory=list)

    def read_tool_result(self, tool_use_id: str, limit: int = 50 * 1024**2) -> str | None:
        """Text of a persisted tool output, or None when the upload does not have it."""
        opener = self.tool_results.get(tool_use_id)
        if opener is None:
            return None
        with opener() as fh:
            data = fh.read(limit)
        # NUL is text no PostgreSQL column holds; U+FFFD marks it as the loader does elsewhere
        return data.decode("utf-8", errors="replace").replace("\x00", "\ufffd")

    def close(self) -> None:
        for closer in self._closers:
            closer()
        self._closers.clear()

    def __enter__(self) -> Upload:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sniff(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(262)


def open_upload(path: str | os.PathLike[str], name: str | None = None) -> Upload:
    """Detect the kind of upload at ``path`` and index its members.

    Raises ``TranscriptError`` when the file cannot be read at all (missing, empty archive, an
    archive without any ``.jsonl``, an archive past the member or expansion bounds).
    """
    path = os.fspath(path)
    display = name or os.path.basename(path)
    if not os.path.exists(path):
        raise TranscriptError(f"{display}: file not found")
    if os.path.isdir(path):
        return _open_directory(path, display)
    head = _sniff(path)
    budget = expansion_budget(os.path.getsize(path))
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return _open_zip(path, display, budget)
    if head.startswith(b"\x1f\x8b"):
        if _is_tar_gz(path):
            return _open_tar(path, display, budget)
        return Upload(
            name=display,
            main=TranscriptFile(
                name=_strip_suffixes(display) + ".jsonl",
                opener=lambda: open_gzip(path, budget, MAX_EXPANSION),
            ),
        )
    if head.startswith(ZSTD_MAGIC):
        return Upload(
            name=display,
            main=TranscriptFile(
                name=_strip_suffixes(display) + ".jsonl",
                opener=lambda: open_zstd(path, budget, MAX_EXPANSION),
            ),
        )
    if len(head) >= 262 and head[257:262] == b"ustar":
        return _open_tar(path, display, budget)
    return Upload(name=display, main=TranscriptFile(name=display, opener=lambda: open(path, "rb")))


def expansion_budget(compressed_size: int) -> int:
    """How many bytes a compressed upload of ``compressed_size`` bytes may expand to."""
    return max(MIN_EXPANSION_BYTES, MAX_EXPANSION * compressed_size)


def _strip_suffixes(name: str) -> str:
    for suffix in (".jsonl.gz", ".jsonl.zst", ".gz", ".zst", ".jsonl"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _is_tar_gz(path: str) -> bool:
    import gzip

    try:
        with gzip.open(path, "rb") as fh:
            block = fh.read(512)
    except _read_errors():
        return False
    return len(block) >= 262 and block[257:262] == b"ustar"


@dataclass
class _Member:
    path: str
    size: int
    opener: Opener


def _classify(
    upload_name: str, members: list[_Member], closers: list[Callable[[], None]]
) -> Upload:
    """Find the session file, its subagents and tool-results among archive members."""
    problems: list[Problem] = []
    jsonl = [m for m in members if m.path.endswith(".jsonl")]
    subagents: list[TranscriptFile] = []
    tool_results: dict[str, Opener] = {}
    candidates: list[_Member] = []
    for member in members:
        parts = member.path.split("/")
        if member.size > MAX_MEMBER_BYTES:
            problems.append(
                Problem(
                    0, "member_too_large", f"{member.path}: skipped, larger than 4 GiB", upload_name
                )
            )
            continue
        if "tool-results" in parts[:-1]:
            stem = posixpath.splitext(parts[-1])[0]
            tool_results[stem] = member.opener
        elif member in jsonl and "subagents" in parts[:-1]:
            stem = posixpath.splitext(parts[-1])[0]
            agent_id = stem[len("agent-") :] if stem.startswith("agent-") else stem
            subagents.append(
                TranscriptFile(
                    name=member.path, opener=member.opener, role="subagent", agent_id=agent_id
                )
            )
        elif member in jsonl:
            candidates.append(member)
    if not candidates and not subagents:
        raise TranscriptError(f"{upload_name}: the archive holds no .jsonl transcript")
    main: TranscriptFile | None = None
    if candidates:
        # The session file sits at the shallowest level; ties go to the largest file.
        candidates.sort(key=lambda m: (m.path.count("/"), -m.size))
        chosen = candidates[0]
        main = TranscriptFile(name=chosen.path, opener=chosen.opener)
    siblings = [TranscriptFile(name=m.path, opener=m.opener) for m in candidates[1:]]
    subagents.sort(key=lambda f: f.name)
    return Upload(
        name=upload_name,
        main=main,
        subagents=subagents,
        siblings=siblings,
        tool_results=tool_results,
        problems=problems,
        _closers=closers,
    )


def _safe_member_path(name: str) -> str | None:
    """Member path with absolute prefixes and ``..`` parts removed (nothing is extracted, but
    names are shown to users and matched against folder names)."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    return "/".join(parts) or None


def _too_expanded(display: str, budget: int) -> TranscriptError:
    return TranscriptError(
        f"{display}: the archive expands to more than {budget // 1024**2} MiB "
        f"({MAX_EXPANSION}x its size); refused as a possible archive bomb"
    )


def _too_many_members(display: str) -> TranscriptError:
    return TranscriptError(
        f"{display}: the archive has more than {MAX_ARCHIVE_MEMBERS:,} members; a session "
        "folder has far fewer (refused unread)"
    )


def zip_entry_count(path: str) -> int | None:
    """The member count a zip's end record declares (None when it cannot be found), read
    before ``zipfile`` builds an object per member of a possibly huge central directory."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        tail_size = min(size, 65_536 + 22)
        fh.seek(size - tail_size)
        tail = fh.read(tail_size)
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < 22:
            return None
        (entries,) = struct.unpack("<H", tail[at + 10 : at + 12])
        if entries != 0xFFFF:
            return int(entries)
        locator = tail.rfind(b"PK\x06\x07", 0, at)  # zip64: the count is in another record
        if locator < 0 or at - locator < 20:
            return None
        (offset,) = struct.unpack("<Q", tail[locator + 8 : locator + 16])
        if offset >= size:
            return None
        fh.seek(offset)
        record = fh.read(56)
    if len(record) < 40 or record[:4] != b"PK\x06\x06":
        return None
    (entries,) = struct.unpack("<Q", record[32:40])
    return int(entries)


def _open_zip(path: str, display: str, budget: int) -> Upload:
    import zipfile

    count = zip_entry_count(path)
    if count is not None and count > MAX_ARCHIVE_MEMBERS:
        raise _too_many_members(display)
    # a corrupt central directory raises more than BadZipFile (found by the property tests:
    # NotImplementedError "zip file version 23.5" from one flipped byte)
    unreadable: tuple[type[Exception], ...] = (*_read_errors(), ValueError, struct.error)
    try:
        archive = zipfile.ZipFile(path)
    except unreadable as exc:
        raise TranscriptError(f"{display}: not a readable zip archive ({exc})") from exc
    infos = archive.infolist()
    if len(infos) > MAX_ARCHIVE_MEMBERS:
        archive.close()
        raise _too_many_members(display)
    # zipfile never returns more than a member's declared size, so the sizes bound the expansion
    if sum(info.file_size for info in infos if not info.is_dir()) > budget:
        archive.close()
        raise _too_expanded(display, budget)
    members: list[_Member] = []
    for info in infos:
        if info.is_dir():
            continue
        safe = _safe_member_path(info.filename)
        if safe is None:
            continue

        def opener(info: zipfile.ZipInfo = info) -> IO[bytes]:
            return archive.open(info)

        members.append(_Member(safe, info.file_size, opener))
    try:
        return _classify(display, members, [archive.close])
    except TranscriptError:
        archive.close()
        raise


def _open_tar(path: str, display: str, budget: int) -> Upload:
    import tarfile

    infos: list[tarfile.TarInfo] = []
    declared = 0
    try:
        archive = tarfile.open(path, "r:*")  # noqa: SIM115 - closed by Upload.close()
    except _read_errors() as exc:
        raise TranscriptError(f"{display}: not a readable tar archive ({exc})") from exc
    try:
        # one header at a time (not getmembers()): the count and the declared sizes are
        # checked before the next header is looked for, which in a .tar.gz means decompressing
        # past this member's data
        while (info := archive.next()) is not None:
            if len(infos) >= MAX_ARCHIVE_MEMBERS:
                raise _too_many_members(display)
            infos.append(info)
            if info.isfile():
                declared += info.size
                if declared > budget:
                    raise _too_expanded(display, budget)
    except TranscriptError:
        archive.close()
        raise
    except _read_errors() as exc:
        archive.close()
        raise TranscriptError(f"{display}: not a readable tar archive ({exc})") from exc
    members: list[_Member] = []
    for info in infos:
        if not info.isfile():
            continue  # links, devices and folders are never followed
        safe = _safe_member_path(info.name)
        if safe is None:
            continue

        def opener(info: tarfile.TarInfo = info) -> IO[bytes]:
            fh = archive.extractfile(info)
            return fh if fh is not None else io.BytesIO(b"")

        members.append(_Member(safe, info.size, opener))
    try:
        return _classify(display, members, [archive.close])
    except TranscriptError:
        archive.close()
        raise


def _open_directory(path: str, display: str) -> Upload:
    members: list[_Member] = []
    for root, _dirs, files in os.walk(path):
        for fname in files:
            full = os.path.join(root, fname)
            rel = os.path.relpath(full, path).replace(os.sep, "/")

            def opener(full: str = full) -> IO[bytes]:
                return open(full, "rb")

            members.append(_Member(rel, os.path.getsize(full), opener))
    return _classify(display, members, [])


@dataclass
class LineCursor:
    """Where reading a file stopped: the bytes read and the number of the last line. Given to
    ``iter_lines``, it starts there (a file that grew is read from its first new byte) and is
    moved to where reading ended."""

    offset: int = 0
    number: int = 0


def iter_lines(
    tfile: TranscriptFile, problems: list[Problem], cursor: LineCursor | None = None
) -> Iterator[tuple[int, str, bool]]:
    """Yield ``(line_number, text, is_last)`` for each non-blank line of a transcript file.

    Undecodable bytes are replaced (and reported once per line); over-long lines are skipped
    without ever being held whole (at most ``MAX_LINE_BYTES`` of one is in memory). ``is_last``
    marks the final line, so callers can tell a truncated write from bad JSON. With ``cursor``,
    reading starts at its offset and line number (the file must be seekable) and the cursor
    ends where reading did.
    """
    try:
        fh = tfile.opener()
    except _read_errors() as exc:
        problems.append(Problem(0, "unreadable", f"cannot open: {exc}", tfile.name, "error"))
        return
    with fh:
        pending: tuple[int, bytes] | None = None
        pending_number, pending_raw = 0, b""  # (``pending`` apart, while it is not None)
        number = 0
        if cursor is not None:
            fh.seek(cursor.offset)
            number = cursor.number
        try:
            while raw := fh.readline(MAX_LINE_BYTES + 1):
                number += 1
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    skipped = len(raw) + _skip_rest_of_line(fh)
                    problems.append(
                        Problem(
                            number,
                            "line_too_long",
                            f"line of {skipped:,}+ bytes skipped (the limit is "
                            f"{MAX_LINE_BYTES // 1024**2} MiB)",
                            tfile.name,
                        )
                    )
                    continue
                if raw.isspace():  # blank (what ``strip`` would empty, without the copy)
                    continue
                if pending is not None:
                    # (``_decode`` inline where the line is UTF-8: this runs for every line)
                    try:
                        text = pending_raw.decode("utf-8")
                    except UnicodeDecodeError:
                        yield _decode(pending, tfile, problems, is_last=False)
                    else:
                        yield pending_number, text, False
                        del text  # (held no longer than the caller holds it)
                    # (``dropped_problems`` inline: this runs for every line)
                    if getattr(problems, "dropped", 0) > MAX_DROPPED_PROBLEMS:
                        _too_many_problems(problems, number, tfile.name)
                        pending = None
                        break
                pending = pending_number, pending_raw = (number, raw)
        except ExpansionLimitExceeded as exc:
            problems.append(
                Problem(number, "expansion_limit", f"reading stopped: {exc}", tfile.name, "error")
            )
        except _read_errors() as exc:
            problems.append(
                Problem(
                    number,
                    "truncated_stream",
                    f"the file ends early or is corrupt after line {number} ({exc})",
                    tfile.name,
                    "error",
                )
            )
        if pending is not None:
            yield _decode(pending, tfile, problems, is_last=True)
        if cursor is not None:
            cursor.offset, cursor.number = fh.tell(), number


#: The longest line ``read_head`` keeps, bytes (a longer one is left out).
HEAD_LINE_BYTES = 1024**2


def read_head(tfile: TranscriptFile, count: int) -> list[str]:
    """The first ``count`` non-blank lines of a transcript file, quietly: for recognising its
    format before it is read. A line past ``HEAD_LINE_BYTES`` is left out; a file that cannot
    be read gives the lines read so far (reading it for real reports why)."""
    lines: list[str] = []
    try:
        with tfile.opener() as fh:
            while len(lines) < count and (raw := fh.readline(HEAD_LINE_BYTES + 1)):
                if len(raw) > HEAD_LINE_BYTES and not raw.endswith(b"\n"):
                    _skip_rest_of_line(fh)
                elif raw.strip():
                    lines.append(raw.decode("utf-8", errors="replace"))
    except _read_errors():
        pass
    return lines


def _too_many_problems(problems: list[Problem], number: int, name: str) -> None:
    problem = Problem(
        number,
        "too_many_problems",
        f"reading stopped at line {number:,}: more than {MAX_DROPPED_PROBLEMS:,} lines past the "
        f"first {MAX_PROBLEMS:,} problems could not be used",
        name,
        "error",
    )
    if isinstance(problems, ProblemList):
        problems.append_final(problem)
    else:
        problems.append(problem)


def _skip_rest_of_line(fh: IO[bytes]) -> int:
    """Read past the rest of the current line a chunk at a time; the bytes skipped."""
    skipped = 0
    while chunk := fh.readline(_SKIP_CHUNK):
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            break
    return skipped


def _read_errors() -> tuple[type[Exception], ...]:
    """What reading a member can raise (evaluated only when something was raised)."""
    import gzip
    import tarfile
    import zipfile
    import zlib

    import zstandard

    return (
        zstandard.ZstdError,
        OSError,
        EOFError,
        zipfile.BadZipFile,
        tarfile.TarError,
        gzip.BadGzipFile,
        zlib.error,
        # zipfile: an unsupported compression method, an encrypted member
        NotImplementedError,
        RuntimeError,
    )


def _decode(
    item: tuple[int, bytes], tfile: TranscriptFile, problems: list[Problem], *, is_last: bool
) -> tuple[int, str, bool]:
    number, raw = item
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(
            Problem(
                number,
                "invalid_utf8",
                f"bytes that are not UTF-8 at offset {exc.start}; replaced with U+FFFD",
                tfile.name,
            )
        )
        text = raw.decode("utf-8", errors="replace")
    return number, text, is_last
