"""A session parsed once and tokenized once: the engine's session cache, token counts included.

``load_session_cached`` is ``input.session_cache.cached_session`` with every block's token
counts and cache key filled before the session is pickled, so a later replay of the same file
(in this process or another worker) counts nothing again.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from contextlab.engine.input.session import Session
from contextlab.engine.input.session_cache import CacheMirror, cached_session
from contextlab.engine.input.upload_chain import EarlierUpload

from .tokens import TiktokenCounter, TokenCounter, block_key, block_rough, block_tokens


def tokenize_session(session: Session, counter: TokenCounter | None = None) -> int:
    """Fill every block's token counts and cache key; returns the number of blocks."""
    counter = counter or TiktokenCounter()
    count = 0
    for thread in session.threads:
        for message in thread.messages:
            for block in message.blocks:
                block_tokens(block, counter)
                block_rough(block)
                block_key(block)
                count += 1
    return count


def load_session_cached(
    path: str | os.PathLike[str],
    *,
    cache_dir: str | os.PathLike[str],
    name: str | None = None,
    sha256: str | None = None,
    earlier: Sequence[str | os.PathLike[str] | EarlierUpload] = (),
    mirror: CacheMirror | None = None,
) -> Session:
    """Like ``load_session`` but served from (and written to) ``cache_dir`` when possible,
    tokenized (``tokenize_session``); ``mirror`` shares the cache with hosts on other disks.

    With ``earlier`` (the uploads this one continues, earliest first), the session is the
    stitched one (``upload_chain.open_upload_chain``), cached under a key made of every file's;
    an earlier file that is gone is left out of both.
    A cache file that cannot be read (truncated, written by another engine version) is ignored
    and rewritten; the cache never changes what a replay computes.
    """
    return cached_session(
        path,
        cache_dir=cache_dir,
        prepare=tokenize_session,
        name=name,
        sha256=sha256,
        earlier=earlier,
        mirror=mirror,
    )
