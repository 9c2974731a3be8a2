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

Each of them goes on only from a thread whose messages start with the very messages it kept,
each holding as many blocks (the dump's references: the very blocks). They keep one shared
``Prefix`` of a thread version (``prefix_of``), and that check is made once per read
(``checking``: ``leads`` remembers its verdict there; a worker's ``continue_live`` goes on with
its read's, ``hand_over``), the blocks' once when the references ask, not once by each cache
(six passes over a 64 MB session's 7,000 messages and 13,000 blocks a warm worker's update,
0.5-2.2 ms each).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import chain, count
from operator import attrgetter, is_
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
    scope = _CHECKING.get()
    if scope is not None:
        scope.verdicts.clear()
        scope.made.clear()
    _HANDED.set(None)


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
    _HANDED.set(None)  # the last read's session is let go before another is read
    token = _READING.set(size)
    try:
        with checking():
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


_BLOCKS = attrgetter("blocks")


class Prefix:
    """A thread's messages but its last (a grown session's next read may hold a longer copy
    of it) as they were when kept: the very objects, each one's number of blocks, and their
    blocks in order. Shared by the caches that went through the same thread version
    (``prefix_of``), never changed once made."""

    __slots__ = ("blocks", "messages", "sizes")

    def __init__(self, messages: list[Any], sizes: list[int], blocks: list[Any]) -> None:
        self.messages, self.sizes, self.blocks = messages, sizes, blocks

    def __len__(self) -> int:
        return len(self.messages)


def _made_from(messages: list[Any]) -> Prefix:
    blocks = list(map(_BLOCKS, messages))
    return Prefix(messages, list(map(len, blocks)), list(chain.from_iterable(blocks)))


class _Checking:
    """What one ``checking`` remembers: ``leads``' verdicts, by (prefix, messages, length),
    and the prefixes ``prefix_of`` made, by message list and length (each with the objects
    its key names, held so no id is reused meanwhile)."""

    __slots__ = ("blocks", "made", "verdicts")

    def __init__(self, blocks: bool = False) -> None:
        #: check the blocks with the messages (``checking(blocks=True)``)
        self.blocks = blocks
        #: per key: [messages and block counts the same, blocks the same (None: not checked)]
        self.verdicts: dict[tuple[int, int, int], tuple[Prefix, list[Any], list[bool | None]]] = {}
        self.made: dict[tuple[int, int], tuple[list[Any], Prefix]] = {}


#: this context's ``checking``; None outside one (each call checks, each prefix is made)
_CHECKING: ContextVar[_Checking | None] = ContextVar("kept_cache_checking", default=None)


def prefix_of(messages: list[Any], *, on: Prefix | None = None) -> Prefix:
    """``messages`` but the last as a ``Prefix``: within ``checking``, the one made there for
    this very list at this length (so the caches that keep one thread version keep one
    object, whose check ``leads`` makes once); else made, on from ``on`` when given (a prefix
    ``leads`` found at the start of ``messages``: its messages and blocks not listed again)."""
    n = max(len(messages) - 1, 0)
    key = (id(messages), n)
    scope = _CHECKING.get()
    made = scope.made.get(key) if scope is not None else None
    if made is not None and made[0] is messages:
        return made[1]
    if on is not None and len(on) == n:
        prefix = on
    elif on is not None and len(on) < n:
        added = _made_from(messages[len(on) : n])
        prefix = Prefix(
            on.messages + added.messages, on.sizes + added.sizes, on.blocks + added.blocks
        )
    else:
        prefix = _made_from(messages[:n])
    if scope is not None:
        scope.made[key] = (messages, prefix)
    return prefix


#: the passes ``leads`` made in this process over a thread's messages, and over their blocks
#: (tests count them)
CHECKS = [0, 0]


def leads(prefix: Prefix, messages: list[Any], *, blocks: bool = False) -> bool:
    """Whether ``messages`` starts with ``prefix``'s messages, the very objects, each holding
    as many blocks as then (``blocks``: the very blocks too). Within ``checking``, checked
    once for each prefix and message list: every cache kept from one thread version asks the
    same question of the grown thread."""
    scope = _CHECKING.get()
    key = (id(prefix), id(messages), len(messages))
    known = scope.verdicts.get(key) if scope is not None else None
    if known is None or known[0] is not prefix or known[1] is not messages:
        eager = blocks or (scope is not None and scope.blocks)
        known = (prefix, messages, _leads(prefix, messages, eager))
        if scope is not None:
            scope.verdicts[key] = known
    verdict = known[2]
    if not verdict[0]:
        return False
    if blocks:
        if verdict[1] is None:
            verdict[1] = _same_blocks(prefix, list(map(_BLOCKS, messages[: len(prefix)])))
        return bool(verdict[1])
    return True


def _leads(prefix: Prefix, messages: list[Any], blocks: bool) -> list[bool | None]:
    """[messages and block counts the same, blocks the same (None: not checked)]; the blocks
    in the same pass when ``blocks`` (a message list walked once costs most of its first
    walk: the objects are far apart in a large session's heap)."""
    CHECKS[0] += 1
    n = len(prefix.messages)
    if n > len(messages):
        return [False, False]
    head = messages[:n]
    if not all(map(is_, prefix.messages, head)):
        return [False, False]
    lists = list(map(_BLOCKS, head))
    # a list of small ints, compared at C speed (an array built from a map and compared
    # item by item was twice as long: about 0.15 ms of a 64 MB session's check)
    if list(map(len, lists)) != prefix.sizes:
        return [False, False]
    return [True, _same_blocks(prefix, lists) if blocks else None]


def _same_blocks(prefix: Prefix, lists: list[list[Any]]) -> bool:
    """Whether the block lists of the messages ``_leads`` found the prefix's hold the
    prefix's very blocks."""
    CHECKS[1] += 1
    return all(map(is_, prefix.blocks, chain.from_iterable(lists)))


#: the session the last read in this context made, with that read's ``checking``
#: (``hand_over``), for the session's continuation
_HANDED: ContextVar[tuple[Any, _Checking] | None] = ContextVar("kept_cache_handed", default=None)


def hand_over(session: Any) -> None:
    """Within a read's ``checking``: its verdicts (and prefixes) hold for ``session``'s
    continuation too (``checking(session)``, once), as the session it made is handed to it
    unchanged (a worker's read of a live version, then ``continue_live``): the grown thread
    is checked once for the whole update. Nothing of a session too large to keep is."""
    scope = _CHECKING.get()
    _HANDED.set((session, scope) if scope is not None and fits(reading_bytes()) else None)


@contextmanager
def checking(session: Any = None, *, blocks: bool = False) -> Iterator[None]:
    """One read or continuation of a session: ``leads`` checks each kept prefix against a
    thread once, and its verdict holds until the outermost ``checking`` ends (nothing changes
    an earlier message's blocks in place meanwhile: a merge copies the message it extends);
    the caches that keep a thread there keep one ``prefix_of`` it. ``session``: the one the
    last read handed over (``hand_over``) goes on with that read's verdicts. ``blocks``: the
    very blocks are checked in the same pass as the messages (a worker's read, whose
    continuation's references ask: a second walk then, after the replay, costs most of the
    first). Outside one, each call checks and makes its own."""
    if _CHECKING.get() is not None:
        yield
        return
    handed = _HANDED.get()
    scope = None
    if handed is not None and session is not None and handed[0] is session:
        scope = handed[1]
        _HANDED.set(None)
    token = _CHECKING.set(scope or _Checking(blocks))
    try:
        yield
    finally:
        _CHECKING.reset(token)
