"""A frozen set of record uuids held in 16 bytes each (``Session.record_uuids``).

A session keeps the uuid of every record it read, so that a file continuing it can find the
record it hangs from; most are the uuids of progress, system and side records that no message
keeps. As a ``frozenset`` of strings each costs about 110 bytes (the string and its slot), some
60 MB in a 2 GB session, and one memo entry more each when the parse is pickled for the
replay. Here a canonical uuid (lower-case hex in 8-4-4-4-12 groups, as Claude Code writes
them) is kept as its 16 bytes in one sorted ``bytes`` and found by bisection; any other string
(another agent's ids, a hostile file's) is kept as it is.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Set

_CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_WIDTH = 16


def _packed(uuid: str) -> bytes:
    return bytes.fromhex(uuid.replace("-", ""))


def _unpacked(row: bytes) -> str:
    digits = row.hex()
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


class UuidSet(Set[str]):
    """An immutable set of strings, compact for canonical uuids (see the module's doc)."""

    __slots__ = ("_others", "_rows")

    def __init__(self, uuids: Iterable[str] = ()) -> None:
        canonical: list[str] = []
        others: set[str] = set()
        for uuid in uuids:
            if _CANONICAL.fullmatch(uuid):
                canonical.append(uuid)
            else:
                others.add(uuid)
        # canonical strings sort as their bytes do: dashes at the same places, and the hex
        # digits in the order of their values
        canonical.sort()
        rows = bytearray()
        last = None
        for uuid in canonical:
            if uuid != last:
                rows += _packed(uuid)
                last = uuid
        self._rows = bytes(rows)
        self._others = frozenset(others)

    def with_added(self, uuids: Iterable[str]) -> UuidSet:
        """This set and ``uuids``, as a new set (this one unchanged): the few uuids an append
        adds are merged into the sorted rows, not every uuid of the session packed and sorted
        again (a growing session's read, ``growing.GrowingParse``)."""
        added = UuidSet(uuids)
        merged = UuidSet.__new__(UuidSet)
        merged._others = self._others | added._others
        rows, new = self._rows, added._rows
        if not new:
            merged._rows = rows
            return merged
        pieces: list[bytes] = []
        start = 0  # the next of ``rows``' rows not yet copied
        count = len(rows) // _WIDTH
        for at in range(0, len(new), _WIDTH):
            needle = new[at : at + _WIDTH]
            index = bisect_left(range(count), needle, lo=start, key=self._row)
            pieces.append(rows[start * _WIDTH : index * _WIDTH])
            start = index
            if index < count and self._row(index) == needle:
                continue  # known already
            pieces.append(needle)
        pieces.append(rows[start * _WIDTH :])
        merged._rows = b"".join(pieces)
        return merged

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, str):
            return False
        if not _CANONICAL.fullmatch(item):
            return item in self._others
        needle = _packed(item)
        rows = self._rows
        at = bisect_left(range(len(rows) // _WIDTH), needle, key=self._row)
        return rows[at * _WIDTH : (at + 1) * _WIDTH] == needle

    def _row(self, index: int) -> bytes:
        return self._rows[index * _WIDTH : (index + 1) * _WIDTH]

    def __iter__(self) -> Iterator[str]:
        rows = self._rows
        for start in range(0, len(rows), _WIDTH):
            yield _unpacked(rows[start : start + _WIDTH])
        yield from self._others

    def __len__(self) -> int:
        return len(self._rows) // _WIDTH + len(self._others)

    def __repr__(self) -> str:
        return f"UuidSet({len(self)} uuids)"
