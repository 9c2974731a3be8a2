"""An upload with the uploads it continues: a resumed session's files, read together.

A session resumed or continued in a new file is uploaded apart from the file it continues; the
web side knows which uploads those are and hands them over as ``EarlierUpload``. Their session
files join the upload's, so a source adapter can read them as one conversation.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from .loading import Upload, open_upload
from .model import Problem, TranscriptError


@dataclass(frozen=True)
class EarlierUpload:
    """An upload that another one continues: a session resumed or continued in a new file."""

    path: str | os.PathLike[str]
    #: the name shown for its file (the stored path can be an opaque digest)
    name: str | None = None
    #: its SHA-256 when the caller knows it, so the session cache need not read it again
    sha256: str | None = None


def open_upload_chain(
    path: str | os.PathLike[str],
    earlier: Sequence[str | os.PathLike[str] | EarlierUpload] = (),
    name: str | None = None,
) -> Upload:
    """``open_upload`` of ``path`` with the session files of the uploads it continues.

    Each earlier upload's session files (its main file, and the other session files of an
    archive) become siblings of the main one, so the source adapter reads the files that link
    (for Claude Code, by ``parentUuid``) as one conversation, earliest first; its tool-results
    are added where the main upload has none of the same id. Closing the upload closes every earlier one. An
    earlier upload that cannot be opened (removed meanwhile, unreadable) is reported and left
    out: the session is read as far as the remaining files reach.
    """
    upload = open_upload(path, name)
    try:
        for item in earlier:
            if not isinstance(item, EarlierUpload):
                item = EarlierUpload(item)
            display = item.name or os.path.basename(os.fspath(item.path))
            try:
                older = open_upload(item.path, display)
            except TranscriptError as exc:
                upload.problems.append(
                    Problem(0, "earlier_upload_unreadable", f"not read: {exc}", display, "warning")
                )
                continue
            upload._closers.append(older.close)
            upload.siblings.extend(f for f in (older.main, *older.siblings) if f is not None)
            for tool_use_id, opener in older.tool_results.items():
                upload.tool_results.setdefault(tool_use_id, opener)
    except BaseException:
        upload.close()
        raise
    return upload
