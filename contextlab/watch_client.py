"""``contextlab watch``: follow Claude Code's session files and Codex's rollouts as they grow and
send the new bytes.

Runs beside the agent, like ``contextlab upload`` (no Django). Every ``--interval`` seconds it
looks at the ``.jsonl`` session files under the folders it watches (default Claude Code's
projects folders and Codex's sessions folder, ``~/.codex/sessions``, whichever exist); the
server tells the agent from each file's content, never from where it lies. A file it has not seen becomes a session (its whole lines, posted to
``/api/sessions``); afterwards only the bytes appended since are sent, to
``/api/sessions/{id}/append?offset=N``, where N is what the server holds (a 409 answer tells it,
and the next round sends from there). What was sent is kept in a small state file, so a
restarted watch goes on where it stopped. A file rewritten (shorter, or its first bytes
changed) is a new upload.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from contextlab import upload_client
from contextlab.upload_client import EXIT_OK, EXIT_USAGE, UploadError

#: Bytes of a file's start remembered (hashed) to notice the file was rewritten.
HEAD_BYTES = 4096
#: Bytes sent per append (the server takes up to LIVE_APPEND_MAX_BYTES, 16 MB by default).
APPEND_CHUNK = 4 * 1024**2
#: Folders of a session directory that hold no session of their own.
NOT_SESSIONS = ("subagents", "tool-results")


@dataclass
class Sent:
    """What the server holds of one file."""

    session: int
    offset: int
    inode: int
    head: str

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "offset": self.offset,
            "inode": self.inode,
            "head": self.head,
        }


def state_file() -> Path:
    folder = Path(
        os.environ.get("CONTEXTLAB_CACHE_DIR")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "contextlab"
    )
    return folder / "watch.json"


def load_state(path: Path) -> dict[str, Sent]:
    """The state file's entries; an unreadable file or entry is forgotten (sent again)."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    out: dict[str, Sent] = {}
    if isinstance(raw, dict):
        for key, value in raw.items():
            with contextlib.suppress(TypeError, KeyError, ValueError):
                out[str(key)] = Sent(
                    session=int(value["session"]),
                    offset=int(value["offset"]),
                    inode=int(value["inode"]),
                    head=str(value["head"]),
                )
    return out


def save_state(path: Path, state: dict[str, Sent]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: v.to_json() for k, v in state.items()}, indent=1))
    os.replace(tmp, path)


def session_files(roots: Sequence[Path]) -> Iterator[Path]:
    """The session transcripts under ``roots``: ``.jsonl`` files, not links, not a session's
    subagent or tool-result files."""
    for root in roots:
        if root.is_file() and root.suffix == ".jsonl" and not root.is_symlink():
            yield root
            continue
        for path in sorted(root.rglob("*.jsonl")):
            relative = path.relative_to(root).parts
            if any(part in NOT_SESSIONS for part in relative) or path.is_symlink():
                continue
            if path.is_file():
                yield path


def _head(path: Path, upto: int) -> str:
    with path.open("rb") as fh:
        return hashlib.sha256(fh.read(min(upto, HEAD_BYTES))).hexdigest()


class Watcher:
    """One watch: its server, its state, and a pass over the files (``scan``)."""

    def __init__(
        self,
        roots: Sequence[Path],
        *,
        url: str,
        token: str,
        state_path: Path,
        workspace: str | None = None,
        recent: float = 24 * 3600,
        client: httpx.Client | None = None,
        out: Any = None,
    ) -> None:
        if not url:
            raise UploadError("no server: set CONTEXTLAB_URL or pass --url", EXIT_USAGE)
        if not token:
            raise UploadError("no API token: set CONTEXTLAB_TOKEN or pass --token", EXIT_USAGE)
        self.roots = [Path(r).expanduser() for r in roots]
        self.base = url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"}
        self.workspace = workspace
        self.state_path = state_path
        self.state = load_state(state_path)
        self.started = time.time()
        self.recent = recent
        self.client = client or httpx.Client(timeout=120.0)
        self.out = out or sys.stdout

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def scan(self) -> int:
        """One pass: send what every file gained. Returns the number of files that changed."""
        changed = 0
        for path in session_files(self.roots):
            try:
                if self._follow(path):
                    changed += 1
            except UploadError as exc:
                self.say(f"contextlab watch: {path.name}: {exc}")
            except (OSError, httpx.HTTPError) as exc:
                self.say(f"contextlab watch: {path.name}: will try again ({exc})")
        return changed

    def _follow(self, path: Path) -> bool:
        key = str(path.resolve())
        info = path.stat()
        sent = self.state.get(key)
        if sent is not None and (
            sent.inode != info.st_ino
            or info.st_size < sent.offset
            or _head(path, sent.offset) != sent.head
        ):
            self.say(f"{path.name}: rewritten; sending it as a new upload")
            sent = None
            del self.state[key]
        if sent is None:
            if info.st_mtime < self.started - self.recent:
                return False  # an old session, untouched since before the watch: not live
            return self._create(path, key, info.st_ino)
        if info.st_size == sent.offset:
            return False
        return self._append(path, key, sent, info.st_size)

    def _create(self, path: Path, key: str, inode: int) -> bool:
        with path.open("rb") as fh:
            data = fh.read()  # the file as it is now; later bytes go by append
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            return False  # not one whole line yet
        response = self.client.post(
            f"{self.base}/api/sessions",
            headers=self.headers,
            files={"file": (path.name, data[:cut], "application/octet-stream")},
            data={"workspace_id": self.workspace} if self.workspace else {},
        )
        body = upload_client._json(response)
        if response.status_code not in (200, 201):
            raise UploadError(
                f"HTTP {response.status_code}: {upload_client._reason(body) or 'refused'}",
                upload_client.EXIT_REFUSED,
            )
        session = int(body["id"])
        self.state[key] = Sent(session, cut, inode, _head(path, cut))
        save_state(self.state_path, self.state)
        self.say(f"{path.name}: session {session}: {self.base}/sessions/{session}/")
        return True

    def _append(self, path: Path, key: str, sent: Sent, size: int) -> bool:
        with path.open("rb") as fh:
            while sent.offset < size:
                fh.seek(sent.offset)
                piece = fh.read(min(APPEND_CHUNK, size - sent.offset))
                response = self.client.post(
                    f"{self.base}/api/sessions/{sent.session}/append",
                    params={"offset": sent.offset},
                    headers={**self.headers, "Content-Type": "application/octet-stream"},
                    content=piece,
                )
                body = upload_client._json(response)
                if response.status_code == 409 and isinstance(body.get("offset"), int):
                    server = int(body["offset"])
                    if server > size:  # the server holds more than the file: not this file
                        del self.state[key]
                        save_state(self.state_path, self.state)
                        return False
                    sent.offset = server  # send from where the server stands
                    continue
                if response.status_code == 404:
                    del self.state[key]  # the session was deleted: the next pass uploads anew
                    save_state(self.state_path, self.state)
                    return False
                if response.status_code != 200:
                    raise UploadError(
                        f"HTTP {response.status_code}: {upload_client._reason(body)}",
                        upload_client.EXIT_REFUSED,
                    )
                sent.offset = int(body["offset"])
                sent.head = _head(path, sent.offset)
                save_state(self.state_path, self.state)
        return True


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="contextlab watch")
    parser.add_argument(
        "roots",
        nargs="*",
        type=Path,
        help="folders (default ~/.claude/projects and ~/.codex/sessions)",
    )
    parser.add_argument("--url", default=os.environ.get("CONTEXTLAB_URL", ""))
    parser.add_argument("--token", default=os.environ.get("CONTEXTLAB_TOKEN", ""))
    parser.add_argument("--workspace", default=os.environ.get("CONTEXTLAB_WORKSPACE") or None)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between looks")
    parser.add_argument(
        "--recent",
        type=float,
        default=24.0,
        help="hours: sessions untouched for longer are left alone until they change",
    )
    parser.add_argument("--state", type=Path, default=None, help="the state file")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    return parser


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    roots = args.roots or [
        r
        for r in (*upload_client.claude_project_roots(), *upload_client.codex_session_roots())
        if r.is_dir() and r.name != "archived_sessions"  # archived: no longer written
    ]
    try:
        if not roots:
            raise UploadError(
                "no folder to watch (no ~/.claude/projects, no ~/.codex/sessions)", EXIT_USAGE
            )
        watcher = Watcher(
            roots,
            url=args.url,
            token=args.token,
            workspace=args.workspace,
            state_path=args.state or state_file(),
            recent=args.recent * 3600,
        )
    except UploadError as exc:
        print(f"contextlab watch: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        while True:
            watcher.scan()
            if args.once:
                return EXIT_OK
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return EXIT_OK
