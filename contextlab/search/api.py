"""JSON API of search: a session's blocks, or every session of a workspace the caller reads."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from ninja import Field, Query, Router, Schema

from contextlab.engine import FieldError
from contextlab.http import AuthedRequest
from contextlab.search import services
from contextlab.search.query import QueryError, parse
from contextlab.transcripts.models import MAX_ROW_ID
from contextlab.workspaces import access

sessions = Router(tags=["search"])
router = Router(tags=["search"])

#: hits a call returns at most
MAX_LIMIT = 100


class SearchParams(Schema):
    q: str = Field("", description='words and "quoted phrases", all of which a block holds')
    tool: str = Field("", description="only blocks of this tool (its calls and results)")
    kind: str = Field("", description="only blocks of this kind: " + ", ".join(services.KINDS))
    limit: int = Field(50, description=f"hits returned, 1 to {MAX_LIMIT}")


class WorkspaceSearchParams(SearchParams):
    workspace_id: int | None = Field(
        None, description="the workspace searched; every workspace you read when left out"
    )


class HitOut(Schema):
    session_id: int
    session_name: str
    #: as users read it, from 1
    request: int
    #: the 0-based index the explorer's address uses
    request_index: int
    #: false for a block after the last request (its last answer): no request's prompt holds it
    in_prompt: bool
    thread: str
    block_id: str
    kind: str
    tool: str
    path: str
    snippet: str = Field(description="HTML: the transcript's text escaped, matches in <mark>")
    url: str


class SearchOut(Schema):
    query: list[str]
    hits: list[HitOut]
    more: bool
    #: sessions searched that are not indexed yet (their replay has not finished)
    not_indexed: int


def run_search(params: SearchParams, session_ids: list[int]) -> dict[str, Any]:
    """Validate the parameters (422 naming the field) and search the sessions."""
    try:
        query = parse(params.q)
    except QueryError as exc:
        raise FieldError("q", str(exc)) from None
    if params.kind and params.kind not in services.KINDS:
        raise FieldError("kind", "must be one of " + ", ".join(services.KINDS))
    if len(params.tool) > 100 or "\x00" in params.tool:
        raise FieldError("tool", "must be a tool name (at most 100 characters, no NUL)")
    if not 1 <= params.limit <= MAX_LIMIT:
        raise FieldError("limit", f"must be between 1 and {MAX_LIMIT}")
    results = services.search(
        query, session_ids, tool=params.tool, kind=params.kind, limit=params.limit
    )
    return {
        "query": [" ".join(words) for words in query.terms],
        "hits": [
            {
                "session_id": hit.session_id,
                "session_name": hit.session_name,
                "request": hit.number,
                "request_index": hit.request,
                "in_prompt": hit.in_prompt,
                "thread": hit.thread,
                "block_id": hit.block_id,
                "kind": hit.kind,
                "tool": hit.tool,
                "path": hit.path,
                "snippet": str(hit.snippet),
                "url": hit.url,
            }
            for hit in results.hits
        ],
        "more": results.more,
        "not_indexed": services.not_indexed(session_ids),
    }


@sessions.get("/{session_id}/search", response=SearchOut, operation_id="search_session")
def search_session(
    request: AuthedRequest, session_id: int, params: Query[SearchParams]
) -> dict[str, Any]:
    """The blocks of one session holding the query, in request order."""
    if not 1 <= session_id <= MAX_ROW_ID:
        raise Http404("no such session")
    transcript = access.session_for(request.user, session_id, access.READ)
    return run_search(params, [transcript.pk])


@router.get("/search", response=SearchOut, operation_id="search_workspace")
def search_workspace(
    request: AuthedRequest, params: Query[WorkspaceSearchParams]
) -> dict[str, Any]:
    """The blocks of a workspace's sessions holding the query, newest session first."""
    readable = access.sessions(request.user)
    if params.workspace_id is not None:
        if not 1 <= params.workspace_id <= MAX_ROW_ID:
            raise Http404("no such workspace")
        workspace = access.workspace_for(request.user, params.workspace_id, access.READ)
        readable = readable.filter(workspace=workspace)
    return run_search(params, list(readable.values_list("pk", flat=True)))
