"""Search: the index the worker writes after a replay, the API's answers and its refusals.

These run on PostgreSQL (the suite's database) and, through ``test_sqlite_backend_passes``,
on SQLite with FTS5 (the same file in a child pytest with ``DATABASE_URL=sqlite://``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection

from contextlab.jobs import replay as runner
from contextlab.runs.services import session_messages
from contextlab.search import services
from contextlab.search.models import Entry, IndexedSession
from contextlab.search.query import parse, snippet
from tests.conftest import assert_passes_on_sqlite

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

HOSTILE = "<script>alert('x')</script> needle-in-the-haystack"


@pytest.fixture
def done_session(make_transcript, tool_heavy_jsonl):
    transcript = make_transcript(tool_heavy_jsonl)
    runner.execute_run(transcript.runs.get().pk)
    transcript.refresh_from_db()
    return transcript


def _runs(text: str) -> list[str]:
    """Each run of three consecutive plain words of the text (a phrase a user could type)."""
    tokens = text.split()
    return [
        " ".join(tokens[i : i + 3])
        for i in range(len(tokens) - 2)
        if all(w.isalpha() and len(w) > 2 for w in tokens[i : i + 3])
    ]


def _prompts(transcript) -> list[tuple[int, str]]:
    """(message index, text) of the main thread's typed prompts of three words or more."""
    return [
        (row["index"], block["text"])
        for row in session_messages(transcript)["main"]
        if row["kind"] == "prompt"
        for block in row["blocks"]
        if block["type"] == "text" and _runs(block["text"])
    ]


def _phrase(text: str) -> str:
    return _runs(text)[-1]


def test_worker_indexes_the_session_when_its_replay_is_stored(done_session):
    state = IndexedSession.objects.get(transcript=done_session)
    assert state.blocks == Entry.objects.filter(transcript=done_session).count() > 0
    kinds = set(Entry.objects.filter(transcript=done_session).values_list("kind", flat=True))
    assert {"prompt", "assistant", "tool_input", "tool_output"} <= kinds
    # a tool result is named by its call's tool
    assert Entry.objects.filter(transcript=done_session, kind="tool_output").exclude(tool="")


def test_late_prompt_is_found_at_the_request_that_first_holds_it(done_session, alice_client):
    message, text = _prompts(done_session)[-1]
    phrase = _phrase(text)
    response = alice_client.get(
        f"/api/sessions/{done_session.pk}/search", {"q": f'"{phrase}"', "kind": "prompt"}
    )
    assert response.status_code == 200, response.content
    hits = response.json()["hits"]
    assert [h["block_id"] for h in hits] == [f"b-{message}-0"]
    hit = hits[0]
    data = done_session.runs.get().result.read()
    first = next(
        r for r in data["requests"] if r["thread"] == "main" and r["view"]["end"] > message
    )
    assert hit["request"] == first["index"] + 1
    assert hit["request_index"] == first["index"]
    assert hit["url"].endswith(f"/requests/{first['index']}/?block=b-{message}-0#b-{message}-0")
    assert "<mark>" in hit["snippet"]
    assert hit["session_id"] == done_session.pk
    # the link opens that request with the block on the page, marked
    page = alice_client.get(hit["url"].split("#")[0])
    assert page.status_code == 200
    assert f'id="b-{message}-0" class="row search-hit' in page.content.decode()


def test_filters_by_tool_and_kind(done_session, alice_client):
    tool = (
        Entry.objects.filter(transcript=done_session)
        .exclude(tool="")
        .values_list("tool", flat=True)[0]
    )
    url = f"/api/sessions/{done_session.pk}/search"
    every = alice_client.get(url, {"q": tool.lower(), "limit": 100}).json()["hits"]
    only = alice_client.get(url, {"q": tool.lower(), "tool": tool, "limit": 100}).json()["hits"]
    assert only
    assert all(h["tool"] == tool for h in only)
    outputs = alice_client.get(
        url, {"q": tool.lower(), "tool": tool, "kind": "tool_output", "limit": 100}
    ).json()["hits"]
    assert all(h["kind"] == "tool_output" for h in outputs)
    assert len(every) >= len(only) >= len(outputs)


def test_workspace_search_covers_the_readers_sessions_only(
    done_session, alice_client, mallory_client, make_transcript, short_jsonl
):
    other = make_transcript(short_jsonl)
    runner.execute_run(other.runs.get().pk)
    _, text = _prompts(done_session)[0]
    phrase = _phrase(text)
    found = alice_client.get("/api/search", {"q": phrase}).json()
    assert done_session.pk in {h["session_id"] for h in found["hits"]}
    scoped = alice_client.get(
        "/api/search", {"q": phrase, "workspace_id": done_session.workspace_id}
    ).json()
    assert scoped["hits"]
    assert scoped["not_indexed"] == 0
    assert mallory_client.get("/api/search", {"q": phrase}).json()["hits"] == []
    ws = mallory_client.get("/api/search", {"q": phrase, "workspace_id": done_session.workspace_id})
    assert ws.status_code == 404
    assert (
        mallory_client.get(f"/api/sessions/{done_session.pk}/search", {"q": "x"}).status_code == 404
    )


@pytest.mark.parametrize(
    ("q", "status"),
    [
        ("", 422),
        ("   ", 422),
        ("x" * 10_000, 422),
        ("a\x00b", 422),
        ('"', 200),
        ('"unbalanced quote', 200),
        ("NEAR(a b) OR c* AND -d ^e {f} col:g", 200),
        ("a & b | !c <-> (d) :* 'e'", 200),
        ("*", 200),
        ("()", 200),
        ("<script>alert(1)</script>", 200),
        ("%_\\", 200),
        ("\u202e\U0001f600 emoji", 200),
    ],
)
def test_hostile_queries_get_a_clear_answer(done_session, alice_client, q, status):
    for url, extra in (
        (f"/api/sessions/{done_session.pk}/search", {}),
        ("/api/search", {"workspace_id": done_session.workspace_id}),
    ):
        response = alice_client.get(url, {"q": q, **extra})
        assert response.status_code == status, (q, response.content[:300])
        if status == 422:
            assert response.json()["detail"][0]["loc"][-1] == "q"
        else:
            assert isinstance(response.json()["hits"], list)


@pytest.mark.parametrize(
    ("params", "field"),
    [({"kind": "nonsense"}, "kind"), ({"tool": "x" * 101}, "tool"), ({"limit": 0}, "limit")],
)
def test_bad_filters_are_refused_by_field(done_session, alice_client, params, field):
    response = alice_client.get(f"/api/sessions/{done_session.pk}/search", {"q": "a", **params})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == field


def test_huge_ids_are_404(alice_client):
    assert alice_client.get(f"/api/sessions/{2**63}/search", {"q": "a"}).status_code in (404, 422)
    response = alice_client.get("/api/search", {"q": "a", "workspace_id": 2**63})
    assert response.status_code in (404, 422)


def test_snippet_escapes_the_transcript_and_marks_matches():
    out = str(snippet(HOSTILE, parse("needle haystack")))
    assert "<script>" not in out
    assert "&lt;script&gt;" in out
    assert "<mark>needle</mark>" in out
    assert "<mark>haystack</mark>" in out
    # a path typed as it is written is the phrase of its parts
    assert "<mark>src/app.py</mark>" in str(snippet("edit src/app.py now", parse("src/app.py")))


def test_hostile_text_in_the_index_comes_back_escaped(done_session, alice_client):
    entry = Entry.objects.filter(transcript=done_session, kind="prompt").first()
    entry.body = HOSTILE
    entry.save()  # SQLite: the trigger re-indexes the row; PostgreSQL: the vector's trigger
    hits = alice_client.get(
        f"/api/sessions/{done_session.pk}/search", {"q": "needle in the haystack"}
    ).json()["hits"]
    assert len(hits) == 1
    assert "<script>" not in hits[0]["snippet"]
    assert "&lt;script&gt;" in hits[0]["snippet"]


def test_long_blocks_are_indexed_in_parts_and_found_once(done_session):
    tail = "zebra quokka platypus"
    text = ("lorem ipsum " * 2000) + tail
    parts = list(services.parts(text))
    assert len(parts) > 1
    assert tail in parts[-1]
    message = dict(session_messages(done_session))
    message["main"] = [dict(message["main"][0], blocks=[{"type": "text", "text": text}])]
    requests = done_session.runs.get().result.read()["requests"]
    rows = list(services.entries_for(done_session.pk, message, requests))
    assert len(rows) == len(parts)


def test_deleting_a_session_empties_its_index(done_session):
    from contextlab.transcripts import services as transcripts

    _, text = _prompts(done_session)[-1]
    query = parse(f'"{_phrase(text)}"')
    assert services.search(query, [done_session.pk]).hits
    pk = done_session.pk
    transcripts.delete_transcript(transcript=done_session)
    assert not Entry.objects.filter(transcript_id=pk).exists()
    assert services.search(query, [pk]).hits == []


def test_index_command_and_recovery_fill_sessions_stored_before(done_session):
    from django.core.management import call_command

    from contextlab.jobs import tasks

    IndexedSession.objects.all().delete()
    Entry.objects.all().delete()
    assert list(services.unindexed()) == [done_session]
    tasks.recover()
    assert IndexedSession.objects.filter(transcript=done_session).exists()
    IndexedSession.objects.all().delete()
    call_command("index_sessions")
    assert IndexedSession.objects.filter(transcript=done_session).exists()
    before = Entry.objects.count()
    call_command("index_sessions", "--all")
    assert Entry.objects.count() == before


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="runs the SQLite pass from the PostgreSQL one"
)
@pytest.mark.slow
def test_sqlite_backend_passes():
    """The same tests on SQLite with FTS5 (``make run``'s database)."""
    assert_passes_on_sqlite(__file__)


def test_a_session_whose_messages_go_is_indexed_again_by_its_next_replay(done_session):
    from contextlab.runs import services as runs
    from contextlab.transcripts.models import TranscriptMessages

    TranscriptMessages.objects.filter(transcript=done_session).delete()  # its file grew
    assert not IndexedSession.objects.filter(transcript=done_session).exists()
    assert not Entry.objects.filter(transcript=done_session).exists()
    assert runs.replay_again(done_session)
    runner.execute_run(done_session.runs.get().pk)
    assert IndexedSession.objects.get(transcript=done_session).blocks > 0


def test_search_pages_answer_htmx_and_plain_requests(done_session, alice_client, mallory_client):
    _, text = _prompts(done_session)[-1]
    phrase = _phrase(text)
    hx = {"HTTP_HX_REQUEST": "true"}
    url = f"/sessions/{done_session.pk}/search/"
    partial = alice_client.get(url, {"q": phrase}, **hx)
    assert partial.status_code == 200
    body = partial.content.decode()
    assert body.lstrip().startswith('<div id="search-results"')
    assert "<mark>" in body
    assert "?block=b-" in body
    whole = alice_client.get(url, {"q": phrase, "kind": "prompt"}).content.decode()
    assert "<html" in whole
    assert "Request " in whole
    for bad in ("", "x" * 600, "a\x00b"):
        refused = alice_client.get(url, {"q": bad}, **hx)
        assert refused.status_code == 422
        assert 'class="form-problem"' in refused.content.decode()
    nothing = alice_client.get(url, {"q": "!!! ***"}, **hx).content.decode()
    assert "No words to search for" in nothing
    page = alice_client.get("/search/", {"q": phrase, "workspace": done_session.workspace_id})
    assert page.status_code == 200
    assert "<mark>" in page.content.decode()
    assert alice_client.get("/search/", {"workspace": "abc"}).status_code == 404
    assert alice_client.get("/search/", {"workspace": str(2**64)}).status_code == 404
    assert mallory_client.get(url, {"q": phrase}).status_code == 404
    other = mallory_client.get("/search/", {"q": phrase, "workspace": done_session.workspace_id})
    assert other.status_code == 404
    assert "<mark>" not in mallory_client.get("/search/", {"q": phrase}).content.decode()


def test_hostile_transcript_text_is_escaped_on_the_page(done_session, alice_client):
    entry = Entry.objects.filter(transcript=done_session, kind="prompt").first()
    entry.body = HOSTILE
    entry.save()
    body = alice_client.get(
        f"/sessions/{done_session.pk}/search/", {"q": "needle"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "<script>alert" not in body
    assert "&lt;script&gt;alert" in body


def test_a_block_after_the_last_request_is_named_as_such(done_session, alice_client):
    data = done_session.runs.get().result.read()["requests"]
    last_end = max(r["view"]["end"] for r in data if r["thread"] == "main")
    after = Entry.objects.filter(transcript=done_session, thread="main", message__gte=last_end)
    before = Entry.objects.filter(transcript=done_session, thread="main", message__lt=last_end)
    assert after.exists()
    assert not after.filter(in_prompt=True).exists()
    assert not before.filter(in_prompt=False).exists()
    assert {e.request for e in after} == {len(data) - 1}
    entry, word = next(
        (e, w) for e in after.order_by("id") for w in e.body.split() if w.isalpha() and len(w) > 3
    )
    hits = alice_client.get(
        f"/api/sessions/{done_session.pk}/search", {"q": word, "limit": 100}
    ).json()["hits"]
    hit = next(h for h in hits if h["block_id"] == f"b-{entry.message}-{entry.block}")
    assert hit["in_prompt"] is False
    assert "?block=" not in hit["url"]


def test_stepped_search_lists_the_same_rows_as_one_ordered_match(
    done_session, make_transcript, tool_heavy_jsonl, tmp_path: Path, monkeypatch
):
    """SQLite searches the sessions newest first in growing steps, each bounded to its
    sessions' row ids; it must list exactly the rows, in the order, that one ordered match
    over every session gives (PostgreSQL answers with that one match). Eleven sessions make
    three steps; the oldest session indexed again last has the highest row ids, so a step's
    id range spans other sessions' rows."""
    from contextlab.search import backends

    monkeypatch.setattr(backends, "FEW_MATCHES", 0)  # steps for every word, not only common ones
    sessions = [done_session]
    for copy in range(10):
        path = tmp_path / f"copy-{copy}.jsonl"
        path.write_bytes(b"\n" * (copy + 1) + tool_heavy_jsonl.read_bytes())
        transcript = make_transcript(path)
        Entry.objects.bulk_create(
            Entry(**{**row, "id": None, "transcript_id": transcript.pk})
            for row in Entry.objects.filter(transcript=done_session).values()
        )
        sessions.append(transcript)
    services.index_session(done_session)  # its rows now have the highest ids
    assert len(sessions) > backends.FIRST_STEP_SESSIONS * 2
    ids = [t.pk for t in sessions]
    order = ("-transcript_id", "request", "message", "block", "id")
    fields = ("id", "transcript_id", "message")
    body = " ".join(Entry.objects.filter(transcript=done_session).values_list("body", flat=True))
    rare = next(w for w in body.split() if w.isalpha() and body.lower().count(w.lower()) == 1)
    # a word of the row with the highest id (a step's bound)
    last = next(w for w in Entry.objects.order_by("-id").first().body.split() if w.isalpha())
    checked = 0
    for text in ("the", "file", rare, last, "zzyzxquux"):
        query = parse(text)
        everything = list(
            backends.matching(Entry.objects.filter(transcript_id__in=ids), query)
            .order_by(*order)
            .values_list(*fields)
        )
        for count in (1, 5, 50, len(everything) + 1):
            stepped = backends.first_matches(
                Entry.objects.filter(transcript_id__in=ids),
                ids,
                query,
                order=order,
                fields=fields,
                count=count,
            )
            assert stepped == everything[:count], (text, count)
            checked += len(stepped)
    assert checked > 0
    # the rare word's rows are in every session, the newest first
    found = services.search(parse(rare), ids, limit=100)
    assert [h.session_id for h in found.hits] == sorted(ids, reverse=True)


def test_the_search_page_of_a_reader_with_no_session_says_to_upload_one(alice_client):
    html = alice_client.get("/search/", {"q": "anything"}).content.decode()
    assert 'id="search-no-sessions"' in html
    assert 'href="/sessions/"' in html
    assert "Nothing found" not in html
    # the box's htmx request (typing) gets the same answer in the results it swaps in
    partial = alice_client.get("/search/", {"q": "other"}, headers={"HX-Request": "true"})
    assert 'id="search-results"' in partial.content.decode()
    assert 'id="search-no-sessions"' in partial.content.decode()


def test_the_search_page_of_a_reader_with_sessions_has_no_upload_prompt(done_session, alice_client):
    html = alice_client.get("/search/", {"q": "anything"}).content.decode()
    assert 'id="search-no-sessions"' not in html
    assert "of 1 session." in html
