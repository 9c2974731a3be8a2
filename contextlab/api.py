"""The JSON API: one NinjaAPI, one router per app. OpenAPI at /api/docs and /api/openapi.json."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError
from ninja.parser import Parser

from contextlab.accounts.auth import BearerTokenAuth, SessionAuth
from contextlab.engine import FieldError, decode_json_line
from contextlab.errors import FieldProblem, field_error_body


class StrictJSONParser(Parser):
    """Request bodies as JSON that the database and the engine can hold.

    ``json.loads`` alone accepts ``NaN``/``Infinity`` (which PostgreSQL's jsonb refuses, so a
    config holding one failed on save) and recurses until the interpreter gives up; this
    parser refuses both (ninja answers 400 with the reason) and replaces NUL and lone
    surrogates, as the transcript loader does.
    """

    def parse_body(self, request: HttpRequest) -> Any:
        value, _replaced = decode_json_line(request.body.decode("utf-8"))
        return value


api = NinjaAPI(
    title="ContextLab",
    version="1",
    urls_namespace="api",
    auth=[BearerTokenAuth(), SessionAuth()],
    parser=StrictJSONParser(),
    description="Upload Claude Code transcripts, queue replays, read per-request results. "
    "Authenticate with `Authorization: Bearer <token>`: create a token on the Tokens page "
    "(/accounts/tokens/) while logged in.",
)
api.add_router("/sessions", "contextlab.transcripts.api.router")
api.add_router("/uploads", "contextlab.transcripts.api.uploads")
api.add_router("/runs", "contextlab.runs.api.router")
api.add_router("", "contextlab.tuning.api.router")
api.add_router("/advice", "contextlab.advice.api.router")
api.add_router("/workspaces", "contextlab.workspaces.api.router")
api.add_router("/shares", "contextlab.sharing.api.router")
api.add_router("/sessions", "contextlab.sharing.api.exports")
api.add_router("/sessions", "contextlab.comments.api.sessions")
api.add_router("/comments", "contextlab.comments.api.router")
api.add_router("/sessions", "contextlab.search.api.sessions")
api.add_router("", "contextlab.search.api.router")


@api.exception_handler(AuthenticationError)
def _unauthorized(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = api.create_response(
        request,
        {"detail": "Authentication required: send Authorization: Bearer <token>"},
        status=401,
    )
    response["WWW-Authenticate"] = 'Bearer realm="contextlab"'
    return response


@api.exception_handler(FieldError)
def _field_error(request: HttpRequest, exc: FieldError) -> HttpResponse:
    """Every wrong input an operation lets through, from the engine or an app, answered 422
    with the field in ``detail[].loc`` (409 for an app's target that is not ready)."""
    status = exc.http_status if isinstance(exc, FieldProblem) else 422
    return api.create_response(
        request, field_error_body(exc.field, exc.message), status=status if status == 409 else 422
    )


@api.exception_handler(PermissionDenied)
def _forbidden(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    """The ownership gate's answer to a member whose role is too low (non-members get 404)."""
    return api.create_response(
        request, {"detail": str(exc) or "your role does not allow this"}, status=403
    )


@api.exception_handler(RequestDataTooBig)
def _body_too_large(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    # Django refuses to read a non-file body past DATA_UPLOAD_MAX_MEMORY_SIZE; say so with the
    # status that means it (files go to /api/sessions as multipart, under UPLOAD_MAX_BYTES)
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return api.create_response(
        request,
        {
            "detail": f"The request body is larger than the limit of {limit:,} bytes; "
            "upload transcripts as multipart files to /api/sessions."
        },
        status=413,
    )
