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
from typing import Any

from contextlab.engine.input.session import Session
from contextlab.engine.summarizing import Summarizer

#: Bump when the replay's state changes shape or one of its classes moves.
CHECKPOINT_VERSION = 4
_HEADER = f"contextlab replay checkpoint {CHECKPOINT_VERSION}\n".encode()
#: A finished replay kept for a live session's next append (``live``): its own header, so a
#: summary's checkpoint is never taken for one, nor one for a summary's.
_LIVE_HEADER = f"contextlab live replay {CHECKPOINT_VERSION}\n".encode()


def _external(
    session: Session, summarizer: Summarizer, progress: Callable[..., None] | None
) -> dict[int, tuple[Any, ...]]:
    """Objects a checkpoint refers to instead of copying (``persistent_id``)."""
    refs: dict[int, tuple[Any, ...]] = {id(session): ("session",)}
    refs[id(summarizer)] = ("summarizer",)
    if progress is not None:
        refs[id(progress)] = ("progress",)
    for t, thread in enumerate(session.threads):
        refs[id(thread)] = ("thread", t)
        refs[id(thread.messages)] = ("messages", t)
        for m, message in enumerate(thread.messages):
            refs[id(message)] = ("message", t, m)
    return refs


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
    refs = _external(session, summarizer, progress)
    buffer = io.BytesIO()
    buffer.write(_LIVE_HEADER if live else _HEADER)
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.persistent_id = lambda obj: refs.get(id(obj))  # type: ignore[method-assign]
    pickler.dump(state)
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
    hold (a live state's session lost messages)."""
    header = _LIVE_HEADER if live else _HEADER
    if not data.startswith(header):
        raise ValueError("checkpoint written by another engine version")

    def load_reference(pid: tuple[Any, ...]) -> Any:
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
        if kind == "messages":
            return thread.messages
        return thread.messages[pid[2]]

    unpickler = pickle.Unpickler(io.BytesIO(data[len(header) :]))
    unpickler.persistent_load = load_reference  # type: ignore[assignment]
    try:
        return unpickler.load()
    except (IndexError, pickle.UnpicklingError, EOFError, AttributeError) as exc:
        raise ValueError(f"checkpoint does not fit this session: {exc}") from None
