"""A replay stopped for a summary, kept as bytes and resumed later from exactly where it stopped.

The replay's whole state is pickled, with the session, the summarizer and the progress callback
left out by reference (the caller hands them back on resume). Pickles name classes by module
path, so the bytes start with a header naming the checkpoint format: a checkpoint of another
format is refused before anything in it is unpickled (``ValueError``), and the run replays
from the start.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable
from typing import IO, Any

from contextlab.engine.input.session import Session
from contextlab.engine.summarizing import Summarizer

#: Bump when the replay's state changes shape or one of its classes moves. 7: a session's
#: blocks are kept by reference too (an older reader would take one for its message).
CHECKPOINT_VERSION = 7
_HEADER = f"contextlab replay checkpoint {CHECKPOINT_VERSION}\n".encode()
#: A finished replay kept for a live session's next append (``live``): its own header, so a
#: summary's checkpoint is never taken for one, nor one for a summary's.
_LIVE_HEADER = f"contextlab live replay {CHECKPOINT_VERSION}\n".encode()


def _external(
    session: Session, summarizer: Summarizer, progress: Callable[..., None] | None
) -> dict[int, tuple[Any, ...]]:
    """Objects a checkpoint refers to instead of copying: the session, its threads, messages
    and their blocks, the summarizer and the progress callback (a thread's message list is
    the ``View``'s, which leaves it out of its pickled state). Blocks too: a step's state
    may hold the session's blocks themselves (``restore``'s index of read files holds every
    Read result's), which copied made most of a live state's bytes, and its pickling time,
    grow with the session's text (3.5 of 4.2 MB at 16 MB)."""
    refs: dict[int, tuple[Any, ...]] = {id(session): ("session",)}
    refs[id(summarizer)] = ("summarizer",)
    if progress is not None:
        refs[id(progress)] = ("progress",)
    for t, thread in enumerate(session.threads):
        refs[id(thread)] = ("thread", t)
        for m, message in enumerate(thread.messages):
            refs[id(message)] = ("message", t, m)
            for b, block in enumerate(message.blocks):
                refs[id(block)] = ("block", t, m, b)
    return refs


def _reference(*pid: Any) -> Any:
    """What a reference in a checkpoint is pickled as; ``load`` resolves it against the
    session it is handed (``_Unpickler.find_class``), never by calling this."""
    raise RuntimeError(f"checkpoint reference {pid!r} read outside checkpoints.load")


class _Pickler(pickle.Pickler):
    """Pickles ``refs``' objects as references. ``reducer_override`` is asked only about
    objects pickle has no built-in way for (not about the many strings, numbers, lists and
    dicts of a replay's state, which a ``persistent_id`` hook is asked about one by one)."""

    def __init__(self, file: IO[bytes], refs: dict[int, tuple[Any, ...]]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._refs = refs

    def reducer_override(self, obj: Any) -> Any:
        pid = self._refs.get(id(obj))
        return NotImplemented if pid is None else (_reference, pid)


def dump(
    state: object,
    session: Session,
    summarizer: Summarizer,
    progress: Callable[..., None] | None,
    *,
    live: bool = False,
) -> bytes:
    """``state`` as checkpoint bytes, ``session``, ``summarizer`` and ``progress`` by reference
    (``live``: a finished replay kept for the session's next append)."""
    buffer = io.BytesIO()
    buffer.write(_LIVE_HEADER if live else _HEADER)
    _Pickler(buffer, _external(session, summarizer, progress)).dump(state)
    return buffer.getvalue()


def load(
    data: bytes,
    session: Session,
    summarizer: Summarizer,
    progress: Callable[..., None] | None,
    *,
    live: bool = False,
) -> object:
    """The state ``dump`` kept, its references taken from the arguments; ``ValueError`` for a
    checkpoint of another format (or kind), or one whose references ``session`` does not
    hold (a live state's session lost messages). Bytes after the state are left alone."""
    return load_prefix(data, session, summarizer, progress, live=live)[0]


def load_prefix(
    data: bytes,
    session: Session,
    summarizer: Summarizer,
    progress: Callable[..., None] | None,
    *,
    live: bool = False,
) -> tuple[object, int]:
    """``load``, and where in ``data`` the state's bytes end (a live state may be followed by
    another one: ``replay.live``)."""
    header = _LIVE_HEADER if live else _HEADER
    if not data.startswith(header):
        raise ValueError("checkpoint written by another engine version")

    def load_reference(*pid: Any) -> Any:
        kind = pid[0]
        if kind == "session":
            return session
        if kind == "summarizer":
            return summarizer
        if kind == "progress":
            return progress
        thread = session.threads[pid[1]]
        if kind == "thread":
            return thread
        message = thread.messages[pid[2]]
        if kind == "block":
            return message.blocks[pid[3]]
        return message

    stream = io.BytesIO(memoryview(data)[len(header) :])
    unpickler = _Unpickler(stream, load_reference)
    try:
        state = unpickler.load()
    except (IndexError, pickle.UnpicklingError, EOFError, AttributeError) as exc:
        raise ValueError(f"checkpoint does not fit this session: {exc}") from None
    return state, len(header) + stream.tell()


class _Unpickler(pickle.Unpickler):
    """Resolves ``dump``'s references with ``resolve`` (the loading call's session)."""

    def __init__(self, file: IO[bytes], resolve: Callable[..., Any]) -> None:
        super().__init__(file)
        self._resolve = resolve

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == _reference.__name__:
            return self._resolve
        return super().find_class(module, name)
