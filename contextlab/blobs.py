"""Every file a worker reads or writes, through Django's ``STORAGES["default"]``.

Stored files are named by their role: ``uploads/<owner>/<sha256><suffix>`` (a transcript,
content-addressed, never rewritten), ``session-cache/<key>.pickle`` (a parsed session),
``checkpoints/run-<id>.pickle`` (a replay waiting for a summary) and ``incoming/<id>/…`` (the
pieces of a resumable upload). With the local filesystem (``STORAGE_BACKEND=filesystem``, the
default) the storage's folder is MEDIA_ROOT and a stored file is read where it lies. With an
object store (``s3``) no process shares a disk with another: the engine reads by path, so a
file it needs is copied once into this host's own ``WORKER_DIR`` (``local_path``), and the
copies are dropped least recently used first past ``WORKER_DIR_MAX_BYTES``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol, cast

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages
from storages.backends.s3 import S3Storage
from storages.utils import clean_name

from contextlab.engine import disk_cache

logger = logging.getLogger(__name__)

#: The modification time of every local copy of an object: a parsed session is cached under
#: the file's size and mtime (``engine.input.session_cache``), and content-addressed files have
#: no time of their own, so every host gets the same key for the same bytes.
PINNED_MTIME = 1_000_000_000
#: Bytes read or written at a time when a file is streamed.
COPY_CHUNK = 8 * 1024**2


def storage() -> Storage:
    return storages["default"]


def is_local() -> bool:
    """Whether stored files lie on this host's disk (the filesystem backend)."""
    return isinstance(storage(), FileSystemStorage)


def _local_root() -> Path:
    return Path(storage().path(""))  # type: ignore[no-untyped-call]


def copies_dir() -> Path:
    """This host's copies of stored objects (object store only)."""
    return Path(settings.WORKER_DIR) / "objects"


def spool_dir(name: str) -> Path:
    """Where a file that will be stored as ``name`` is written first: beside its final place
    on the filesystem backend (a rename then stores it), else among this host's copies (it
    becomes the copy once stored)."""
    root = _local_root() if is_local() else copies_dir()
    folder = (root / name).parent
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def store_file(local: Path, name: str) -> Path:
    """Store the finished file ``local`` (written in ``spool_dir(name)``) as ``name``; returns
    the local path it is read from afterwards. The file is moved, never copied, on disk."""
    if is_local():
        final = _local_root() / name
        os.replace(local, final)
        return final
    with local.open("rb") as fh:
        storage().save(name, File(fh, name=name))
    copy = copies_dir() / name
    copy.parent.mkdir(parents=True, exist_ok=True)
    os.utime(local, (time.time(), PINNED_MTIME))
    os.replace(local, copy)
    _prune_copies()
    return copy


def local_path(name: str) -> Path:
    """A path on this host holding the stored file ``name`` (copied from the object store
    the first time). Raises ``FileNotFoundError`` when nothing is stored under that name."""
    if is_local():
        return _local_root() / name
    copy = copies_dir() / name
    if copy.is_file():
        with contextlib.suppress(OSError):
            os.utime(copy, (time.time(), PINNED_MTIME))  # atime: recently used; mtime pinned
        return copy
    fetch(name, copy)
    _prune_copies(keep=copy)
    return copy


def fetch(name: str, target: Path) -> None:
    """Copy stored ``name`` to ``target`` atomically (a unique temporary file, then a rename),
    streamed. Raises ``FileNotFoundError`` when it is not stored."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".fetch-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out, open_stored(name) as source:
            shutil.copyfileobj(source, out, COPY_CHUNK)
        os.utime(tmp, (time.time(), PINNED_MTIME))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def open_stored(name: str) -> IO[bytes]:
    """The stored file ``name`` for reading, streamed (never held whole)."""
    store = storage()
    if isinstance(store, S3Storage):
        return _open_object(store, name)
    try:
        return store.open(name, "rb")  # type: ignore[return-value]
    except FileNotFoundError:
        raise
    except OSError as exc:  # the object store's "no such key"
        raise FileNotFoundError(name) from exc
    except Exception as exc:
        if _is_missing(exc):
            raise FileNotFoundError(name) from exc
        raise


def _open_object(store: S3Storage, name: str) -> IO[bytes]:
    """The object's body as it arrives, from one GET. The storage's own ``open`` asks for the
    object's metadata first (a HEAD), then spools the whole object to a temporary file with
    boto3's managed download (another HEAD, then the GET) before the first byte is read: three
    round trips to the object store where one does, and every byte written to disk once more.
    A worker reads two objects per run (the upload and its parsed session), so this is four
    round trips fewer per run. Asked of the storage's client, not of a boto3 resource made
    for the key (``bucket.Object(key).get()``): the same request and body for about half the
    worker's CPU (4 ms against 9 ms for a 1.5 MB object, 2.6 against 3.5 for a missing one)."""
    try:
        response = _client(store).get_object(Bucket=store.bucket_name, Key=_key(store, name))
    except Exception as exc:
        if _is_missing(exc):
            raise FileNotFoundError(name) from exc
        raise
    return cast(IO[bytes], response["Body"])


def _key(store: S3Storage, name: str) -> str:
    """The object key of stored ``name`` (the storage's own name -> key, with its location)."""
    return cast(str, store._normalize_name(clean_name(name)))


def connect() -> None:
    """Make this thread's object-store client now (a worker process at start-up), not in its
    first run: boto3 builds it from its service models, about 0.2 s of CPU (bench/README.md,
    round ``hosts28``). No request is sent. Nothing to make on the filesystem backend."""
    store = storage()
    if isinstance(store, S3Storage):
        _client(store)


def _client(store: S3Storage) -> Any:
    """The storage's boto3 client (its connection's, one per thread)."""
    return store.connection.meta.client


def _delete_stored(name: str) -> None:
    """``storage().delete(name)``; a missing file is fine. From an object store, one request of
    the storage's client (the storage makes a boto3 resource for the key first: 4.5 ms of the
    worker's CPU against 2.6)."""
    store = storage()
    if not isinstance(store, S3Storage):
        with contextlib.suppress(FileNotFoundError):
            store.delete(name)
        return
    try:
        _client(store).delete_object(Bucket=store.bucket_name, Key=_key(store, name))
    except Exception as exc:
        if _status(exc) == 404:
            return
        raise


def _status(exc: Exception) -> int | None:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status if isinstance(status, int) else None


def _is_missing(exc: Exception) -> bool:
    response = getattr(exc, "response", None)
    code = (response or {}).get("Error", {}).get("Code") if isinstance(response, dict) else None
    return code in {"404", "NoSuchKey", "NotFound"}


class Readable(Protocol):
    """Anything with ``read(n)``: a file, a request body."""

    def read(self, size: int = -1, /) -> bytes: ...


def save_stream(name: str, stream: Readable) -> None:
    """Store what ``stream`` yields as ``name``, streamed (the object store uploads it in
    parts; nothing is held whole)."""
    storage().save(name, File(cast(IO[bytes], stream), name=name))


def write_bytes(name: str, data: bytes, *, head: bytes = b"") -> bool:
    """Store small ``data`` as ``name`` (a checkpoint), so that a reader sees the old file or
    the new one, never half of one; False when the storage refused. ``head``: bytes stored
    before ``data`` (on a disk, written one after the other, not joined in memory first)."""
    if is_local():
        return disk_cache.write_parts_atomic(_local_root() / name, (head, data))
    try:
        save_stream(name, io.BytesIO(head + data if head else data))
    except Exception:
        logger.warning("could not store %s", name, exc_info=True)
        return False
    return True


def read_bytes(name: str) -> bytes | None:
    """Stored ``name``'s bytes, or None when it is not there (or cannot be read)."""
    try:
        with open_stored(name) as fh:
            return fh.read()
    except Exception:
        return None


def read_bytes_after(name: str, head: bytes) -> bytes | None:
    """Stored ``name``'s bytes after ``head``, or None when it is not there, cannot be read
    or does not start with ``head`` (read past it, not sliced off a copy of the whole)."""
    try:
        with open_stored(name) as fh:
            if fh.read(len(head)) != head:
                return None
            return fh.read()
    except Exception:
        return None


def exists(name: str) -> bool:
    return bool(storage().exists(name))


def delete(name: str) -> None:
    """Remove ``name`` from the storage and this host's copy of it; a missing one is fine."""
    _delete_stored(name)
    if not is_local():
        (copies_dir() / name).unlink(missing_ok=True)


def listdir(prefix: str) -> tuple[list[str], list[str]]:
    """``(folders, files)`` stored under ``prefix``; both empty when there is nothing."""
    try:
        folders, files = storage().listdir(prefix)
    except FileNotFoundError:
        return [], []
    return list(folders), list(files)


def files_written(prefix: str) -> list[tuple[str, datetime]]:
    """The files stored right under ``prefix`` (as ``listdir``'s), each with its last
    modification time as ``storage().get_modified_time`` gives it. From an object store, one
    listing says both (each key's ``LastModified``, to the second as a HEAD's
    ``Last-Modified`` says it), where asking each file's time is a request per file."""
    store = storage()
    if not isinstance(store, S3Storage):
        _folders, names = listdir(prefix)
        written = []
        for name in names:
            try:
                written.append((name, store.get_modified_time(prefix + name)))
            except Exception:  # removed meanwhile: nothing to say of it
                logger.warning("could not read the time of %s", prefix + name, exc_info=True)
        return written
    folder = _key(store, prefix)
    if folder and not folder.endswith("/"):
        folder += "/"
    pages = _client(store).get_paginator("list_objects_v2")
    found = []
    for page in pages.paginate(Bucket=store.bucket_name, Delimiter="/", Prefix=folder):
        for entry in page.get("Contents", ()):
            if entry["Key"] != folder:
                found.append((entry["Key"][len(folder) :], _as_header(entry["LastModified"])))
    return found


def _as_header(written: datetime) -> datetime:
    """A listing's ``LastModified`` (to the millisecond) as a HEAD's ``Last-Modified`` header
    says it (an HTTP date: whole seconds); naive in UTC where the storage gives naive times
    (``USE_TZ`` off), as ``S3Storage.get_modified_time``."""
    written = written.replace(microsecond=0)
    if settings.USE_TZ or written.tzinfo is None:
        return written
    return written.astimezone(UTC).replace(tzinfo=None)


def new_spool_name(folder: Path, suffix: str) -> Path:
    return folder / f".partial-{uuid.uuid4().hex}{suffix}"


def _copies() -> Iterator[tuple[float, int, Path]]:
    root = copies_dir()
    if not root.is_dir():
        return
    for path in root.rglob("*"):
        if path.is_file() and not path.name.startswith((".fetch-", ".partial-")):
            with contextlib.suppress(OSError):
                stat = path.stat()
                yield stat.st_atime, stat.st_size, path


def _prune_copies(keep: Path | None = None) -> None:
    """Drop this host's least recently used copies past WORKER_DIR_MAX_BYTES; the engine
    holds a file it reads open, so removing a copy never cuts a reader short (POSIX)."""
    limit = settings.WORKER_DIR_MAX_BYTES
    if not limit:
        return
    copies = sorted(_copies(), key=lambda item: item[0])
    total = sum(size for _, size, _ in copies)
    for _, size, path in copies:
        if total <= limit:
            break
        if path == keep:
            continue
        path.unlink(missing_ok=True)
        total -= size


class SessionCacheMirror:
    """The parsed-session cache's shared home in the object store (``session-cache/``), for
    hosts that share no disk (``engine.input.session_cache.CacheMirror``). Every failure only
    costs a parse: it is logged and swallowed."""

    prefix = "session-cache/"

    def fetch(self, name: str, target: Path) -> bool:
        try:
            fetch(self.prefix + name, target)
        except FileNotFoundError:
            return False
        except Exception:
            logger.warning("could not fetch cached session %s", name, exc_info=True)
            return False
        return True

    def store(self, name: str, source: Path) -> None:
        try:
            with source.open("rb") as fh:
                if not _put_file(self.prefix + name, fh, source.stat().st_size):
                    save_stream(self.prefix + name, fh)
        except Exception:
            logger.warning("could not store cached session %s", name, exc_info=True)

    def discard(self, name: str) -> None:
        try:
            _delete_stored(self.prefix + name)
        except Exception:
            logger.warning("could not remove cached session %s", name, exc_info=True)


def _put_file(name: str, fh: IO[bytes], size: int) -> bool:
    """Store the open local file ``fh`` (``size`` bytes) as ``name`` with one PUT of the object
    store's client, with the parameters the storage's ``save`` gives the object (its content
    type, ACL, object parameters); False where ``save_stream`` is the way (another storage,
    gzip on, a file the storage would upload in parts). The storage's ``save`` goes through
    boto3's managed transfer: 10 ms of the worker's CPU for a 1.5 MB parsed session against
    5.5 ms for the same PUT (a run stores one)."""
    store = storage()
    if not isinstance(store, S3Storage) or store.gzip:
        return False
    config = store.transfer_config
    if size >= getattr(config, "multipart_threshold", 0):
        return False
    key = _key(store, name)
    params = store._get_write_parameters(key)
    _client(store).put_object(Bucket=store.bucket_name, Key=key, Body=fh, **params)
    return True


def session_cache_mirror() -> SessionCacheMirror | None:
    """The mirror of the parsed-session cache: none on the filesystem backend, where every
    process already shares SESSION_CACHE_DIR's disk."""
    return None if is_local() else SessionCacheMirror()
