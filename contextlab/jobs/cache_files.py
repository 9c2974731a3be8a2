"""Session cache files nobody reads any more, removed by the periodic recovery.

``SESSION_CACHE_DIR`` holds a parsed, tokenized copy of every session replayed (one more per
append to a live session, one more per engine ``CACHE_VERSION``), the parsed copies an upload's
check hands to the first replay, and the reading state a live session's next append goes on
from (``*.reading-v*.pickle``), which stays once the session stops growing. Nothing removed
them. A file neither written nor read for SESSION_CACHE_STALE_AFTER seconds is removed here,
unless its session has a run queued or running; with an object store, the same goes for the
mirror's copies (``session-cache/``), at most once an hour.
Deleting a cache file costs the next replay a parse, never a result; a reader holds the file
open (POSIX), so removing it never cuts one short.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from datetime import UTC
from pathlib import Path

from django.conf import settings
from django.core.cache import cache

from contextlab import blobs
from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript

logger = logging.getLogger(__name__)

#: a cache file's name starts with its session file's sha256 (a chain's digest for a session
#: stitched to the ones it continues)
_DIGEST = re.compile(r"^([0-9a-f]{64})[-.]")
#: the Django cache key that lets one process in this many seconds list the mirror
#: (``cache.add``): a listing costs a request per 1,000 objects (each object's time was a
#: request of its own before ``blobs.files_written``)
MIRROR_PRUNE_KEY = "session-cache:mirror-pruned"
MIRROR_PRUNE_EVERY = 3600


def _in_use() -> set[str]:
    """The digests of the sessions a queued or running run reads (and of the version before a
    live session's last append, whose token counts its replay reuses)."""
    rows = (
        Transcript.objects.filter(runs__status__in=(Run.Status.QUEUED, Run.Status.RUNNING))
        .values_list("sha256", "previous_sha256")
        .distinct()
    )
    return {digest for pair in rows for digest in pair if digest}


def _stale(name: str, last_used: float, cutoff: float, in_use: set[str]) -> bool:
    match = _DIGEST.match(name)
    return last_used < cutoff and not (match and match.group(1) in in_use)


def remove_stale_session_cache(*, now: float | None = None) -> list[str]:
    """Delete this host's session cache files (and, with an object store, the mirror's) that
    went unused for SESSION_CACHE_STALE_AFTER seconds and whose session no active run
    reads; returns their names."""
    now = now if now is not None else time.time()
    cutoff = now - settings.SESSION_CACHE_STALE_AFTER
    in_use = _in_use()
    removed = []
    folder = Path(settings.SESSION_CACHE_DIR)
    for path in folder.iterdir() if folder.is_dir() else ():
        # gone meanwhile (another host's pass, a replay's clean-up), or not ours: leave it
        with contextlib.suppress(OSError):
            stat = path.stat()
            # a read refreshes the access time (at least daily under relatime), a write the
            # modification time: whichever is later is the file's last use
            if path.is_file() and _stale(
                path.name, max(stat.st_atime, stat.st_mtime), cutoff, in_use
            ):
                path.unlink()
                removed.append(path.name)
    if blobs.session_cache_mirror() is not None:
        removed += prune_mirror(cutoff, in_use)
    if removed:
        logger.info(
            "removed %s session cache file(s) unused for %ss: %s",
            len(removed),
            settings.SESSION_CACHE_STALE_AFTER,
            ", ".join(removed[:10]),
        )
    return removed


def prune_mirror(cutoff: float, in_use: set[str]) -> list[str]:
    """The object store's copies past the cutoff (by their last write: a store has no access
    time), listed by one process in MIRROR_PRUNE_EVERY seconds. One listing gives every
    copy's time (``blobs.files_written``), not a request per copy."""
    if not cache.add(MIRROR_PRUNE_KEY, 1, timeout=MIRROR_PRUNE_EVERY):
        return []
    prefix = blobs.SessionCacheMirror.prefix
    removed = []
    try:
        listed = blobs.files_written(prefix)
    except Exception:
        logger.warning("could not list the cached sessions", exc_info=True)
        return []
    for name, written in listed:
        last = written.timestamp() if written.tzinfo else written.replace(tzinfo=UTC).timestamp()
        if _stale(name, last, cutoff, in_use):
            blobs.SessionCacheMirror().discard(name)
            removed.append(prefix + name)
    return removed
