"""Compressed session files read as streams that stop past an expansion budget (a
decompression bomb): gzip, and zstd as Codex keeps cold rollouts (``.jsonl.zst``)."""

from __future__ import annotations

import io
import os
from typing import IO, Any, cast

#: The first bytes of a zstd frame (RFC 8878).
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: A skippable zstd frame's magic numbers (RFC 8878 §3.1.2): 0x184D2A50 to 0x184D2A5F.
_ZSTD_SKIPPABLE = range(0x184D2A50, 0x184D2A60)


class ExpansionLimitExceeded(OSError):
    """A compressed stream expanded past its budget (a decompression bomb)."""


class _Filter(io.RawIOBase):
    """A readable stream over ``inner`` whose ``read`` a subclass checks; ``readinto`` and
    ``close`` go through it."""

    def __init__(self, inner: IO[bytes]) -> None:
        super().__init__()
        self.inner = inner

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self.inner.read(size)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


class _ExpansionLimited(_Filter):
    """A decompressed stream that stops with ``ExpansionLimitExceeded`` past ``budget`` bytes."""

    def __init__(self, inner: IO[bytes], budget: int, ratio: int) -> None:
        super().__init__(inner)
        self.budget = budget
        self.ratio = ratio
        self.produced = 0

    def _count(self, data: bytes) -> bytes:
        self.produced += len(data)
        if self.produced > self.budget:
            raise ExpansionLimitExceeded(
                f"it expands to more than {self.budget // 1024**2} MiB "
                f"({self.ratio}x its size); the rest was not read"
            )
        return data

    def read(self, size: int = -1) -> bytes:
        return self._count(self.inner.read(size))

    def readline(self, size: int | None = -1) -> bytes:
        return self._count(self.inner.readline(-1 if size is None else size))


def open_gzip(path: str, budget: int, ratio: int) -> IO[bytes]:
    import gzip

    inner = cast(IO[bytes], gzip.GzipFile(path, "rb"))  # closed by the reader
    return cast(IO[bytes], _ExpansionLimited(inner, budget, ratio))


def open_zstd(path: str, budget: int, ratio: int) -> IO[bytes]:
    """A ``.jsonl.zst`` read streamed (every frame, as ``zstd -d`` does), within ``budget``.
    zstd's reader has no ``readline``: a buffered reader over the bounded stream gives it."""
    import zstandard

    raw = open(path, "rb")  # noqa: SIM115 - closed with the reader (closefd)
    inner = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=True)
    checked = _ZstdEndChecked(cast(IO[bytes], inner), path)
    limited = _ExpansionLimited(cast(IO[bytes], checked), budget, ratio)
    return cast(IO[bytes], io.BufferedReader(limited, buffer_size=1024**2))


class _ZstdEndChecked(_Filter):
    """zstd's stream reader ends quietly where a cut file ends, mid-frame. At that end this
    raises ``EOFError`` (as gzip does) unless the file's frames are whole, so a cut upload is
    reported (``truncated_stream``), not read as a shorter session."""

    def __init__(self, inner: IO[bytes], path: str) -> None:
        super().__init__(inner)
        self.path = path

    def read(self, size: int = -1) -> bytes:
        data = self.inner.read(size)
        if not data and size != 0 and not _zstd_frames_whole(self.path):
            raise EOFError("the compressed file ends before its last zstd frame does (cut short?)")
        return data


def _zstd_frames_whole(path: str) -> bool:
    """Whether the zstd file at ``path`` is whole frames to its last byte: each frame's blocks
    are walked by their 3-byte headers (RFC 8878 §3.1.1.2), their contents skipped unread."""
    import zstandard

    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        at = 0
        while at < size:
            fh.seek(at)
            head = fh.read(18)  # the magic and the largest frame header
            if len(head) < 8:
                return False
            magic = int.from_bytes(head[:4], "little")
            if magic in _ZSTD_SKIPPABLE:
                at += 8 + int.from_bytes(head[4:8], "little")
                continue
            try:
                header = zstandard.frame_header_size(head)
                checksum = zstandard.get_frame_parameters(head).has_checksum
            except zstandard.ZstdError:
                return False
            at += header
            while True:
                fh.seek(at)
                block = fh.read(3)
                if len(block) < 3:
                    return False
                value = int.from_bytes(block, "little")
                kind = (value >> 1) & 3
                if kind == 3:  # reserved: not a zstd block
                    return False
                at += 3 + (1 if kind == 1 else value >> 3)  # an RLE block holds one byte
                if value & 1:  # the frame's last block
                    break
            at += 4 if checksum else 0
        return at == size
