"""A live session's append keeps the search rows of the blocks it leaves where they were (the
blocks some request's prompt holds, numbered by requests the provisional replay keeps): the
rows of each thread's last answer go with the append, and the replay writes only the rows of
what changed. The index is then the one a whole indexing of the grown session writes; rows
that would be numbered otherwise now are not kept (the session is indexed whole)."""

from __future__ import annotations

from typing import Any

import pytest

from contextlab.jobs import replay as runner
from contextlab.runs.models import Run
from contextlab.search import services
from contextlab.search.models import Entry, IndexedSession
from contextlab.transcripts.models import Transcript
from tests.transcripts.test_live_provisional import CUTS, _grow_to, _live_session

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

FIELDS = ("thread", "message", "block", "request", "in_prompt", "kind", "tool", "path", "body")


@pytest.fixture(autouse=True)
def _no_refit(settings) -> None:
    settings.LIVE_REFIT_PERCENT = 100_000


def _rows(session_id: int) -> dict[tuple[Any, ...], int]:
    """The session's index rows (their fields) and their ids."""
    return {
        tuple(row[:-1]): row[-1]
        for row in Entry.objects.filter(transcript_id=session_id).values_list(*FIELDS, "pk")
    }


def _indexed_whole(session_id: int, run: Run) -> dict[tuple[Any, ...], int]:
    services.forget(session_id)
    services.index_session(Transcript.objects.get(pk=session_id), run)
    return _rows(session_id)


def test_an_append_writes_only_the_rows_of_what_it_changed(
    client, auth_header, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    for cut in CUTS[2:]:
        before = _rows(session_id)
        assert IndexedSession.objects.filter(transcript_id=session_id).exists()
        _grow_to(client, auth_header, session_id, cut, capture)
        # the append: the rows a request's prompt holds stay (and are found meanwhile), the
        # last answer's go, and the session counts as not indexed until its replay
        kept = _rows(session_id)
        assert kept == {row: pk for row, pk in before.items() if row[4]}
        assert len(kept) < len(before)
        assert not IndexedSession.objects.filter(transcript_id=session_id).exists()
        runner.execute_run(run.pk)
        run.refresh_from_db()
        assert run.provisional
        after = _rows(session_id)
        # the kept rows were not written again (the same ids), and new ones were
        assert set(kept.items()) <= set(after.items())
        assert len(after) > len(kept)
        indexed = IndexedSession.objects.get(transcript_id=session_id)
        assert indexed.blocks == len(after)
        tools = indexed.tools
        # the same index as a whole indexing of the grown session writes
        assert set(_indexed_whole(session_id, run)) == set(after)
        assert IndexedSession.objects.get(transcript_id=session_id).tools == tools


def test_rows_numbered_otherwise_now_mean_indexing_the_session_whole(
    client, auth_header, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    _grow_to(client, auth_header, session_id, CUTS[2], capture)
    # a kept row another request numbers (as if the replay had renumbered the requests)
    row = Entry.objects.filter(transcript_id=session_id).order_by("-message").first()
    assert row is not None
    Entry.objects.filter(pk=row.pk).update(request=row.request + 1)
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.provisional
    after = _rows(session_id)
    assert row.pk not in after.values()  # written again
    assert set(_indexed_whole(session_id, run)) == set(after)
