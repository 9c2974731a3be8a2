"""Parse a session once, reuse it across replays (A/B pairs, sweeps, workers).

A parsed session, with whatever its caller computed on it first (``prepare``: the engine's
``load_session_cached`` fills every block's token counts, ``measures.tokenized``), is pickled
under ``cache_dir``, keyed by the file's SHA-256 (a session stitched to the uploads it
continues: every file's) and the engine's cache version. Another replay of the same file, in
this process or another worker on the same disk, loads it instead of parsing and preparing it
again. The web side, which parses an upload to check it, leaves its parsed copy for the first
replay (``keep_parsed``), so a new file is parsed once. Hosts that share no disk share the
cache through a ``CacheMirror`` (the app's object store): a file missing here is looked for
there, and a file written here is copied there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, TypeVar

from . import kept_cache
from .disk_cache import (
    gc_paused,
    read_bytes,
    read_pickle,
    stream_pickle_atomic,
    write_bytes_atomic,
)
from .loading import Upload
from .session import Session
from .sources.claude_code.extending import KeptRead
from .sources.claude_code.growing import STATE_VERSION
from .sources.registry import load_growing_session, load_session
from .upload_chain import EarlierUpload, open_upload_chain

T = TypeVar("T")


def _token_kinds_digest() -> str:
    """Digest of the fitted content-kind ratios (``measures/data/token_kinds.toml``): the
    cached token counts are scaled by them, so a refit is a new cache version. Read as a
    resource, not imported: the input layer does not import the measures."""
    data = resources.files("contextlab.engine.measures").joinpath("data/token_kinds.toml")
    return hashlib.sha256(data.read_bytes()).hexdigest()[:8]


#: Bump when Session, Block or the tokenization change shape, or a pickled class moves (the
#: pickles name them by module path); the kind ratios' digest follows their refits. 11: an
#: attachment's metadata keeps a prompt snapshot's tool definitions (the waste findings). 12: a
#: thinking block keeps its signature's length. 13: a block holds its text compact
#: (``model.compact_text``), in a slotted class that is no dataclass. 14: a Codex compaction's
#: copies of earlier history are marked (``compaction_kept``). 15: Codex rollouts of later
#: versions read anew (tool-search outputs, images, agent messages, rollbacks as branches). 16:
#: blocks, messages and usage pickled by their fields (``model.pickled_by_fields``), record
#: uuids in a ``uuid_set.UuidSet``.
CACHE_VERSION = f"16.{_token_kinds_digest()}"
#: Sessions kept in memory by a long-lived process (a worker replaying a file again after an
#: LLM summary, or an A/B pair), newest last.
_RECENT: OrderedDict[str, Session] = OrderedDict()
RECENT_LIMIT = 2
#: bytes of session files whose sessions are kept in memory at most (``_RECENT``): a session
#: of gigabytes is not kept, and one is let go before a session is read that would take them
#: past it, so a worker never holds a large session while it reads the next one
RECENT_MAX_BYTES = 256 * 1024 * 1024
#: file bytes of each session of ``_RECENT``
_RECENT_BYTES: dict[str, int] = {}


class CacheMirror(Protocol):
    """A second home for cache files, shared by hosts that share no disk: ``fetch`` copies
    the file called ``name`` to ``target`` (False when the mirror has none), ``store`` copies
    ``source`` there, ``discard`` removes it. Failures are the mirror's to swallow: a cache
    never changes a result."""

    def fetch(self, name: str, target: Path) -> bool: ...

    def store(self, name: str, source: Path) -> None: ...

    def discard(self, name: str) -> None: ...


def file_sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@gc_paused()
def cached_session(
    path: str | os.PathLike[str],
    *,
    cache_dir: str | os.PathLike[str],
    prepare: Callable[[Session], object],
    name: str | None = None,
    sha256: str | None = None,
    earlier: Sequence[str | os.PathLike[str] | EarlierUpload] = (),
    mirror: CacheMirror | None = None,
    beside: KeptBeside | None = None,
    parsed_first: bool = False,
) -> Session:
    """Like ``load_session`` but served from (and written to) ``cache_dir`` when possible;
    ``prepare`` runs once on a session just parsed, before it is cached (every caller of one
    ``cache_dir`` passes the same one: the cached copy holds its work).

    With ``earlier`` (the uploads this one continues, earliest first), the session is the
    stitched one (``upload_chain.open_upload_chain``), cached under a key made of every file's;
    an earlier file that is gone is left out of both.
    ``beside`` (a version of a growing session, whose parse was handed over): the parse is
    kept as it is, with ``prepare``'s work saved beside it (``KeptBeside``), instead of a
    pickle of the whole prepared session written at every append.
    ``parsed_first``: the caller knows no replay of the file has been read yet (its first),
    so the upload check's parse (``keep_parsed``) is looked for before a prepared copy: with a
    mirror, one request (the parse's) instead of a missing prepared copy's and then the
    parse's. Either order gives the same session (the cache never changes a result).
    A cache file that cannot be read (truncated, written by another engine version) is ignored
    and rewritten; the cache never changes what a replay computes.
    The garbage collector is paused meanwhile (``disk_cache.gc_paused``).
    """
    path = os.fspath(path)
    files = [e if isinstance(e, EarlierUpload) else EarlierUpload(e) for e in earlier]
    files = [e for e in files if os.path.isfile(e.path)]
    key = _key(path, sha256)
    if files:
        # a stitched parse is another session than the file's alone
        parts = [key, *(_key(os.fspath(e.path), e.sha256) for e in files)]
        key = hashlib.sha256("\n".join(parts).encode()).hexdigest() + f"-chain-v{CACHE_VERSION}"
    target = Path(cache_dir) / f"{key}.pickle"

    def reopen() -> Upload:
        return open_upload_chain(path, files, name)

    recent = _RECENT.get(key)
    if recent is not None:
        _RECENT.move_to_end(key)
        recent.upload = reopen()  # the last replay closed its archive handles
        return recent
    size = _files_bytes([path, *(e.path for e in files)])
    _make_room(size)
    # a worker's read: its continuation's references check the blocks too (kept_cache.leads)
    with kept_cache.checking(blocks=True), _reading(size):
        session = _cached_read(
            path, name, key, sha256, prepare, files, target, mirror, beside, size, parsed_first
        )
        kept_cache.hand_over(session)  # its continuation checks its threads no second time
        return session


def _cached_read(
    path: str,
    name: str | None,
    key: str,
    sha256: str | None,
    prepare: Callable[[Session], object],
    files: list[EarlierUpload],
    target: Path,
    mirror: CacheMirror | None,
    beside: KeptBeside | None,
    size: int,
    parsed_first: bool = False,
) -> Session:
    def reopen() -> Upload:
        return open_upload_chain(path, files, name)

    remember = partial(_remember, size=size)
    if beside is not None and not files and sha256 is not None:
        grown = _read_version(path, name, key, sha256, prepare, beside, mirror, target.parent)
        if grown is not None:
            remember(key, grown)
            return grown
    parsed = target.parent / f"{key}{PARSED_SUFFIX}"
    # a first replay: the upload check's parse is there, a prepared copy is not (yet)
    session = read_kept(parsed, Session, mirror) if parsed_first else None
    if session is None:
        prepared = read_kept(target, Session, mirror)  # maybe another host prepared it
        if prepared is not None:
            prepared.upload = reopen()  # archives: tool-results read on demand
            if name:
                prepared.name = name
            remember(key, prepared)
            return prepared
        if not parsed_first:
            session = read_kept(parsed, Session, mirror)  # maybe the web host's upload check's
    if session is not None:
        # parsed by whoever stored the upload (``keep_parsed``): only ``prepare`` is left
        session.upload = reopen()
        if name:
            session.name = name
        if beside is not None and not files:
            _prepare_beside(session, target.parent, key, prepare, beside, mirror)
            remember(key, session)
            return session
    else:
        session = load_session(path, name, earlier=files)
    prepare(session)
    upload, session.upload = session.upload, None
    try:
        # a read-only or full disk only costs the reuse; pickled straight into the file, not
        # held a second time as one bytes object (a 2 GB session's is over a gigabyte)
        if stream_pickle_atomic(target, session) and mirror is not None:
            mirror.store(target.name, target)
    finally:
        session.upload = upload
    parsed.unlink(missing_ok=True)  # the prepared copy supersedes it
    if mirror is not None:
        mirror.discard(parsed.name)
    remember(key, session)
    return session


def _read_version(
    path: str,
    name: str | None,
    key: str,
    sha256: str,
    prepare: Callable[[Session], object],
    beside: KeptBeside,
    mirror: CacheMirror | None,
    folder: Path,
) -> Session | None:
    """A growing session's version (digest ``sha256``) read on from the read of the version
    before it (``beside.replaces``) that this process kept in memory: only the appended lines
    are parsed, the main thread extended, and only the new blocks counted (the others are the
    earlier version's, counted). Without one, read from the state the append's read left
    (``load_growing``), whose read is then kept for the next version; None when there is no
    such state either (the caller reads the session as any other)."""
    kept = _take_version_read(beside.replaces) if beside.replaces else None
    saved = None
    if kept is None:
        state = folder / _reading_state_name(sha256)
        saved = read_bytes(state)
        if saved is None and mirror is not None and mirror.fetch(state.name, state):
            saved = read_bytes(state)
        if saved is None:
            return None
    session, growing = load_growing_session(path, name, saved=saved, kept=kept)
    _prepare_beside(session, folder, key, prepare, beside, mirror)
    if growing.kept is not None:
        _keep_version_read(sha256, growing.kept, _files_bytes([path]))
    return session


#: file name ending of a parsed, not yet prepared session (``keep_parsed``)
PARSED_SUFFIX = ".parsed.pickle"


@dataclass(frozen=True)
class KeptBeside:
    """How a version of a growing session is kept: its parse as handed over, and what
    ``prepare`` added to it saved beside it in a small file (``save``'s value, put back on the
    parse by ``restore``), so an append writes no second copy of the whole session.
    ``replaces``: the digest of the version before, whose cache files go once this one is
    kept (each append would otherwise leave one more copy of the session)."""

    suffix: str
    kind: type
    save: Callable[[Session], object]
    restore: Callable[[Session, Any], object]
    replaces: str | None = None


def _prepare_beside(
    session: Session,
    folder: Path,
    key: str,
    prepare: Callable[[Session], object],
    beside: KeptBeside,
    mirror: CacheMirror | None,
) -> None:
    """``prepare`` a handed-over parse, starting from what an earlier load of this same
    version saved beside it; save what it is now (the parse itself stays as it is)."""
    kept = folder / f"{key}{beside.suffix}"
    saved = read_kept(kept, beside.kind, mirror)
    if saved is not None:
        beside.restore(session, saved)
    prepare(session)
    if saved is None:
        if stream_pickle_atomic(kept, beside.save(session)) and mirror is not None:
            mirror.store(kept.name, kept)
        if beside.replaces and not key.startswith(f"{beside.replaces}-"):
            forget_version(folder, beside.replaces, mirror)


def read_kept(target: Path, kind: type[T], mirror: CacheMirror | None) -> T | None:
    """The cache file ``target`` unpickled (fetched from the mirror when not on this disk)."""
    value = read_pickle(target, kind)
    if value is None and mirror is not None and mirror.fetch(target.name, target):
        value = read_pickle(target, kind)
    return value


def kept_beside(
    cache_dir: str | os.PathLike[str], sha256: str, beside: KeptBeside
) -> object | None:
    """What a version (digest ``sha256``) of a growing session saved beside its parse."""
    for path in _named(Path(cache_dir), f"{sha256}-", f"-v{CACHE_VERSION}{beside.suffix}"):
        found = read_pickle(path, beside.kind)
        if found is not None:
            return found
    return None


def _named(folder: Path, start: str, end: str) -> list[Path]:
    """The files of ``folder`` whose names start with ``start`` and end with ``end`` (apart),
    sorted: ``glob(f"{start}*{end}")`` without compiling a pattern for each digest (a live
    session's every append looked up three, about 1 ms)."""
    try:
        with os.scandir(folder) as entries:
            names = [
                e.name
                for e in entries
                if e.name.startswith(start)
                and e.name.endswith(end)
                and len(e.name) >= len(start) + len(end)
            ]
    except OSError:
        return []
    return [folder / name for name in sorted(names)]


def forget_version(folder: Path, sha256: str, mirror: CacheMirror | None) -> None:
    """Remove the cache files of the file of digest ``sha256`` (a growing session's version
    that a longer one superseded); a reader that has one open still reads it whole."""
    for path in _named(folder, f"{sha256}-", ""):
        path.unlink(missing_ok=True)
        if mirror is not None:
            mirror.discard(path.name)


def cached_by_sha(cache_dir: str | os.PathLike[str], sha256: str) -> Session | None:
    """A prepared session this process or the cache holds for a file of digest ``sha256`` (a
    single file, not a chain), or None: the earlier version of a session that grew, whose
    token counts the grown one reuses (``tokenized.tokenize_session``'s ``seed``)."""
    prefix = f"{sha256}-"
    for key, session in reversed(_RECENT.items()):
        if key.startswith(prefix) and key.endswith(f"-v{CACHE_VERSION}"):
            return session
    for path in _named(Path(cache_dir), f"{sha256}-", f"-v{CACHE_VERSION}.pickle"):
        found = read_pickle(path, Session)
        if found is not None:
            return found
    return None


def _key(path: str, sha256: str | None) -> str:
    stat = os.stat(path)
    # size and mtime catch a file rewritten in place under a digest computed earlier
    return f"{sha256 or file_sha256(path)}-{stat.st_size}-{int(stat.st_mtime)}-v{CACHE_VERSION}"


def keep_parsed(
    path: str | os.PathLike[str],
    session: Session,
    *,
    cache_dir: str | os.PathLike[str],
    sha256: str | None = None,
    mirror: CacheMirror | None = None,
) -> Path | None:
    """Hand a session just parsed from ``path`` (by an upload's check) to the first
    ``cached_session`` of the same file, in any process sharing ``cache_dir``: it then
    prepares that copy instead of reading and parsing the file again. The path written, or
    None when the disk refused (the replay then parses the file itself)."""
    path = os.fspath(path)
    target = Path(cache_dir) / f"{_key(path, sha256)}{PARSED_SUFFIX}"
    upload, session.upload = session.upload, None  # open archive handles do not pickle
    try:
        # the pickler's memo holds a tuple per object: collections would walk the session
        with gc_paused():
            if not stream_pickle_atomic(target, session):
                return None
    finally:
        session.upload = upload
    if mirror is not None:
        mirror.store(target.name, target)
    return target


def _remember(key: str, session: Session, size: int) -> None:
    session.source_bytes = size
    if size > RECENT_MAX_BYTES:
        return  # its replay holds it; once done, it goes
    _RECENT[key] = session
    _RECENT.move_to_end(key)
    _RECENT_BYTES[key] = size
    while len(_RECENT) > RECENT_LIMIT:
        _RECENT_BYTES.pop(_RECENT.popitem(last=False)[0], None)


def _make_room(size: int) -> None:
    """Let the oldest sessions kept in memory go until they and a session read from files of
    ``size`` bytes fit ``RECENT_MAX_BYTES``."""
    while _RECENT and sum(_RECENT_BYTES.get(k, 0) for k in _RECENT) + size > RECENT_MAX_BYTES:
        _RECENT_BYTES.pop(_RECENT.popitem(last=False)[0], None)


def _files_bytes(paths: Sequence[str | os.PathLike[str]]) -> int:
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):  # a file gone: its reading says so
            total += os.path.getsize(path)
    return total


def _reading_state_name(sha256: str) -> str:
    return f"{sha256}.reading-v{STATE_VERSION}.pickle"


@gc_paused()
def load_growing(
    path: str | os.PathLike[str],
    name: str | None = None,
    *,
    cache_dir: str | os.PathLike[str],
    sha256: str,
    earlier_sha256: str | None = None,
    mirror: CacheMirror | None = None,
) -> tuple[Session, bool]:
    """``load_session`` of a session file that grows (a live session): its records are read on
    from where the read of its earlier version (digest ``earlier_sha256``, the first bytes of
    this one) stopped, when that read left its state in ``cache_dir`` (or the mirror), else
    from the first byte; the state this read ends in is left there for the next append, under
    ``sha256`` (the earlier one moved there and this read's frame appended to it). The session
    is the one a whole read makes; the second value says whether the read was resumed.
    The garbage collector is paused meanwhile (``disk_cache.gc_paused``).
    """
    folder = Path(cache_dir)
    earlier = folder / _reading_state_name(earlier_sha256) if earlier_sha256 else None
    saved = None
    in_memory = _take_kept_read(earlier) if earlier is not None else None
    if earlier is not None and in_memory is None:
        saved = read_bytes(earlier)
        if saved is None and mirror is not None and mirror.fetch(earlier.name, earlier):
            saved = read_bytes(earlier)
    size = _files_bytes([path])
    with _reading(size):
        session, growing = load_growing_session(path, name, saved=saved, kept=in_memory)
    session.source_bytes = size
    target = folder / _reading_state_name(sha256)
    kept = False
    if growing.state is not None and target != earlier:
        # a read-only or full disk only costs the next append a whole read
        if growing.resumed and earlier is not None:
            kept = _append_frame(earlier, target, growing.state)
        else:
            kept = write_bytes_atomic(target, growing.state)
    if kept and mirror is not None:
        mirror.store(target.name, target)
    if kept and growing.kept is not None:
        _keep_read(target, growing.kept, size)
    if earlier is not None and earlier != target:
        earlier.unlink(missing_ok=True)
        if mirror is not None:
            mirror.discard(earlier.name)
    return session, growing.resumed


#: Reads of growing sessions kept in this process's memory (``KeptRead``), by the path of the
#: state they wrote, with that file's size and modification time: the next append's read goes
#: on from one without unpickling its records, and extends its threads. The state file stays
#: the truth: a read kept of a state file that changed since (or is gone) is not used.
_KEPT_READS: OrderedDict[str, tuple[tuple[int, int], KeptRead]] = OrderedDict()
#: growing sessions whose reads are kept at most, and the file bytes they may hold
KEPT_READS_LIMIT = 2
KEPT_READS_MAX_BYTES = 256 * 1024 * 1024
_KEPT_BYTES: dict[str, int] = {}
#: a threaded server's appends of two sessions keep and take reads at once
_KEPT_LOCK = threading.Lock()


#: Reads of growing sessions' versions kept by a worker (``_read_version``), by digest.
_VERSION_READS: OrderedDict[str, KeptRead] = OrderedDict()
_VERSION_BYTES: dict[str, int] = {}


@contextlib.contextmanager
def _reading(size: int) -> Iterator[None]:
    """Read a session of ``size`` file bytes (``kept_cache.reading``); one too large to keep
    beside anything (``kept_cache.fits``) lets every kept read go first, as the kept caches
    do: its process holds that session only."""
    if not kept_cache.fits(size):
        with _KEPT_LOCK:
            for reads, sizes in ((_KEPT_READS, _KEPT_BYTES), (_VERSION_READS, _VERSION_BYTES)):
                reads.clear()
                sizes.clear()
    with kept_cache.reading(size):
        yield


def _take_version_read(sha256: str) -> KeptRead | None:
    with _KEPT_LOCK:
        _VERSION_BYTES.pop(sha256, None)
        return _VERSION_READS.pop(sha256, None)


def _keep_version_read(sha256: str, read: KeptRead, size: int) -> None:
    if size > KEPT_READS_MAX_BYTES:
        return
    with _KEPT_LOCK:
        _VERSION_READS[sha256] = read
        _VERSION_BYTES[sha256] = size
        while (
            len(_VERSION_READS) > KEPT_READS_LIMIT
            or sum(_VERSION_BYTES.values()) > KEPT_READS_MAX_BYTES
        ):
            _VERSION_BYTES.pop(_VERSION_READS.popitem(last=False)[0], None)


def _state_signature(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def _take_kept_read(state: Path) -> KeptRead | None:
    """The read kept in memory that wrote the state file ``state``, taken out (a read goes on
    from it, changing it), if that file is still as it wrote it."""
    with _KEPT_LOCK:
        found = _KEPT_READS.pop(str(state), None)
        _KEPT_BYTES.pop(str(state), None)
    if found is None or found[0] != _state_signature(state):
        return None
    return found[1]


def _keep_read(state: Path, read: KeptRead, size: int) -> None:
    signature = _state_signature(state)
    if signature is None or size > KEPT_READS_MAX_BYTES:
        return
    key = str(state)
    with _KEPT_LOCK:
        _KEPT_READS[key] = (signature, read)
        _KEPT_BYTES[key] = size
        while (
            len(_KEPT_READS) > KEPT_READS_LIMIT or sum(_KEPT_BYTES.values()) > KEPT_READS_MAX_BYTES
        ):
            _KEPT_BYTES.pop(_KEPT_READS.popitem(last=False)[0], None)


def _append_frame(earlier: Path, target: Path, frame: bytes) -> bool:
    """The earlier version's state, moved to ``target`` with ``frame`` appended (a write cut
    short leaves a frame that does not load: the next read then starts from the first byte)."""
    try:
        os.replace(earlier, target)
        with target.open("ab") as fh:
            fh.write(frame)
    except OSError:
        target.unlink(missing_ok=True)
        return False
    return True
