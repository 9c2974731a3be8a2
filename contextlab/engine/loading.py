"""Open a transcript upload: ``.jsonl``, ``.jsonl.gz``, or a ``.zip`` / ``.tar.gz`` session folder.

Files are streamed line by line; nothing holds a whole file in memory, and archive members are
read straight from the archive (tool-results are opened only when someone asks for them).
"""

from __future__ import annotations

import io
import os
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, cast

from .transcript import Problem, TranscriptError

if TYPE_CHECKING:  # imported where used: a plain .jsonl needs none of them
    import tarfile
    import zipfile

#: Refuse archive members bigger than this when uncompressed (zip-bomb guard), bytes.
MAX_MEMBER_BYTES = 4 * 1024**3
#: Lines longer than this are reported and skipped rather than parsed, bytes.
MAX_LINE_BYTES = 256 * 1024**2

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
    #: tool_use_id -> opener of tool-results/<id>.txt|.json
    tool_results: dict[str, Opener] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    _closers: list[Callable[[], None]] = field(default_factory=list)

    def read_tool_result(self, tool_use_id: str, limit: int = 50 * 1024**2) -> str | None:
        """Text of a persisted tool output, or None when the upload does not have it."""
        opener = self.tool_results.get(tool_use_id)
        if opener is None:
            return None
        with opener() as fh:
            data = fh.read(limit)
        return data.decode("utf-8", errors="replace")

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
    archive without any ``.jsonl``).
    """
    path = os.fspath(path)
    display = name or os.path.basename(path)
    if not os.path.exists(path):
        raise TranscriptError(f"{display}: file not found")
    if os.path.isdir(path):
        return _open_directory(path, display)
    head = _sniff(path)
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return _open_zip(path, display)
    if head.startswith(b"\x1f\x8b"):
        if _is_tar_gz(path):
            return _open_tar(path, display)
        return Upload(
            name=display,
            main=TranscriptFile(
                name=_strip_suffixes(display) + ".jsonl",
                opener=lambda: _open_gzip(path),
            ),
        )
    if len(head) >= 262 and head[257:262] == b"ustar":
        return _open_tar(path, display)
    return Upload(name=display, main=TranscriptFile(name=display, opener=lambda: open(path, "rb")))


def _open_gzip(path: str) -> IO[bytes]:
    import gzip

    return cast(IO[bytes], gzip.GzipFile(path, "rb"))  # closed by the reader


def _strip_suffixes(name: str) -> str:
    for suffix in (".jsonl.gz", ".gz", ".jsonl"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _is_tar_gz(path: str) -> bool:
    import gzip

    try:
        with gzip.open(path, "rb") as fh:
            block = fh.read(512)
    except (OSError, EOFError):
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
        for extra in candidates[1:]:
            problems.append(
                Problem(
                    0,
                    "extra_transcript",
                    f"{extra.path}: a second session file in the archive was not read",
                    upload_name,
                    "info",
                )
            )
    subagents.sort(key=lambda f: f.name)
    return Upload(
        name=upload_name,
        main=main,
        subagents=subagents,
        tool_results=tool_results,
        problems=problems,
        _closers=closers,
    )


def _safe_member_path(name: str) -> str | None:
    """Member path with absolute prefixes and ``..`` parts removed (nothing is extracted, but
    names are shown to users and matched against folder names)."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    return "/".join(parts) or None


def _open_zip(path: str, display: str) -> Upload:
    import zipfile

    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise TranscriptError(f"{display}: not a readable zip archive ({exc})") from exc
    members: list[_Member] = []
    for info in archive.infolist():
        if info.is_dir():
            continue
        safe = _safe_member_path(info.filename)
        if safe is None:
            continue

        def opener(info: zipfile.ZipInfo = info) -> IO[bytes]:
            return archive.open(info)

        members.append(_Member(safe, info.file_size, opener))
    return _classify(display, members, [archive.close])


def _open_tar(path: str, display: str) -> Upload:
    import tarfile

    try:
        archive = tarfile.open(path, "r:*")  # noqa: SIM115 - closed by Upload.close()
        infos = archive.getmembers()
    except (tarfile.TarError, OSError, EOFError) as exc:
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
    return _classify(display, members, [archive.close])


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


def iter_lines(tfile: TranscriptFile, problems: list[Problem]) -> Iterator[tuple[int, str, bool]]:
    """Yield ``(line_number, text, is_last)`` for each non-blank line of a transcript file.

    Undecodable bytes are replaced (and reported once per line); over-long lines are skipped.
    ``is_last`` marks the final line, so callers can tell a truncated write from bad JSON.
    """
    try:
        fh = tfile.opener()
    except _read_errors() as exc:
        problems.append(Problem(0, "unreadable", f"cannot open: {exc}", tfile.name, "error"))
        return
    with fh:
        pending: tuple[int, bytes] | None = None
        number = 0
        try:
            for raw in fh:
                number += 1
                if len(raw) > MAX_LINE_BYTES:
                    problems.append(
                        Problem(
                            number, "line_too_long", "line longer than 256 MiB skipped", tfile.name
                        )
                    )
                    continue
                if not raw.strip():
                    continue
                if pending is not None:
                    yield _decode(pending, tfile, problems, is_last=False)
                pending = (number, raw)
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


def _read_errors() -> tuple[type[Exception], ...]:
    """What reading a member can raise (evaluated only when something was raised)."""
    import gzip
    import tarfile
    import zipfile

    return (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError, gzip.BadGzipFile)


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
