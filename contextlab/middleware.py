"""Project-wide HTTP middleware."""

from __future__ import annotations

import json
from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse

from contextlab import errors
from contextlab.http import body_stalled
from contextlab.jobs import lifecycle


class ContentSecurityPolicyMiddleware:
    """Adds a strict Content-Security-Policy: transcripts are untrusted, scripts only from us."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy: str = settings.CONTENT_SECURITY_POLICY
        if policy:
            response.headers.setdefault("Content-Security-Policy", policy)
        permissions: str = settings.PERMISSIONS_POLICY
        if permissions:
            response.headers.setdefault("Permissions-Policy", permissions)
        return response


class BodyIdleTimeoutMiddleware:
    """Bounds how long a request body may stall: under gunicorn, a read of the body that waits
    more than ``REQUEST_BODY_IDLE_TIMEOUT`` seconds for its next byte fails, and the request
    answers 408 (nothing half-stored: an upload's piece is dropped, the client sends it again).

    Without it, a client that vanishes mid-body without closing its connection (a dropped
    Wi-Fi sends nothing) holds a sync worker, and the database connection its view opened,
    until gunicorn's worker timeout kills the worker (``--timeout 300``). The bound is per
    read, not per request: a slow upload that keeps sending goes on. It is lifted before the
    response is written, so a slow download is not cut. Other servers (``runserver``) give no
    socket and are left as they are."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        seconds: int = settings.REQUEST_BODY_IDLE_TIMEOUT
        sock = request.META.get("gunicorn.socket")
        if not seconds or sock is None or not _has_body(request):
            return self.get_response(request)
        sock.settimeout(seconds)
        try:
            return self.get_response(request)
        finally:
            sock.settimeout(None)  # blocking again for the response and the next request

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not body_stalled(exception):
            return None
        response = errors.error_response(
            request,
            408,
            f"The request's body stalled: no byte came for {settings.REQUEST_BODY_IDLE_TIMEOUT} "
            "s, so nothing of it was kept. Send it again.",
            with_context=False,
        )
        response["Connection"] = "close"  # the rest of the body must not be taken as a request
        return response


def _has_body(request: HttpRequest) -> bool:
    declared = request.META.get("CONTENT_LENGTH") or ""
    chunked = "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
    return chunked or (declared.isdigit() and int(declared) > 0)


#: what a multipart body may hold beyond its one file: the form fields and part headers
MULTIPART_OVERHEAD_BYTES = 1024 * 1024


class DeclaredBodySizeMiddleware:
    """Refuses at once a request whose declared ``Content-Length`` is over what any route
    accepts, before anything waits for its body: a client that only declares a huge body would
    otherwise hold a sync worker until its timeout. A file upload carries one file
    (``UPLOAD_MAX_BYTES``) and its fields; any other body is held to Django's own
    ``DATA_UPLOAD_MAX_MEMORY_SIZE``. Bodies that lie about their size are still cut while they
    stream in (``transcripts.uploads``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        content_type = request.META.get("CONTENT_TYPE", "")
        multipart = content_type.startswith("multipart/form-data")
        # a piece of a resumable (tus) upload, streamed to the storage as it comes
        piece = content_type.startswith("application/offset+octet-stream")
        # bytes appended to a live session (``transcripts.live``), read up to their own limit
        appended = content_type.startswith("application/octet-stream") and request.path.endswith(
            "/append"
        )
        limit = (
            settings.UPLOAD_MAX_BYTES + MULTIPART_OVERHEAD_BYTES
            if multipart
            else settings.UPLOAD_CHUNK_MAX_BYTES
            if piece
            else settings.LIVE_APPEND_MAX_BYTES
            if appended
            else settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        )
        if limit is not None and declared > limit:
            advice = (
                "Upload one transcript file per request."
                if multipart
                else "Send pieces of at most UPLOAD_CHUNK_MAX_BYTES."
                if piece
                else "Append at most LIVE_APPEND_MAX_BYTES at a time."
                if appended
                else "Upload transcripts as multipart files to /api/sessions."
            )
            response = errors.error_response(
                request,
                413,
                f"The request declares {declared:,} bytes, over the limit of {limit:,} bytes "
                f"for {'an upload' if multipart else 'a request body'}. {advice}",
                with_context=False,  # nothing has run yet: no session, no user
            )
            response["Connection"] = "close"  # the unread body must not be taken as a request
            return response
        return self.get_response(request)


#: statuses whose bare responses (no body) get the friendly error page
FRIENDLY_STATUSES = frozenset({400, 403, 404, 410})


class FriendlyErrorPageMiddleware:
    """A view's bare ``HttpResponseGone()`` / ``HttpResponseNotFound()`` gets the error page
    (JSON under /api/); responses that carry their own body are left alone."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code in FRIENDLY_STATUSES
            and not response.streaming
            and not response.content
            and request.method != "HEAD"
        ):
            friendly = errors.error_response(request, response.status_code)
            for header in ("Vary", "Cache-Control"):
                if header in response.headers:
                    friendly.headers[header] = response.headers[header]
            return friendly
        return response


#: what a person is told when their work is saved but the task queue could not take it
QUEUE_DOWN_NOTICE = (
    "The task queue is unreachable just now: your work is saved and its runs are queued; "
    "they start by themselves once the queue is back (nothing needs doing again)."
)


class QueueNoticeMiddleware:
    """Says so when a request saved work whose tasks could not be sent (the broker down):
    the request still succeeds (``jobs.lifecycle.publish`` keeps the runs queued for the
    recovery), and the answer carries ``QUEUE_DOWN_NOTICE``: a ``notice`` in a JSON object,
    a message on the next page for a form, and an ``X-Task-Queue: unreachable`` header."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = lifecycle.queue_unreachable.set(False)
        try:
            response = self.get_response(request)
            if lifecycle.queue_unreachable.get():
                self._tell(request, response)
            return response
        finally:
            lifecycle.queue_unreachable.reset(token)

    @staticmethod
    def _tell(request: HttpRequest, response: HttpResponse) -> None:
        response["X-Task-Queue"] = "unreachable"
        if response.streaming:
            return
        if response.get("Content-Type", "").startswith("application/json"):
            try:
                body = json.loads(response.content)
            except ValueError:
                return
            if isinstance(body, dict):
                body["notice"] = QUEUE_DOWN_NOTICE
                response.content = json.dumps(body).encode()
                response["Content-Length"] = str(len(response.content))
            return
        if hasattr(request, "_messages"):
            messages.warning(request, QUEUE_DOWN_NOTICE)
