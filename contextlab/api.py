"""The JSON API: one NinjaAPI, one router per app. OpenAPI at /api/docs and /api/openapi.json."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError

from contextlab.accounts.auth import BearerTokenAuth, SessionAuth

api = NinjaAPI(
    title="ContextLab",
    version="1",
    urls_namespace="api",
    auth=[BearerTokenAuth(), SessionAuth()],
    description="Upload Claude Code transcripts, queue replays, read per-request results. "
    "Authenticate with `Authorization: Bearer <token>` (`manage.py create_api_token USERNAME`).",
)
api.add_router("/sessions", "contextlab.transcripts.api.router")
api.add_router("/runs", "contextlab.runs.api.router")
api.add_router("", "contextlab.tuning.api.router")
api.add_router("/workspaces", "contextlab.workspaces.api.router")
api.add_router("/shares", "contextlab.sharing.api.router")
api.add_router("/sessions", "contextlab.sharing.api.exports")


@api.exception_handler(AuthenticationError)
def _unauthorized(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = api.create_response(
        request,
        {"detail": "Authentication required: send Authorization: Bearer <token>"},
        status=401,
    )
    response["WWW-Authenticate"] = 'Bearer realm="contextlab"'
    return response


@api.exception_handler(PermissionDenied)
def _forbidden(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    """The ownership gate's answer to a member whose role is too low (non-members get 404)."""
    return api.create_response(
        request, {"detail": str(exc) or "your role does not allow this"}, status=403
    )
