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
from contextlab.search.query import parse
from contextlab.transcripts.models import Transcript, TranscriptMessages, TranscriptMessagesPart
from tests.transcripts.test_live_provisional import CUTS, LINES, _grow_to, _live_session

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
        assert services.not_indexed([session_id]) == 1
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


def test_an_append_is_indexed_from_its_own_stored_rows_alone(
    client, auth_header, django_capture_on_commit_callbacks, monkeypatch
):
    """The rows to write after an append are read from the append's stored rows: no part of
    the stored messages is read back (what is read grows with the append, not the session),
    and the index is the one a whole indexing writes; a word of the appended lines is found."""
    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    read: list[str] = []
    real = TranscriptMessages.current_pieces

    def counted(transcript: Transcript, stored: TranscriptMessages | None = None) -> Any:
        read.append("whole")
        return real(transcript, stored)

    monkeypatch.setattr(TranscriptMessages, "current_pieces", staticmethod(counted))
    parts = TranscriptMessagesPart.objects.filter(messages_id=session_id).count()
    for cut in CUTS[2:]:
        _grow_to(client, auth_header, session_id, cut, capture)
        runner.execute_run(run.pk)
        run.refresh_from_db()
        assert run.provisional
        assert read == []
        assert TranscriptMessagesPart.objects.filter(messages_id=session_id).count() == parts
        after = _rows(session_id)
        indexed = IndexedSession.objects.get(transcript_id=session_id)
        assert indexed.run_id == run.pk
        assert indexed.blocks == len(after)
        first_prompt = indexed.first_prompt
        assert set(_indexed_whole(session_id, run)) == set(after)
        assert IndexedSession.objects.get(transcript_id=session_id).first_prompt == first_prompt
        read.clear()  # (the whole indexing just done to compare)
    # a word only the last append's lines hold (in a block's text) is found
    last = TranscriptMessages.objects.get(transcript_id=session_id).appended.order_by("-id")[0]
    texts = " ".join(
        str(block.get("text") or "")
        for part in last.data.values()
        for row in part["rows"]
        for block in row.get("blocks") or []
    )
    word = _word_only_in(texts.encode(), b"".join(LINES[: CUTS[2]]))
    hits = services.search(parse(word), [session_id]).hits
    assert hits
    assert all(hit.session_id == session_id for hit in hits)


def _word_only_in(later: bytes, earlier: bytes) -> str:
    """A word of 8+ letters that ``later`` holds and ``earlier`` does not."""
    import re

    known = set(re.findall(rb"[A-Za-z]{8,}", earlier))
    for word in re.findall(rb"[A-Za-z]{8,}", later):
        if word not in known:
            return word.decode()
    raise AssertionError("no word new to the appended lines")


def test_a_message_the_append_changed_is_indexed_again(
    client, auth_header, django_capture_on_commit_callbacks, monkeypatch
):
    """A message with kept rows that the append's stored rows write again (a response an
    appended record was merged into, ``engine.appended_messages_json``) is not left as its
    kept rows had it: they are written again, as a whole indexing writes them; an unchanged
    one keeps its rows."""
    from contextlab import engine

    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    _grow_to(client, auth_header, session_id, CUTS[2], capture)
    runner.execute_run(run.pk)
    _grow_to(client, auth_header, session_id, CUTS[3], capture)
    kept = Entry.objects.filter(transcript_id=session_id, thread="main").order_by("-message")
    changed = kept[0]  # the last message with kept rows: written again, as if merged into
    Entry.objects.filter(pk=changed.pk).update(body="stalewordxyz " + changed.body)
    unchanged = kept.filter(message__lt=changed.message).first()
    real = engine.appended_messages_json

    def from_the_kept_message(session: engine.Session, marks: list[Any]) -> Any:
        out = real(session, marks)
        main = out["main"]
        rows = engine.messages_json(session)["main"][changed.message : main["start"]]
        out["main"] = {"start": changed.message, "rows": [*rows, *main["rows"]]}
        return out

    monkeypatch.setattr(engine, "appended_messages_json", from_the_kept_message)
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.provisional
    assert not services.search(parse("stalewordxyz"), [session_id]).hits
    after = _rows(session_id)
    assert changed.pk not in after.values()
    assert unchanged is not None
    assert unchanged.pk in after.values()
    assert set(_indexed_whole(session_id, run)) == set(after)


def test_a_session_changed_otherwise_than_by_appends_keeps_no_stale_row(
    client, auth_header, django_capture_on_commit_callbacks
):
    """An append after which the stored messages cannot be taken by appended rows (a thread
    of the stored version no longer there as it was) drops the session's kept rows: the
    replay indexes it whole, and a word of the replaced message is no longer found."""
    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    stored = TranscriptMessages.objects.get(transcript_id=session_id)
    marks = [list(m) for m in stored.marks]
    marks[0][2] = "another-uuid"  # the stored main thread ended on another message
    TranscriptMessages.objects.filter(pk=stored.pk).update(marks=marks)
    row = Entry.objects.filter(transcript_id=session_id, in_prompt=True).first()
    assert row is not None
    Entry.objects.filter(pk=row.pk).update(body="stalewordxyz " + row.body)
    _grow_to(client, auth_header, session_id, CUTS[2], capture)
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert not services.search(parse("stalewordxyz"), [session_id]).hits
    after = _rows(session_id)
    assert set(_indexed_whole(session_id, run)) == set(after)
