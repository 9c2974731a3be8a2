"""Hostile transcripts and archives, built byte by byte (no fixture files: every case says
what it attacks). ``session_text`` writes a valid two-request session whose first response
carries the hostile fragment, so a case shows whether one bad line costs the whole file."""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile
from dataclasses import dataclass

PROMPT = (
    '{{"parentUuid": {parent}, "isSidechain": false, "type": "user", "uuid": "{uuid}", '
    '"sessionId": {session_id}, "version": "2.1.38", "timestamp": "2026-02-10T21:1{n}:00.000Z", '
    '"message": {{"role": "user", "content": {content}}}}}'
)
RESPONSE = (
    '{{"parentUuid": "{parent}", "isSidechain": false, "type": "assistant", "uuid": "{uuid}", '
    '"sessionId": {session_id}, "version": "2.1.38", "timestamp": "2026-02-10T21:1{n}:05.000Z", '
    '"requestId": "req_{n}", "message": {{"model": "claude-opus-4-6", "id": "msg_{n}", '
    '"type": "message", "role": "assistant", "content": [{{"type": "text", "text": {text}}}], '
    '"usage": {usage}}}}}'
)
NORMAL_USAGE = (
    '{"input_tokens": 3, "cache_creation_input_tokens": 1200, "cache_read_input_tokens": 9000, '
    '"output_tokens": 40}'
)


def session_text(
    *,
    content: str = '"hello there"',
    text: str = '"hi back"',
    usage: str = NORMAL_USAGE,
    session_id: str = '"55604662-cf2a-4331-851a-ec234028f8ca"',
    extra_lines: tuple[str, ...] = (),
) -> str:
    """Two prompt/response pairs; the first pair carries the given JSON fragments verbatim."""
    lines = [
        PROMPT.format(parent="null", uuid="u-1", session_id=session_id, n=1, content=content),
        RESPONSE.format(
            parent="u-1", uuid="a-1", session_id=session_id, n=1, text=text, usage=usage
        ),
        *extra_lines,
        PROMPT.format(parent='"a-1"', uuid="u-2", session_id=session_id, n=2, content='"more"'),
        RESPONSE.format(
            parent="u-2",
            uuid="a-2",
            session_id=session_id,
            n=2,
            text='"done"',
            usage=NORMAL_USAGE,
        ),
    ]
    return "\n".join(lines) + "\n"


def session_bytes(**kwargs: str) -> bytes:
    return session_text(**kwargs).encode()


def zip_of(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


@dataclass
class TarMember:
    name: str
    data: bytes = b""
    kind: bytes = tarfile.REGTYPE
    link: str = ""


def tar_gz_of(members: list[TarMember]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for member in members:
            info = tarfile.TarInfo(member.name)
            info.type = member.kind
            info.linkname = member.link
            info.size = len(member.data) if member.kind == tarfile.REGTYPE else 0
            tf.addfile(info, io.BytesIO(member.data) if info.size else None)
    return buf.getvalue()


def gzip_of_zeros(size: int) -> bytes:
    """``size`` zero bytes (one endless line) in a gzip, written in pieces."""
    buf = io.BytesIO()
    piece = b"\0" * (1 << 20)
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9) as gz:
        for _ in range(size // len(piece)):
            gz.write(piece)
    return buf.getvalue()


def gzip_of_lines(line: bytes, count: int) -> bytes:
    buf = io.BytesIO()
    block = line * 65_536
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9) as gz:
        for _ in range(count // 65_536):
            gz.write(block)
        gz.write(line * (count % 65_536))
    return buf.getvalue()
