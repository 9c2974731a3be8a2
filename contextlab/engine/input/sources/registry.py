"""The source adapters ContextLab knows, and the one that reads a given upload.

An upload is offered to every adapter: each says from the first records of its first file how
sure it is that they are its agent's (``SourceAdapter.detect``), and the surest one parses it.
When none recognises the content, the first adapter reads it anyway, so the reasons nothing is
usable (not JSON, not a transcript record) are still reported line by line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from contextlab.engine.input.disk_cache import gc_paused
from contextlab.engine.input.json_line import decode_json_line
from contextlab.engine.input.loading import Upload, read_head
from contextlab.engine.input.model import deflating
from contextlab.engine.input.session import Session
from contextlab.engine.input.sources import SourceAdapter
from contextlab.engine.input.upload_chain import EarlierUpload, open_upload_chain

from .claude_code.adapter import ClaudeCodeAdapter
from .claude_code.adapter import build_session as build_claude_code_session
from .claude_code.extending import KeptRead
from .claude_code.growing import GrowingParse
from .codex.adapter import CodexAdapter

#: Every adapter, the default (the one that reads what no adapter recognises) first.
ADAPTERS: tuple[SourceAdapter, ...] = (ClaudeCodeAdapter(), CodexAdapter())
#: Lines of an upload's first file each adapter sees to recognise it.
HEAD_LINES = 20
#: Sessions stored in at least this many bytes are parsed with their long texts deflated
#: (``model.deflating``): where memory decides whether a replay fits a worker at all, it is
#: worth the few per cent of time; below, the replay's speed is what counts.
DEFLATE_FROM_BYTES = 128 * 1024**2


def head_records(upload: Upload) -> list[Any]:
    """The JSON values of the first lines of the upload's session file (else of its first
    subagent's), lines that are not JSON left out."""
    first = upload.main or next(iter(upload.subagents), None)
    if first is None:
        return []
    records = []
    for line in read_head(first, HEAD_LINES):
        try:
            records.append(decode_json_line(line)[0])
        except ValueError:
            continue
    return records


def detect_source(upload: Upload, adapters: Sequence[SourceAdapter] = ADAPTERS) -> SourceAdapter:
    """The adapter surest that the upload is its agent's (the first one on a tie or when none
    recognises it)."""
    head = head_records(upload)
    best, best_confidence = adapters[0], 0.0
    for adapter in adapters:
        confidence = adapter.detect(head)
        if confidence > best_confidence:
            best, best_confidence = adapter, confidence
    return best


def build_session(upload: Upload) -> Session:
    """Parse every file of an upload into threads, with the adapter of its agent.

    Raises ``TranscriptError`` when nothing usable was found; otherwise problems are returned on
    the session and the replay goes on with what was valid.
    """
    return detect_source(upload).parse(upload)


def load_session(
    path: str | os.PathLike[str],
    name: str | None = None,
    *,
    earlier: Sequence[str | os.PathLike[str] | EarlierUpload] = (),
) -> Session:
    """Open and parse an upload (see ``loading.open_upload`` for the accepted forms); with
    ``earlier``, stitched to the uploads it continues (``upload_chain.open_upload_chain``)."""
    upload = open_upload_chain(path, earlier, name)
    try:
        # a session is a large graph built in one go, with no garbage to collect meanwhile
        with deflating(os.path.getsize(path) >= DEFLATE_FROM_BYTES), gc_paused():
            return build_session(upload)
    except BaseException:
        upload.close()
        raise


def load_growing_session(
    path: str | os.PathLike[str],
    name: str | None = None,
    *,
    saved: bytes | None = None,
    kept: KeptRead | None = None,
) -> tuple[Session, GrowingParse]:
    """``load_session`` of a session file that grows (a live session): a Claude Code main file
    is read on from ``saved`` (the ``GrowingParse.state`` of its earlier version) when that
    fits it, or from ``kept`` (that version's read kept in memory), and the returned
    ``GrowingParse`` holds the state to read on from next time (None for another agent's
    file, which is read whole)."""
    upload = open_upload_chain(path, (), name)
    growing = GrowingParse(saved, kept)
    try:
        adapter = detect_source(upload)
        if isinstance(adapter, ClaudeCodeAdapter):
            return build_claude_code_session(upload, growing), growing
        return adapter.parse(upload), growing
    except BaseException:
        upload.close()
        raise
