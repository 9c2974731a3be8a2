"""The one way ContextLab keeps derived data on disk: atomic writes, tolerant reads.

Three caches use it (README.md, "Caches"): the tokenizer's parsed ranks, parsed and tokenized
sessions, and the checkpoints of runs waiting for an LLM summary. Each is derived data: a cache
file that is missing, truncated, unwritable or written by another version costs a recomputation,
never a wrong result, so every failure here is swallowed and reported as "no cache".
"""

from __future__ import annotations

import atexit
import gc
import os
import pickle
import queue
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TypeVar

T = TypeVar("T")

#: What an unreadable pickle raises: truncated files, and classes renamed or removed since.
_UNREADABLE = (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while a large session is read, built or unpickled
    (turned back on after, if it was on). Such work makes millions of objects and no garbage:
    each time allocations pass the collector's threshold it walks the objects made so far, for
    nothing (about 40 % of a 64 MB live session's update). Reference counting still frees what
    is dropped; a cycle made meanwhile waits for the next full collection.

    On the way out the objects made meanwhile go to the oldest generation at once
    (``promote_tracked``): left in the youngest, the next collection would walk all of them,
    and the one after that again in the middle generation, still for nothing (40-60 ms of a
    request-dense rollout's 0.7 s load and replay; a session and a replay leave no cyclic
    garbage, ``tests/engine/test_disk_cache.py``)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            if gc.get_count()[0] >= PROMOTE_FROM_OBJECTS:
                promote_tracked()
            gc.enable()


#: objects made under a pause from which they go to the oldest generation on the way out (a
#: small session's few are left to the collector as before: walking them costs nothing)
PROMOTE_FROM_OBJECTS = 10_000


def promote_tracked() -> None:
    """Every object the collector tracks, into its oldest generation without walking them
    (``gc.freeze`` puts them aside in one step, ``gc.unfreeze`` back into the oldest
    generation): they are walked again only by a full collection. Left alone where something
    else froze objects (a server that froze its start-up state before forking keeps it so)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


def user_cache_dir() -> Path:
    """``$CONTEXTLAB_CACHE_DIR``, else ``$XDG_CACHE_HOME/contextlab``, else ``~/.cache/contextlab``."""
    explicit = os.environ.get("CONTEXTLAB_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "contextlab"


def write_bytes_atomic(target: str | os.PathLike[str], data: bytes) -> bool:
    """Write ``data`` to ``target`` so that a concurrent reader sees the old file or the new one,
    never half of one (a unique temporary file in the same folder, then ``os.replace``).
    False when the disk refused (read-only, full): the caller goes on without the cache."""
    return _write_atomic(target, lambda fh: write_in_pieces(fh, data))


def write_parts_atomic(target: str | os.PathLike[str], parts: Sequence[bytes]) -> bool:
    """``write_bytes_atomic`` of the parts one after the other, not joined first (a live
    session's state, megabytes, after a line naming its run)."""

    def write(fh: IO[bytes]) -> None:
        for part in parts:
            write_in_pieces(fh, part)

    return _write_atomic(target, write)


#: The most bytes handed to one ``write``. The kernel's page cache sizes the pages it takes for
#: a write by the write's length (large folios, Linux 6.x on ext4 and XFS): one write of a
#: 4.5 MB live state takes 2 MB blocks of free memory, the very blocks a virtual machine's
#: balloon gives back to its host while they are free (free page reporting, 2 MB and up), and
#: the first touch of each page of such a block waits for the host to back it again. On the
#: 2-core VM of bench/README.md (`bench_live.py`, branch live25d) a 4.5 MB state written at
#: once took 10-70 ms of CPU instead of about 2 in 20-30 % of the writes; in 64 KB pieces
#: (small pages, which the kernel keeps at hand per CPU) 0-1 of 50, for about 0.3 ms more.
WRITE_PIECE_BYTES = 64 * 1024


def write_in_pieces(fh: IO[bytes], data: bytes | memoryview) -> None:
    """``fh.write(data)`` in pieces of at most ``WRITE_PIECE_BYTES`` (not copied: views)."""
    if len(data) <= WRITE_PIECE_BYTES:
        fh.write(data)
        return
    view = memoryview(data)
    for start in range(0, len(view), WRITE_PIECE_BYTES):
        fh.write(view[start : start + WRITE_PIECE_BYTES])


def _write_atomic(target: str | os.PathLike[str], write: Callable[[IO[bytes]], object]) -> bool:
    folder = Path(target).parent
    tmp = ""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        replaced = _second_name(target, tmp)
        os.replace(tmp, target)
        if replaced:
            _remove_apart(replaced)
    except OSError:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        return False
    except BaseException:
        if tmp:  # a value that cannot be pickled leaves no temporary file behind
            Path(tmp).unlink(missing_ok=True)
        raise
    return True


#: A file replaced by ``_write_atomic`` from this size up is removed by a thread of its own.
#: Removing a file frees its disk blocks, and on a disk mounted with ``discard`` (the VM of
#: bench/README.md, ``bench_live.py``) ext4 waits there for the device to discard them: the
#: ``os.replace`` of a live session's 4.5 MB state over the last one took 5-16 ms, all but
#: 0.5-1 ms off the CPU (perf: ``ext4_free_blocks``, ``blkdev_issue_discard``). With a second
#: name kept for the old file the replace only drops a name (0.3-0.5 ms), and the blocks are
#: freed while the update goes on. Small files are removed in place, as before.
REMOVE_APART_BYTES = 1024 * 1024


def _second_name(target: str | os.PathLike[str], tmp: str) -> str | None:
    """A second name (hard link) for the file at ``target``, if it is at least
    ``REMOVE_APART_BYTES``: the replace then leaves it to ``_remove_apart``. None when there
    is no such file, or the disk refuses links (then the replace removes it, as before)."""
    try:
        if os.stat(target).st_size < REMOVE_APART_BYTES:
            return None
        second = tmp[: -len(".tmp")] + ".replaced.tmp"  # unique: the temporary file's name
        os.link(target, second)
    except OSError:
        return None
    return second


_REMOVALS: queue.SimpleQueue[str] | None = None
_REMOVALS_LOCK = threading.Lock()


def _forget_removals_in_child() -> None:
    """A forked child has no removal thread, and its copy of the lock may have been taken by
    a thread that does not exist there: it starts its own of both at its first removal (the
    parent removes what was queued before the fork)."""
    global _REMOVALS, _REMOVALS_LOCK
    _REMOVALS, _REMOVALS_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_removals_in_child)


def _remove_apart(path: str) -> None:
    """``path`` removed by this process's removal thread (started at its first removal), so
    that the caller does not wait for the disk."""
    global _REMOVALS
    with _REMOVALS_LOCK:
        if _REMOVALS is None:
            _REMOVALS = queue.SimpleQueue()
            threading.Thread(
                target=_removing, args=(_REMOVALS,), name="disk-cache-removals", daemon=True
            ).start()
            atexit.register(_remove_pending, _REMOVALS)
        _REMOVALS.put(path)


def _removing(paths: queue.SimpleQueue[str]) -> None:
    while True:
        Path(paths.get()).unlink(missing_ok=True)


def _remove_pending(paths: queue.SimpleQueue[str]) -> None:
    """The removals not done yet at exit, done now (the thread is a daemon: no file left)."""
    while True:
        try:
            Path(paths.get_nowait()).unlink(missing_ok=True)
        except queue.Empty:
            return


def write_pickle_atomic(target: str | os.PathLike[str], value: object) -> bool:
    """``write_bytes_atomic`` of ``value`` pickled with the highest protocol."""
    return write_bytes_atomic(target, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def stream_pickle_atomic(target: str | os.PathLike[str], value: object) -> bool:
    """``write_pickle_atomic`` pickling straight into the file: a large value (a whole parsed
    session) is never held a second time as one bytes object."""
    return _write_atomic(
        target, lambda fh: pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
    )


def read_bytes(target: str | os.PathLike[str]) -> bytes | None:
    try:
        return Path(target).read_bytes()
    except OSError:
        return None


def read_pickle(
    target: str | os.PathLike[str],
    kind: type[T],
    accept: Callable[[T], bool] = lambda value: True,
) -> T | None:
    """The unpickled value of ``target`` if it loads, is a ``kind`` and ``accept`` approves it."""
    try:
        with open(target, "rb") as fh:
            value = pickle.load(fh)
    except _UNREADABLE:
        return None
    return value if isinstance(value, kind) and accept(value) else None
