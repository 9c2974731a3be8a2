"""The embedded broker of ``make run``: kombu's filesystem transport with whole-file writes.

kombu's own ``filesystem`` transport creates a message file in the queue folder, then locks it,
then writes it; the worker lists the folder and reads files without taking the lock. A worker
that looks between the create and the write reads an empty or partial message (seen: the
worker died on an empty message right after an upload, and the run waited ~15 minutes). Here a
message is written whole under a name the reader skips (no ``.<queue>.msg`` suffix) and renamed
into place: a rename within one folder is atomic, so the worker sees the complete file or none.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    # the signature of kombu's filesystem Channel._put (itself wider than its base's)
    def _put(self, queue: str, message: Any, **kwargs: Any) -> None:  # type: ignore[override]
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        # a leading dot: partition(".") gives no "<queue>.msg" tail, so the reader passes it by
        staging = os.path.join(self.data_folder_out, f".writing-{uuid.uuid4()}")
        try:
            with open(staging, "wb") as handle:
                handle.write(str_to_bytes(dumps(message)))
            os.replace(staging, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(staging)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
