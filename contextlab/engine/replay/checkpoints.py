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
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import IO, Any

from contextlab.engine.input.kept_cache import (
    KeptCache,
    Prefix,
    leads,
    prefix_of,
    session_bytes,
    session_lineage,
)
from contextlab.engine.input.session import Session
from contextlab.engine.summarizing import Summarizer

#: Bump when the replay's state changes shape or one of its classes moves. 7: a session's
#: blocks are kept by reference too (an older reader would take one for its message). 8: a
#: thread's requests are kept as their positions (``session.RequestList``). 9: an
#: ``AppendedList``'s large chunks are compressed (``COMPRESS_CHUNK_BYTES``).
CHECKPOINT_VERSION = 9
_HEADER = f"contextlab replay checkpoint {CHECKPOINT_VERSION}\n".encode()
#: A finished replay kept for a live session's next append (``live``): its own header, so a
#: summary's checkpoint is never taken for one, nor one for a summary's.
_LIVE_HEADER = f"contextlab live replay {CHECKPOINT_VERSION}\n".encode()


def _external(
    session: Session, summarizer: Summarizer, progress: Callable[..., None] | None
) -> list[dict[int, tuple[Any, ...]]]:
    """Objects a checkpoint refers to instead of copying: the session, its threads, messages
    and their blocks, the summarizer and the progress callback (a thread's message list is
    the ``View``'s, which leaves it out of its pickled state). Blocks too: a step's state
    may hold the session's blocks themselves (``restore``'s index of read files holds every
    Read result's), which copied made most of a live state's bytes, and its pickling time,
    grow with the session's text (3.5 of 4.2 MB at 16 MB). As dicts looked up in turn: a
    large thread's kept references (``_REFS``) are looked up where they are, not copied into
    one dict at each dump (a 64 MB session's 13,000, twice)."""
    refs: dict[int, tuple[Any, ...]] = {id(session): ("session",)}
    refs[id(summarizer)] = ("summarizer",)
    if progress is not None:
        refs[id(progress)] = ("progress",)
    kept: list[dict[int, tuple[Any, ...]]] = []
    held = (session_bytes(session), session_lineage(session))
    for t, thread in enumerate(session.threads):
        refs[id(thread)] = ("thread", t)
        earlier, last = _thread_refs(t, thread.messages, held)
        if len(earlier) > _OWN_DICT:
            kept.append(earlier)
        else:
            refs.update(earlier)
        refs.update(last)
    return [refs, *kept]


#: a thread's kept references are looked up in their own dict past this many
_OWN_DICT = 1024


class _ThreadRefs:
    """A thread's messages and blocks as ``_external`` referred to them at a live state's
    last dump (a ``kept_cache.Prefix``: the objects themselves, held, so no id is reused while
    kept, and how many blocks each message had), and their references. A grown session's
    next dump holds the same objects first (``claude_code.extending`` keeps the earlier
    messages): checked object by object (``kept_cache.leads``, once per continuation for all
    the caches), they need no new references (a 64 MB session's 13,000 were about 3 ms a
    dump)."""

    __slots__ = ("prefix", "refs")

    def __init__(self, prefix: Prefix | None, refs: Any):
        self.prefix, self.refs = prefix, refs


#: by (thread position, its first message's id): the last dumps' ``_ThreadRefs``, bounded by
#: the size of their sessions (``kept_cache``: nothing of a large one)
_REFS: KeptCache[tuple[int, int], _ThreadRefs] = KeptCache(2)
#: the caches' order changes under it (a process replaying in threads)
_KEPT_LOCK = threading.Lock()


def _thread_refs(
    t: int, messages: list[Any], held: tuple[int, int]
) -> tuple[dict[int, tuple[Any, ...]], dict[int, tuple[Any, ...]]]:
    """The references of thread ``t``'s messages and blocks: those of every message but the
    last (kept in ``_REFS`` for the next dump, not to be changed), and the last's. Those of
    the messages it had at the last dump (but the last, which a grown session may hold a
    longer copy of) are taken from ``_REFS`` when they are the very objects, with the same
    blocks."""
    key = (t, id(messages[0]) if messages else 0)
    kept = _REFS.get(key)
    n = 0
    if (
        kept is not None
        and kept.prefix is not None
        and len(kept.prefix) < len(messages)
        and leads(kept.prefix, messages, blocks=True)
    ):
        n = len(kept.prefix)
    else:
        kept = _ThreadRefs(None, {})
    # every message but the last goes into the kept references, for the next dump
    last = max(len(messages) - 1, n)
    refs = kept.refs
    last_refs: dict[int, tuple[Any, ...]] = {}
    for m in range(n, len(messages)):
        if m == last:
            refs = last_refs
        message = messages[m]
        refs[id(message)] = ("message", t, m)
        for b, block in enumerate(message.blocks):
            refs[id(block)] = ("block", t, m, b)
    if n < last:
        kept.prefix = prefix_of(messages, on=kept.prefix)
    if n < last or key in _REFS:
        _REFS.keep(key, kept, size=held[0], lineage=held[1])
    return kept.refs, last_refs


def _reference(*pid: Any) -> Any:
    """What a reference in a checkpoint is pickled as; ``load`` resolves it against the
    session it is handed (``_Unpickler.find_class``), never by calling this."""
    raise RuntimeError(f"checkpoint reference {pid!r} read outside checkpoints.load")


class _Pickler(pickle.Pickler):
    """Pickles ``refs``' objects as references. ``reducer_override`` is asked only about
    objects pickle has no built-in way for (not about the many strings, numbers, lists and
    dicts of a replay's state, which a ``persistent_id`` hook is asked about one by one)."""

    def __init__(self, file: IO[bytes], refs: list[dict[int, tuple[Any, ...]]]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._refs = [r.get for r in refs]

    def reducer_override(self, obj: Any) -> Any:
        key = id(obj)
        for get in self._refs:
            pid = get(key)
            if pid is not None:
                return (_reference, pid)
        return NotImplemented


class _NotPlain(Exception):
    """An item of an ``AppendedList`` is not plain data (``_PlainPickler``)."""


class _PlainPickler(pickle.Pickler):
    """Pickles plain data only (dicts, lists, tuples, strings, numbers: ``reducer_override`` is
    asked about nothing else): an item holding a session's object, or any other, is refused,
    so that a chunk pickled on its own never copies what the state refers to."""

    def __init__(self, file: IO[bytes]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)

    def reducer_override(self, obj: Any) -> Any:
        raise _NotPlain(type(obj).__name__)


#: An ``AppendedList`` chunk whose pickle is this long or longer is kept compressed (zlib,
#: level 1): a live state's rows and synthetic messages (text, about a third compressed) were
#: most of its bytes (1.95 of 2.26 MB at 64 MB), and the state is written, read back and
#: compared at every append, twice over (its rewind after it), each time in fresh megabytes of
#: memory. A chunk is compressed once, when made (a merge's too), and a warm worker never
#: decompresses its own (``_DECODED``); a small one (an append's own rows) stays a plain pickle.
COMPRESS_CHUNK_BYTES = 16 * 1024
_COMPRESS_LEVEL = 1
#: a plain chunk's first byte: a pickle's protocol opcode (a zlib stream starts otherwise)
_PICKLE_START = pickle.PROTO


def _plain_chunk(items: list[Any]) -> tuple[bytes, int] | None:
    """The chunk's bytes (compressed when large) and its pickle's length; None when an item
    is not plain data."""
    buffer = io.BytesIO()
    try:
        _PlainPickler(buffer).dump(items)
    except _NotPlain:
        return None
    data = buffer.getvalue()
    if len(data) >= COMPRESS_CHUNK_BYTES:
        return zlib.compress(data, _COMPRESS_LEVEL), len(data)
    return data, len(data)


class AppendedList(list[Any]):
    """A list of a replay's state that only ever grows by items that never change once in it
    (a thread's result rows, the replay's synthetic messages: plain data), pickled in chunks
    kept as bytes: a live state's next dump pickles only the items added since, and copies the
    earlier chunks' bytes as they are (a 64 MB session's rows and synthetic texts were most of
    what each append pickled again). Chunks are merged as a binary counter's digits carry (a
    chunk is merged into the one before it once it holds as many items), so there are few,
    and each item is pickled again a logarithmic number of times. A change other than an
    append drops the chunks (the next dump pickles the list whole)."""

    __slots__ = ("chunks",)

    def __init__(self, items: Iterable[Any] = (), chunks: list[tuple[int, bytes]] | None = None):
        super().__init__(items)
        #: (items, their pickle) of consecutive items from the first
        self.chunks: list[tuple[int, bytes]] = chunks or []

    def __reduce_ex__(self, _protocol: Any) -> Any:
        """The pickle's reduction: the list made again from its chunks (``_from_chunks``), or,
        when an item is not plain data, pickled as a list (the pickler's references kept)."""
        done = sum(count for count, _ in self.chunks)
        if done > len(self):
            self.chunks, done = [], 0
        if done < len(self):
            made = _plain_chunk(self[done:])
            if made is None:
                self.chunks = []
                return (AppendedList, (list(self),))
            self.chunks.append((len(self) - done, made[0]))
            _keep_decoded(made[0], self[done:], made[1])
        while len(self.chunks) > 1 and self.chunks[-2][0] <= self.chunks[-1][0]:
            merged = self.chunks[-2][0] + self.chunks[-1][0]
            end = sum(count for count, _ in self.chunks)
            made = _plain_chunk(self[end - merged : end])
            assert made is not None  # the items were plain when chunked, and are the same
            self.chunks[-2:] = [(merged, made[0])]
            _keep_decoded(made[0], self[end - merged : end], made[1])
        return (_from_chunks, (tuple(self.chunks),))

    # every change but an append makes the chunks stale
    def _changed(self) -> None:
        self.chunks = []

    def __setitem__(self, index: Any, value: Any) -> None:
        self._changed()
        super().__setitem__(index, value)

    def __delitem__(self, index: Any) -> None:
        self._changed()
        super().__delitem__(index)

    def __iadd__(self, other: Iterable[Any]) -> AppendedList:  # type: ignore[override,misc]
        self.extend(other)
        return self

    def __imul__(self, n: Any) -> AppendedList:  # type: ignore[override,misc]
        self._changed()
        return super().__imul__(n)  # type: ignore[return-value]

    def insert(self, index: Any, value: Any) -> None:
        self._changed()
        super().insert(index, value)

    def pop(self, index: Any = -1) -> Any:
        self._changed()
        return super().pop(index)

    def remove(self, value: Any) -> None:
        self._changed()
        super().remove(value)

    def clear(self) -> None:
        self._changed()
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._changed()
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self._changed()
        super().reverse()


def _from_chunks(chunks: tuple[tuple[int, bytes], ...]) -> AppendedList:
    """An ``AppendedList`` read back from its chunks, which it keeps for its next dump. A
    chunk this process pickled or read before (``_DECODED``: the same bytes) gives the items
    it held, not decoded again."""
    items: list[Any] = []
    for count, data in chunks:
        part = _decoded(data)
        if len(part) != count:
            raise pickle.UnpicklingError("a chunk holds another number of items")
        items.extend(part)
    return AppendedList(items, list(chunks))


#: Chunks of ``AppendedList``s this process pickled or read lately, with their items: a warm
#: worker's next append reads the state it wrote itself (storage stays the truth: the bytes
#: read are those bytes, compared whole), and decoding its rows again was most of what reading
#: it back cost (a 64 MB session's 1,574 rows and synthetic messages, about 10 ms). The items
#: are shared between the lists read from one chunk: they are final once appended (a result
#: row, a synthetic message) and nothing changes them in place (``ReplayResult.main_requests``
#: gives renumbered copies). Keyed by the chunk's length and ends; at most
#: ``DECODED_MAX_BYTES`` of chunks (as plain pickles: a compressed one's items take as much
#: memory as an uncompressed one's), the least recently used dropped first.
_DECODED: OrderedDict[tuple[int, bytes, bytes], tuple[bytes, tuple[Any, ...], int]] = OrderedDict()
_DECODED_BYTES = [0]
DECODED_MAX_BYTES = 64 * 1024 * 1024


def _chunk_key(data: bytes) -> tuple[int, bytes, bytes]:
    return len(data), data[:64], data[-64:]


def _decoded(data: bytes) -> tuple[Any, ...] | list[Any]:
    key = _chunk_key(data)
    found = _DECODED.get(key)
    if found is not None and found[0] == data:
        with _KEPT_LOCK:
            if key in _DECODED:
                _DECODED.move_to_end(key)
        return found[1]
    plain = data
    if data[:1] != _PICKLE_START:
        try:
            plain = zlib.decompress(data)
        except zlib.error as exc:
            raise pickle.UnpicklingError(f"a chunk does not decompress: {exc}") from None
    part = pickle.loads(plain)
    if not isinstance(part, list):
        raise pickle.UnpicklingError("a chunk is not a list")
    _keep_decoded(data, part, len(plain))
    return part


def _keep_decoded(data: bytes, items: list[Any], size: int) -> None:
    """Keep ``items`` as the chunk ``data`` holds (``size``: its pickle's length, the bound's
    measure)."""
    key = _chunk_key(data)
    kept = (data, tuple(items), size)
    with _KEPT_LOCK:
        old = _DECODED.pop(key, None)
        if old is not None:
            _DECODED_BYTES[0] -= old[2]
        if size > DECODED_MAX_BYTES:
            return
        _DECODED[key] = kept
        _DECODED_BYTES[0] += size
        while _DECODED_BYTES[0] > DECODED_MAX_BYTES:
            _, (_, _, dropped) = _DECODED.popitem(last=False)
            _DECODED_BYTES[0] -= dropped


def dump(
    state: object,
    session: Session,
    summarizer: Summarizer,
    progress: Callable[..., None] | None,
    *,
    live: bool = False,
    after: bytes | memoryview | None = None,
) -> bytes:
    """``state`` as checkpoint bytes, ``session``, ``summarizer`` and ``progress`` by reference
    (``live``: a finished replay kept for the session's next append), with ``after`` written
    after them (a live state's rewind: not joined to megabytes of state in a second copy)."""
    buffer = io.BytesIO()
    buffer.write(_LIVE_HEADER if live else _HEADER)
    _Pickler(buffer, _external(session, summarizer, progress)).dump(state)
    if after:
        buffer.write(after)
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
