"""What the pages of a live session poll (``Transcript.is_live``): the address of the refresh."""

from __future__ import annotations

from django.http import HttpRequest

from contextlab.runs.models import Run


def result_version(run: Run) -> str:
    """Names the result a page shows: a poll naming it is answered "no change" (204)."""
    return f"{run.pk}-{run.finished_at.timestamp() if run.finished_at else 0}"


def poll_url(
    request: HttpRequest, *, path: str | None = None, last: bool = False, seen: str = ""
) -> str:
    """``path`` (default the page's own) with the page's query and ``live=1``: the explorer
    answers such a poll with its fragment, or 204 while the run replays the grown session.
    ``last``: the reader is on the last request, and follows to the new last one."""
    query = request.GET.copy()
    query["live"] = "1"
    query.pop("page", None)
    query["seen"] = seen
    if last:
        query["follow"] = "1"
    else:
        query.pop("follow", None)
    return f"{path or request.path}?{query.urlencode()}"
