"""Upload handler that enforces UPLOAD_MAX_BYTES while the body streams in."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, SkipFile

#: request.META key listing the names of files cut off for being too large
OVERSIZE_KEY = "contextlab.oversize_uploads"
#: request.META key listing files whose body ended before the file did (a dropped connection)
INCOMPLETE_KEY = "contextlab.incomplete_uploads"


class SizeLimitUploadHandler(FileUploadHandler):
    """Counts each file's bytes and skips the file once it passes the limit.

    Skipping (rather than resetting the connection) lets the view answer with a readable
    message that names the limit; the temporary file written so far is deleted by Django.
    """

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.received = 0
        self.too_large = False

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self.received += len(raw_data)
        if self.received > settings.UPLOAD_MAX_BYTES:
            if self.request is not None:
                self.request.META.setdefault(OVERSIZE_KEY, []).append(self.file_name)
            self.too_large = True
            raise SkipFile()
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None

    def upload_interrupted(self) -> None:
        # Django calls this when the request body ended in the middle of a file; it then
        # drops the partial file, and the view says why instead of "no file".
        if getattr(self, "too_large", False):
            return  # already reported as too large
        if self.request is not None and getattr(self, "file_name", None):
            self.request.META.setdefault(INCOMPLETE_KEY, []).append(self.file_name)
