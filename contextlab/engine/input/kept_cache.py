"""What a long-lived process keeps of a growing session between its appends, bounded by the
size of the sessions it is kept for.

A warm worker keeps what it made at a live session's last update so the next one does not
walk the whole session again: the replay state object (``replay.kept_state.KEPT_STATES``), its
dump's references (``replay.checkpoints._REFS``), the messages it counted, listed and linked
(``measures.tokenized._COUNTED``, ``_LISTED``, ``input.session._LINKED``) and the thinking it
sized (``replay.live._SIZED``). Each entry holds message objects of its session, so the
session stays in memory as long as any of them keeps it: a 2 GB session's (several GB of
objects), kept after its update, would sit beside the next session's read and replay. Like
the kept findings (``jobs.replay.KEPT_FINDINGS_MAX_BYTES``) and the reads ``session_cache``
keeps, these caches keep nothing of a session whose files are larger than
``KEPT_MAX_BYTES``, hold the objects of at most that many bytes of sessions in all (the
oldest entry let go first), and let everything go before a larger session is read
(``release_all``, called by ``session_cache``): such a session's worker holds only that one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import count
from typing import Any, TypeVar

K = TypeVar("K")
V = TypeVar("V")

#: file bytes of the sessions whose objects these caches hold at most, together; a session of
#: more is not kept at all
KEPT_MAX_BYTES = 256 * 1024 * 1024

#: the caches' changes, across all of them (a threaded web process reads sessions at once)
LOCK = threading.RLock()
_ORDER = count()


class KeptCache(OrderedDict[K, V]):
    """An ``OrderedDict`` of at most ``limit`` entries, each kept (``keep``) with the bytes of
    the session it holds objects of and that session's lineage (its versions share their
    first message object: counted once). Entries may be read, popped and cleared as in any
    ``OrderedDict``; only ``keep`` adds them, under the bound."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        #: per key: the session's bytes, its lineage, and when the entry was kept
        self.held: dict[Any, tuple[int, int, int]] = {}
        with LOCK:
            _CACHES.append(self)

    def keep(self, key: K, value: V, *, size: int, lineage: int) -> None:
        """Keep ``value`` under ``key`` (the newest), unless its session's ``size`` bytes are
        more than ``KEPT_MAX_BYTES`` (then none is kept under ``key``); the oldest entries
        of all caches go until the sessions held fit."""
        with LOCK:
            if size > KEPT_MAX_BYTES:
                self.pop(key, None)
                self.held.pop(key, None)
                return
            self[key] = value
            self.move_to_end(key)
            self.held[key] = (size, lineage, next(_ORDER))
            while len(self) > self.limit:
                self.held.pop(self.popitem(last=False)[0], None)
            _fit()


_CACHES: list[KeptCache[Any, Any]] = []


def held_bytes() -> int:
    """The file bytes of the sessions the caches hold objects of (each lineage counted once,
    at its largest version)."""
    with LOCK:
        return sum(_lineages().values())


def _lineages() -> dict[int, int]:
    sizes: dict[int, int] = {}
    for cache in _CACHES:
        for key in [k for k in cache.held if k not in cache]:  # popped or cleared as a dict
            del cache.held[key]
        for size, lineage, _ in cache.held.values():
            sizes[lineage] = max(size, sizes.get(lineage, 0))
    return sizes


def _fit() -> None:
    while held_bytes() > KEPT_MAX_BYTES:
        cache, key = min(
            ((c, k) for c in _CACHES for k in c.held), key=lambda entry: entry[0].held[entry[1]][2]
        )
        cache.pop(key, None)
        del cache.held[key]


def release_all() -> None:
    """Let go of everything the caches keep (a session too large to keep beside them is about
    to be read)."""
    with LOCK:
        for cache in _CACHES:
            cache.clear()
            cache.held.clear()


def fits(size: int) -> bool:
    """Whether a session of ``size`` file bytes may be kept beside others (else reading it
    lets everything kept go first: ``release_all``)."""
    return size <= KEPT_MAX_BYTES


def lineage_of(messages: list[Any]) -> int:
    """A session's lineage as a thread's messages show it: its first message's identity (a
    warm read of the grown file keeps the earlier version's messages)."""
    return id(messages[0]) if messages else 0


#: the file bytes of the session being read in this context (``reading``): what a read keeps
#: before its session exists (``session._LINKED``); 0 outside a read of ``session_cache``
_READING: ContextVar[int] = ContextVar("kept_cache_reading", default=0)


@contextmanager
def reading(size: int) -> Iterator[None]:
    """Read a session of ``size`` file bytes: everything kept goes first when it is too large
    to keep beside it (``release_all``), and what its read keeps is bounded by it."""
    if not fits(size):
        release_all()
    token = _READING.set(size)
    try:
        yield
    finally:
        _READING.reset(token)


def reading_bytes() -> int:
    return _READING.get()


def session_bytes(session: Any) -> int:
    """The file bytes of ``session`` (``Session.source_bytes``), or, while it is being read
    and prepared before it knows them, of the read's (``reading``)."""
    return int(getattr(session, "source_bytes", 0)) or reading_bytes()


def session_lineage(session: Any) -> int:
    """``lineage_of`` the session's first thread."""
    return lineage_of(session.threads[0].messages) if session.threads else id(session)
