"""Search pages: a session's search box (on the explorer; its results come by htmx) and the
search across a workspace's sessions (in the nav)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.vary import vary_on_headers

from contextlab.http import AuthedRequest
from contextlab.search import services
from contextlab.search.query import QueryError, parse
from contextlab.transcripts.models import MAX_ROW_ID, Transcript
from contextlab.workspaces import access

#: hits a page shows
PAGE_HITS = 50


def _results(request: AuthedRequest, session_ids: list[int]) -> dict[str, Any]:
    """The results part's context: the hits, or why there are none."""
    q = request.GET.get("q", "")
    kind = request.GET.get("kind", "")
    tool = request.GET.get("tool", "")[:100]
    context: dict[str, Any] = {
        "q": q,
        "kind": kind if kind in services.KINDS else "",
        "tool": tool,
        "kinds": services.KIND_LABELS,
        "not_indexed": services.not_indexed(session_ids),
    }
    if "q" not in request.GET:
        return context
    try:
        query = parse(q)
    except QueryError as exc:
        context["error"] = str(exc)
        return context
    if query.empty:
        context["no_words"] = True
        return context
    context["results"] = services.search(
        query, session_ids, tool=tool.replace("\x00", ""), kind=context["kind"], limit=PAGE_HITS
    )
    return context


@access.session_view(access.READ)
@vary_on_headers("HX-Request")
def session_search(request: AuthedRequest, transcript: Transcript) -> HttpResponse:
    """One session's hits (the explorer's search box; a page of its own without htmx)."""
    context = _results(request, [transcript.pk])
    context.update(transcript=transcript, tools=services.tools_of(transcript.pk))
    status = 422 if "error" in context else 200
    if request.htmx:
        return render(request, "search/_results.html", context, status=status)
    return render(request, "search/session.html", context, status=status)


@login_required
@vary_on_headers("HX-Request")
def workspace_search(request: AuthedRequest) -> HttpResponse:
    """Search every session of a workspace (``?workspace=``), or of every workspace read."""
    workspaces = list(access.workspaces(request.user).order_by("name"))
    raw = request.GET.get("workspace", "")
    sessions = access.sessions(request.user)
    workspace = None
    if raw:
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_ROW_ID:
            raise Http404("no such workspace")
        workspace = access.workspace_for(request.user, int(raw), access.READ)
        sessions = sessions.filter(workspace=workspace)
    ids = list(sessions.values_list("pk", flat=True))
    context = _results(request, ids)
    context.update(workspaces=workspaces, workspace=workspace, session_count=len(ids))
    status = 422 if "error" in context else 200
    if request.htmx:
        return render(request, "search/_results.html", context, status=status)
    return render(request, "search/workspace.html", context, status=status)
