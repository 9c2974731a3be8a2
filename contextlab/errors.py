"""Error pages: friendly HTML for people, JSON under /api/, never a traceback.

Wired in ``contextlab/urls.py`` (``handler400`` … ``handler500``) and ``CSRF_FAILURE_VIEW``;
``FriendlyErrorPageMiddleware`` gives a view's bare ``HttpResponseGone()`` (or any other empty
400/403/404/410) the same page. The 500 page renders without the request context: it must
still render when the database, the session or a context processor is what failed.
"""

from __future__ import annotations

import sys
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader

from contextlab import engine

API_PREFIX = "/api/"

#: status -> (title, what the person can do about it)
MESSAGES: dict[int, tuple[str, str]] = {
    400: ("Bad request", "The server could not understand that request."),
    403: ("Not allowed", "You do not have access to this page, or your form expired."),
    404: ("Not found", "There is nothing here: the link is wrong, or it was deleted."),
    408: (
        "The request stalled",
        "Your browser stopped sending what it was uploading, so nothing of it was kept. Try again.",
    ),
    410: ("Gone", "This was here once, but it has been deleted or has expired."),
    413: ("Too large", "That request is larger than ContextLab accepts."),
    503: (
        "The database is unavailable",
        "ContextLab cannot reach its database just now (restarting, or overloaded); nothing "
        "you saved is lost. Try again in a minute.",
    ),
    500: (
        "Something went wrong on our side",
        "The error has been logged. Try again in a moment; if it keeps happening, tell "
        "whoever runs this ContextLab.",
    ),
}


#: the API's own wording where django-ninja has one (its 404 says "Not Found")
API_DETAILS: dict[int, str] = {404: "Not Found"}


def is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX)


def error_response(
    request: HttpRequest, status: int, detail: str | None = None, *, with_context: bool = True
) -> HttpResponse:
    title, hint = MESSAGES[status]
    if is_api(request):
        return JsonResponse({"detail": detail or API_DETAILS.get(status, title)}, status=status)
    context = {"status": status, "title": title, "message": detail or hint}
    # a 503 is the 500 page's situation (rendered without a database) with its own words
    template = loader.get_template(
        "500.html" if status == 503 else "400.html" if status in (408, 413) else f"{status}.html"
    )
    html = template.render(context, request if with_context else None)
    return HttpResponse(html, status=status)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response(request, 400)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response(request, 403)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response(request, 404)


#: seconds a client is asked to wait after a 503 (the database restarting takes a few)
RETRY_AFTER = 30


def server_error(request: HttpRequest) -> HttpResponse:
    # Django calls this inside its ``except`` block: the database unreachable (restarted,
    # connections terminated) is a 503 to retry, not a bug; the next request reconnects
    # (CONN_HEALTH_CHECKS drops the dead connection).
    if isinstance(sys.exc_info()[1], (OperationalError, InterfaceError)):
        response = error_response(request, 503, with_context=False)
        response["Retry-After"] = str(RETRY_AFTER)
        return response
    return error_response(request, 500, with_context=False)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    return error_response(
        request,
        403,
        "This form expired or was sent from another site. Reload the page and try again.",
    )


class FieldProblem(engine.FieldError):
    """A request an app cannot carry out, naming the input at fault: the apps' own errors
    (workspaces, comments, shares) are these, so the API's one handler answers them all as it
    answers the engine's ``FieldError``. ``http_status``: 422, or 409 for a target not ready."""

    def __init__(self, field: str, message: str, http_status: int = 422) -> None:
        super().__init__(field, message)
        self.http_status = http_status

    def __str__(self) -> str:
        return self.message


def field_error_body(field: str, message: str, **extra: Any) -> dict[str, Any]:
    """The 422 body shape ninja itself uses, so every validation error names its field
    (``field`` dotted for a nested one: ``config.context_window``)."""
    return {
        "detail": [{"loc": ["body", *field.split(".")], "msg": message, "type": "value_error"}],
        **extra,
    }
