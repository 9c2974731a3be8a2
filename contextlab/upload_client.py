"""``contextlab upload`` and ``contextlab hook session-end``: send a session to a ContextLab server.

Runs on the developer's machine, beside Claude Code, so it needs nothing of Django: it packs a
session (the ``.jsonl`` file and, when Claude Code wrote one, the folder of the same name with
its ``subagents/`` and ``tool-results/``) into one ``.tar.gz`` and posts it to
``$CONTEXTLAB_URL/api/sessions`` with the API token ``$CONTEXTLAB_TOKEN``. The server answers
201 for a new session, 200 for one it already has (an identical file is a no-op, a longer
version of the same session updates it).

Claude Code's ``SessionEnd`` hook calls ``contextlab hook session-end``: the hook's JSON on
stdin names the transcript. A hook must not hold up Claude Code's exit, so stdin is read with a
short timeout (Claude Code may leave it open) and the upload with a bounded one.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import select
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import httpx

EXIT_OK = 0
EXIT_REFUSED = 2  # the server answered and refused (bad token, bad file, too large)
EXIT_UNREACHABLE = 3  # no answer, or a server error: try again later
EXIT_USAGE = 64

#: Folders of a Claude Code session directory that belong to the session.
SESSION_PARTS = ("subagents", "tool-results")
#: Folders of a Codex home that hold rollouts.
CODEX_SESSION_FOLDERS = ("sessions", "archived_sessions")
#: Seconds to wait for the hook's JSON on stdin (Claude Code may never close it).
HOOK_STDIN_TIMEOUT = 2.0
#: Largest hook payload read, bytes (it is a few hundred).
HOOK_STDIN_MAX = 1024 * 1024
#: Sessions (packed) of this many bytes or more are sent resumably, in pieces (tus).
RESUMABLE_FROM = 8 * 1024**2
#: Bytes per piece of a resumable upload (the server takes up to UPLOAD_CHUNK_MAX_BYTES).
CHUNK_SIZE = 16 * 1024**2
#: Tries of one piece after a dropped connection, and seconds between them.
RESUME_RETRIES = 10
RESUME_DELAY = 1.0
#: Seconds to wait for a worker to store a resumable upload once every byte is sent.
STORE_WAIT = 3600.0


class UploadError(Exception):
    """The session could not be sent; ``exit_code`` says whether to retry."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Uploaded:
    session_id: int
    name: str
    created: bool
    #: a longer version of a session the server had: that session was updated
    grew: bool
    url: str


def session_members(path: Path) -> tuple[str, list[tuple[Path, str]]]:
    """The upload's name and its files as (file on disk, name in the archive).

    ``path`` is a session file (``<id>.jsonl``, its ``<id>/`` folder taken along when present),
    a session folder (``<id>/``, with ``<id>.jsonl`` beside it), or any folder of transcripts.
    Symbolic links are left out: a session folder never needs one, and following them could
    send files from elsewhere on the machine.
    """
    path = path.expanduser()
    if path.is_symlink():
        raise UploadError(f"{path}: is a symbolic link; give the file it points to", EXIT_USAGE)
    if path.is_file():
        folder = path.with_suffix("") if path.suffix == ".jsonl" else None
        members = [(path, path.name)]
        if folder is not None and folder.is_dir() and not folder.is_symlink():
            members += _folder_members(folder, folder.name, only=SESSION_PARTS)
        return path.name, members
    if path.is_dir():
        session_file = path.with_name(path.name + ".jsonl")
        if session_file.is_file() and any((path / part).is_dir() for part in SESSION_PARTS):
            members = [(session_file, session_file.name)]
            members += _folder_members(path, path.name, only=SESSION_PARTS)
            return session_file.name, members
        members = _folder_members(path, path.name, only=None)
        if not any(name.endswith(".jsonl") for _, name in members):
            raise UploadError(f"{path}: holds no .jsonl transcript", EXIT_USAGE)
        return path.name, members
    raise UploadError(f"{path}: no such file or folder", EXIT_USAGE)


def _folder_members(
    folder: Path, prefix: str, *, only: Sequence[str] | None
) -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        here = Path(root)
        relative = here.relative_to(folder)
        if only is not None and relative.parts and relative.parts[0] not in only:
            dirs[:] = []
            continue
        if only is not None and not relative.parts:
            dirs[:] = [d for d in dirs if d in only]
        dirs.sort()
        for name in sorted(files):
            file = here / name
            if file.is_symlink() or not file.is_file():
                continue
            out.append((file, "/".join((prefix, *relative.parts, name))))
    return out


@contextmanager
def packed(path: Path) -> Iterator[tuple[str, IO[bytes]]]:
    """The upload as (file name, open file): a single ``.jsonl`` (or ``.jsonl.gz`` /
    ``.jsonl.zst``: a Codex rollout kept compressed, an archived session) as it is, else a
    ``.tar.gz`` written to a temporary file (removed afterwards)."""
    name, members = session_members(path)
    if len(members) == 1 and members[0][0].name.endswith(SESSION_FILE_SUFFIXES):
        with members[0][0].open("rb") as fh:
            yield name, fh
        return
    with tempfile.TemporaryFile(suffix=".tar.gz") as tmp:
        with tarfile.open(fileobj=tmp, mode="w:gz") as archive:
            for file, member_name in members:
                archive.add(file, arcname=member_name, recursive=False)
        tmp.seek(0)
        stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
        yield f"{stem}.tar.gz", tmp


def upload(
    path: Path,
    *,
    url: str,
    token: str,
    workspace: str | None = None,
    timeout: float = 300.0,
    transport: httpx.BaseTransport | None = None,
    resumable_from: int | None = RESUMABLE_FROM,
    chunk_size: int = CHUNK_SIZE,
) -> Uploaded:
    """Send the session at ``path``; raises ``UploadError`` with the server's reason.

    A packed session of ``resumable_from`` bytes or more goes over tus (``/api/uploads``) in
    pieces of ``chunk_size``: a dropped connection resumes at the server's offset, and a
    command killed mid-upload resumes where it stopped when run again (the upload's address
    is kept in ``~/.cache/contextlab/uploads.json`` until it is done)."""
    if not url:
        raise UploadError("no server: set CONTEXTLAB_URL or pass --url", EXIT_USAGE)
    if not token:
        raise UploadError(
            "no API token: set CONTEXTLAB_TOKEN or pass --token (create one on the server's "
            "Account page)",
            EXIT_USAGE,
        )
    base = url.rstrip("/")
    data = {"workspace_id": workspace} if workspace else {}
    with packed(path) as (name, fh), httpx.Client(timeout=timeout, transport=transport) as client:
        size = os.fstat(fh.fileno()).st_size
        if resumable_from is not None and size >= resumable_from:
            return _upload_resumable(
                client, base, token, name, fh, workspace=workspace, chunk_size=chunk_size
            )
        try:
            response = client.post(
                f"{base}/api/sessions",
                headers={"Authorization": f"Bearer {token}"},
                files={"file": (name, fh, "application/octet-stream")},
                data=data,
            )
        except httpx.HTTPError as exc:
            raise UploadError(f"{base}: no answer ({exc})", EXIT_UNREACHABLE) from exc
    body = _json(response)
    if response.status_code in (200, 201):
        session_id = int(body["id"])
        return Uploaded(
            session_id=session_id,
            name=str(body.get("name") or name),
            created=response.status_code == 201,
            grew=bool(body.get("grew")),
            url=f"{base}/sessions/{session_id}/",
        )
    reason = _reason(body) or response.reason_phrase or "no reason given"
    code = EXIT_UNREACHABLE if response.status_code >= 500 else EXIT_REFUSED
    raise UploadError(f"{base}: HTTP {response.status_code}: {reason}", code)


def _upload_resumable(
    client: httpx.Client,
    base: str,
    token: str,
    name: str,
    fh: IO[bytes],
    *,
    workspace: str | None,
    chunk_size: int,
) -> Uploaded:
    from tusclient import client as tus
    from tusclient.exceptions import TusCommunicationError
    from tusclient.storage.filestorage import FileStorage

    headers = {"Authorization": f"Bearer {token}"}
    state = _resume_state_file()
    metadata = {"filename": name, **({"workspace_id": workspace} if workspace else {})}
    storage = FileStorage(str(state)) if state is not None else None  # type: ignore[no-untyped-call]
    try:
        for attempt in range(2):
            uploader = tus.TusClient(f"{base}/api/uploads", headers=headers).uploader(
                # tuspy closes the stream after reading its fingerprint; we still need it
                file_stream=_KeepOpen(fh),
                chunk_size=chunk_size,
                metadata=metadata,
                retries=RESUME_RETRIES,
                retry_delay=RESUME_DELAY,
                store_url=storage is not None,
                url_storage=storage,
            )
            try:
                uploader.upload()
                break
            except TusCommunicationError as exc:
                # an upload a run of this command left, which the server has since given up
                # (UPLOAD_RESUMABLE_STALE_AFTER): forget it and start a new one
                if attempt or storage is None or getattr(exc, "status_code", None) != 404:
                    raise
                storage.remove_item(
                    uploader.fingerprinter.get_fingerprint(cast(IO[bytes], _KeepOpen(fh)))
                )
    except TusCommunicationError as exc:
        status = getattr(exc, "status_code", None)
        body = _json_bytes(getattr(exc, "response_content", None))
        reason = _reason(body) or str(exc)
        code = EXIT_REFUSED if status is not None and 400 <= status < 500 else EXIT_UNREACHABLE
        raise UploadError(
            f"{base}: {'HTTP ' + str(status) + ': ' if status else ''}{reason}", code
        ) from exc
    if storage is not None:
        # done: a later run of the same file must start a new upload, not find this one
        with contextlib.suppress(Exception):
            storage.remove_item(
                uploader.fingerprinter.get_fingerprint(cast(IO[bytes], _KeepOpen(fh)))
            )
    return _wait_until_stored(client, base, str(uploader.url), headers, name)


class _KeepOpen(io.RawIOBase):
    """``stream`` for a reader that closes what it reads (tuspy): closing does nothing."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__()
        self.stream = stream

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1, /) -> bytes:
        return self.stream.read(size)

    def readinto(self, buffer: Any, /) -> int:
        data = self.stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0, /) -> int:
        return self.stream.seek(offset, whence)

    def tell(self) -> int:
        return self.stream.tell()

    def close(self) -> None:
        pass


def _wait_until_stored(
    client: httpx.Client, base: str, location: str, headers: dict[str, str], name: str
) -> Uploaded:
    """Every byte is on the server: a worker now stores it as a session. Waits for that."""
    deadline = time.monotonic() + STORE_WAIT
    failures = 0
    while time.monotonic() < deadline:
        try:
            response = client.get(location, headers=headers)
        except httpx.HTTPError as exc:
            # a kept-alive connection the server closed meanwhile: ask again on a new one
            failures += 1
            if failures > RESUME_RETRIES:
                raise UploadError(f"{base}: no answer ({exc})", EXIT_UNREACHABLE) from exc
            time.sleep(RESUME_DELAY)
            continue
        failures = 0
        body = _json(response)
        if response.status_code != 200:
            reason = _reason(body) or response.reason_phrase
            raise UploadError(f"{base}: HTTP {response.status_code}: {reason}", EXIT_REFUSED)
        if body.get("state") == "stored" and body.get("session"):
            session_id = int(body["session"]["id"])
            return Uploaded(
                session_id=session_id,
                name=str(body.get("name") or name),
                created=body.get("outcome") == "created",
                grew=body.get("outcome") == "grew",
                url=f"{base}/sessions/{session_id}/",
            )
        if body.get("state") == "rejected":
            raise UploadError(f"{base}: {body.get('error') or 'refused'}", EXIT_REFUSED)
        time.sleep(0.5)
    raise UploadError(
        f"{base}: sent, but not stored after {STORE_WAIT:.0f} s; see {location}", EXIT_UNREACHABLE
    )


def _resume_state_file() -> Path | None:
    """Where the addresses of unfinished uploads are kept between runs (None if unwritable)."""
    folder = Path(
        os.environ.get("CONTEXTLAB_CACHE_DIR")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "contextlab"
    )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder / "uploads.json"


def _json_bytes(content: object) -> dict[str, Any]:
    try:
        body = json.loads(content) if isinstance(content, bytes | str) else {}
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _reason(body: dict[str, Any]) -> str:
    detail = body.get("detail")
    if isinstance(detail, list):
        return "; ".join(
            f"{'.'.join(str(p) for p in item.get('loc', [])[1:])}: {item.get('msg')}"
            if isinstance(item, dict)
            else str(item)
            for item in detail
        )
    return str(detail or "")


def read_hook_input(stream: IO[str], timeout: float = HOOK_STDIN_TIMEOUT) -> dict[str, Any]:
    """The hook's JSON from ``stream``, waiting at most ``timeout`` seconds for it."""
    chunks: list[str] = []
    size = 0
    fileno = _fileno(stream)
    while size < HOOK_STDIN_MAX:
        if fileno is not None:
            ready, _, _ = select.select([fileno], [], [], timeout)
            if not ready:
                break
            chunk = os.read(fileno, 65536).decode("utf-8", errors="replace")
        else:
            chunk = stream.read(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        text = "".join(chunks)
        try:
            value = json.loads(text)
        except ValueError:
            continue  # not all of it yet
        if not isinstance(value, dict):
            raise UploadError("the hook's input is not a JSON object", EXIT_USAGE)
        return value
    text = "".join(chunks).strip()
    if not text:
        raise UploadError("no hook input on stdin (is this run by Claude Code's hook?)", EXIT_USAGE)
    raise UploadError("the hook's input on stdin is not valid JSON", EXIT_USAGE)


def _fileno(stream: IO[str]) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def claude_project_roots() -> list[Path]:
    """Where Claude Code keeps its transcripts: ``$CLAUDE_CONFIG_DIR/projects`` when set, and
    ``~/.claude/projects``."""
    roots = [Path.home() / ".claude" / "projects"]
    if os.environ.get("CLAUDE_CONFIG_DIR"):
        roots.insert(0, Path(os.environ["CLAUDE_CONFIG_DIR"]).expanduser() / "projects")
    return [root.resolve() for root in roots]


def codex_session_roots() -> list[Path]:
    """Where Codex keeps its rollouts: ``$CODEX_HOME/sessions`` when set, and
    ``~/.codex/sessions`` (with ``archived_sessions/`` beside each)."""
    homes = [Path.home() / ".codex"]
    if os.environ.get("CODEX_HOME"):
        homes.insert(0, Path(os.environ["CODEX_HOME"]).expanduser())
    return [(home / folder).resolve() for home in homes for folder in CODEX_SESSION_FOLDERS]


def hook_transcript(payload: dict[str, Any]) -> Path:
    """The transcript a hook's input names, if it is one: a ``.jsonl`` file (not a link) in
    Claude Code's projects folder, or a Codex rollout (recognised by its content) in Codex's
    sessions folder (Codex's hooks give the same ``transcript_path``). The hook runs
    unattended, so it sends nothing else, whatever path its input holds."""
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        raise UploadError("the hook's input names no transcript_path", EXIT_USAGE)
    path = Path(transcript).expanduser()
    if path.suffix != ".jsonl" or path.is_symlink() or not path.is_file():
        raise UploadError(
            f"{path}: the hook sends only a session's .jsonl transcript file", EXIT_USAGE
        )
    roots = claude_project_roots()
    codex_roots = codex_session_roots()
    resolved = path.resolve()
    if any(resolved.is_relative_to(root) for root in codex_roots):
        if not is_codex_rollout(path):
            raise UploadError(f"{path}: not a Codex rollout (its first line)", EXIT_USAGE)
        return path
    if not any(resolved.is_relative_to(root) for root in roots):
        raise UploadError(
            f"{path}: the hook sends only transcripts under "
            + " or ".join(str(root) for root in [*roots, *codex_roots]),
            EXIT_USAGE,
        )
    return path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="contextlab")
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=os.environ.get("CONTEXTLAB_URL", ""))
    common.add_argument("--token", default=os.environ.get("CONTEXTLAB_TOKEN", ""))
    common.add_argument(
        "--workspace", default=os.environ.get("CONTEXTLAB_WORKSPACE") or None, help="workspace id"
    )
    common.add_argument("--timeout", type=float, default=300.0, help="seconds (default 300)")
    up = sub.add_parser(
        "upload", parents=[common], help="send a session file or folder to a ContextLab server"
    )
    up.add_argument(
        "path",
        type=Path,
        help="<id>.jsonl, its <id>/ folder, or a folder (~/.codex/sessions: each rollout a session)",
    )
    hook = sub.add_parser("hook", help="entry points for Claude Code's and Codex's hooks")
    hook_sub = hook.add_subparsers(dest="hook", required=True)
    hook_sub.add_parser(
        "session-end",
        parents=[common],
        help="upload the session named by the SessionEnd hook's JSON on stdin",
    )
    return parser


#: A session file as it is uploaded alone: plain, or compressed as Codex keeps rollouts.
SESSION_FILE_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst")


def is_codex_rollout(path: Path) -> bool:
    """Whether ``path`` (``.jsonl``, ``.jsonl.gz`` or ``.jsonl.zst``) is a Codex rollout, by its
    first line: a ``session_meta`` record, or an older rollout's header (``id`` and
    ``instructions``)."""
    # the engine's reader opens it as an upload is opened (plain, gzip or zstd), quietly
    from contextlab.engine import TranscriptError, open_upload, read_head

    try:
        with open_upload(path) as upload:
            head = read_head(upload.main, 1) if upload.main is not None else []
        first = json.loads(head[0] if head else "null")
    except (OSError, ValueError, TranscriptError):
        return False
    if not isinstance(first, dict):
        return False
    if first.get("type") == "session_meta":
        return isinstance(first.get("payload"), dict)
    return "type" not in first and isinstance(first.get("id"), str) and "instructions" in first


def codex_rollouts(path: Path) -> list[Path]:
    """The Codex rollouts in a folder (``~/.codex/sessions/`` or a day of it), recognised by
    their content: each is a session of its own. Empty for a file or a Claude Code folder."""
    if not path.is_dir() or path.is_symlink():
        return []
    found = [
        file
        for file, _ in _folder_members(path, path.name, only=None)
        if file.name.endswith(SESSION_FILE_SUFFIXES) and is_codex_rollout(file)
    ]
    return sorted(found)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "hook":
            payload = read_hook_input(sys.stdin)
            paths = [hook_transcript(payload)]
        else:
            paths = codex_rollouts(args.path.expanduser()) or [args.path]
        results = [
            upload(
                path,
                url=args.url,
                token=args.token,
                workspace=args.workspace,
                timeout=args.timeout,
            )
            for path in paths
        ]
    except UploadError as exc:
        print(f"contextlab: {exc}", file=sys.stderr)
        return exc.exit_code
    for result in results:
        _report(result)
    return EXIT_OK


def _report(result: Uploaded) -> None:
    if result.created:
        verb = "uploaded"
    elif result.grew:
        verb = "updated (the session grew; its runs replay again)"
    else:
        verb = "already there, unchanged"
    print(f"{result.name}: {verb}: {result.url}")
