"""A live replay's state kept in a worker process between a session's appends (``live``).

``continue_live`` read the state an append stored back at every append, and a 64 MB
session's (without its rows, which ``checkpoints._DECODED`` keeps) cost about 5 ms of CPU: its
runners, view and cache simulator, each thread's requests made again. A process keeps the
states it dumped last with their bytes (``KEPT_STATES``), and the next update handed exactly
those bytes goes on from the object, bound to the grown session (``rebind``); anything else
reads the stored state (storage stays the truth).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import is_
from typing import Protocol, TypeVar

from contextlab.engine.input import kept_cache
from contextlab.engine.input.kept_cache import KeptCache
from contextlab.engine.input.session import RequestInfo, RequestList, Session, Thread

from .driver import SessionReplay
from .thread import ThreadReplay


def runners(state: SessionReplay) -> dict[str, ThreadReplay]:
    """Every thread's replay the state holds, finished or under way."""
    runners = dict(state.finished)
    if state.runner is not None:
        runners[state.runner.thread.id] = state.runner
    return runners


class Continuable(Protocol):
    """What this module needs of a live state (``live.LiveState``, which imports this module)."""

    replay: SessionReplay
    #: the bytes after the state's own: its rewind's
    rewind: bytes | memoryview | None
    #: per thread: how many of its first messages the grown session holds as the very objects
    same: dict[str, int]


L = TypeVar("L", bound=Continuable)


@dataclass
class KeptState:
    """A live state this process dumped last, with the bytes it dumped it to (``own`` of them
    its own, the rest its ``rewind``'s, which it keeps as it was handed them) and the session
    it refers to."""

    live: Continuable
    data: bytes
    own: int
    rewind: bytes | memoryview | None
    session: Session


#: The live states this process dumped last, each used (and dropped) by the next
#: ``continue_live`` handed bytes that start with exactly its bytes (storage stays the
#: truth: a worker that did not take the last append, or a restart, reads the stored state).
#: Reading a 64 MB session's state back was about 5 ms of CPU an append, without its rows
#: (``checkpoints._DECODED``): its runners, view and cache simulator, each thread's requests.
#: The object is taken out while it goes on (a failed continuation leaves none behind).
#: Nothing else may change it in place: a result shares its rows, its log and its threads'
#: results with it (the rows are final once written; ``ReplayResult.main_requests`` numbers
#: copies).
#: Bounded by the size of their sessions (``kept_cache``: a worker keeps no state of a session
#: of more than ``KEPT_MAX_BYTES``, and the sessions of all it keeps fit in them).
KEPT_STATES: KeptCache[int, KeptState] = KeptCache(2)
KEPT_STATES_LOCK = kept_cache.LOCK


def keep_state(live: Continuable, data: bytes, rewind: bytes | memoryview | None) -> None:
    """Keep ``live`` with the bytes it was dumped to, ``rewind``'s at their end."""
    session = live.replay.inputs.session
    kept = KeptState(live, data, len(data) - len(rewind or b""), rewind, session)
    KEPT_STATES.keep(
        id(live),
        kept,
        size=kept_cache.session_bytes(session),
        lineage=kept_cache.session_lineage(session),
    )


def take_kept(data: bytes, session: Session, kind: type[L]) -> tuple[L, bytes | memoryview] | None:
    """The state (a ``kind``) this process dumped to exactly the bytes ``data``, bound to
    ``session`` (``rebind``), and its own bytes (a view of ``data``'s first: no copy of
    megabytes); None when none is kept for them, or the session is not the kept one's grown
    (the stored state is read instead)."""
    with KEPT_STATES_LOCK:
        found = next((k for k, v in KEPT_STATES.items() if data == v.data), None)
        kept = KEPT_STATES.pop(found) if found is not None else None
    if kept is None or not rebind(kept.live.replay, kept.session, session):
        return None
    live = kept.live
    if not isinstance(live, kind):
        return None
    live.rewind = kept.rewind or None  # the very bytes at ``data``'s end: not sliced off again
    live.same = {t.id: len(t.messages) for t in kept.session.threads}
    return live, memoryview(kept.data)[: kept.own]


def rebind(state: SessionReplay, old: Session, new: Session) -> bool:
    """Make ``state``, a replay of ``old``, refer to ``new`` instead, when ``new`` holds every
    message of ``old``'s threads as the very same objects, in the same places (a warm read
    of the grown file extends the earlier version's threads: ``claude_code.extending``);
    else False, ``state`` unchanged. What a state's pickle refers to by position
    (``checkpoints._external``) is then the same object either way but the session, its
    threads and their message lists, which a replay's objects hold in the places changed
    here (a test walks the whole state after it for any left behind)."""
    if new is old:
        return True
    if len(new.threads) != len(old.threads):
        return False
    swap: dict[int, object] = {id(old): new}
    for before, after in zip(old.threads, new.threads, strict=True):
        n = len(before.messages)
        if (
            before.id != after.id
            or len(after.messages) < n
            or not all(map(is_, before.messages, after.messages[:n]))
        ):
            return False
        swap[id(before)] = after
        swap[id(before.messages)] = after.messages
    _swap_attributes(state.inputs, swap)
    for threads in (state.threads, state.order):
        threads[:] = [swap.get(id(t), t) for t in threads]  # type: ignore[misc]
    for finished in state.by_thread.values():
        _swap_attributes(finished, swap)
    for runner in runners(state).values():
        for part in (
            runner,
            runner.view,
            runner.cache,
            runner.requests,  # the decision counter's too
        ):
            _swap_attributes(part, swap)
    return True


def _swap_attributes(obj: object, swap: dict[int, object]) -> None:
    """Set each attribute of ``obj`` that holds an object of ``swap`` to its replacement."""
    names = list(getattr(obj, "__dict__", ()))
    for cls in type(obj).__mro__:
        names += getattr(cls, "__slots__", ())
    for name in names:
        value = getattr(obj, name, None)
        if value is not None and id(value) in swap:
            setattr(obj, name, swap[id(value)])


def grown_requests(thread: Thread, old: RequestList, same: int) -> RequestList | None:
    """``thread_requests(thread)`` when its first ``same`` messages are the very ones ``old``
    was listed from (every message the earlier version's thread had, ``rebind``): ``old``'s
    requests, and those of the messages after them (a 64 MB session's 7,000 messages are
    not walked again). None otherwise."""
    if not same or not old or old[-1].position >= same:
        return None
    messages = thread.messages
    requests = RequestList(thread, old)
    for position in range(old[-1].position + 1, len(messages)):
        if messages[position].role == "assistant":
            requests.append(RequestInfo(len(requests), position, messages[position]))
    return requests
