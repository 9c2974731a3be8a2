"""The index's ``tsvector`` as the worker works it out (``backends.vector_text``) is the one
the database works out of the same text (``migrations/0001``'s expression, now its trigger's),
and rows written either way are found alike. PostgreSQL only (SQLite's FTS5 has no vector)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from contextlab.jobs import replay as runner
from contextlab.search import backends, services
from contextlab.search.models import Entry
from contextlab.search.query import parse
from tests.conftest import FIXTURES, corpus_files, needs_corpus

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's tsvector"),
]

DATABASE_VECTOR = (
    "to_tsvector('simple'::regconfig, regexp_replace(t, '[^[:alnum:]]+', ' ', 'g'))::text"
)

#: texts at the edges of what the worker works out, and past them (left to the database)
EDGES = [
    "",
    "   \n\t ",
    "Hello, World! hello WORLD",
    "src/main.rs:12:5 foo_bar-baz a.b.c x@y.z https://example.com/a?b=c#d",
    "0x1F 123abc abc123 007 12 3.14 1.2.3 -5 +7",
    "the " * 300 + "end",  # a word past its 255 positions
    "naïve café façade Ünïcödé ÀÉÎ straße",
    "arrows → ← and dashes — – quotes “a” ‘b’ … • ✓ ✗ × · │ ─",
    "5e5e5 1e10 1E5 x1e5 e5 1e",
    "a " + "b" * 2047 + " c " + "d" * 2048 + " e",
    "ª º ⓐ Ⓑ ½ ² ٣ 三 日本語 Ελληνικά",
    "tab\there\x01\x7f and\u00a0nbsp",
    "\ud83d lone surrogate",
]


def _database_vectors(texts: list[str]) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {DATABASE_VECTOR} FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n) "
            "ORDER BY n",
            [texts],
        )
        return [row[0] for row in cursor.fetchall()]


def _as_database_reads(vectors: list[str | None]) -> list[str | None]:
    """The worker's vectors as the database reads them (``tsvector`` input, sorted)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT v::tsvector::text FROM unnest(%s::text[]) WITH ORDINALITY AS u(v, n) "
            "ORDER BY n",
            [vectors],
        )
        return [row[0] for row in cursor.fetchall()]


def _assert_same_vectors(texts: list[str]) -> int:
    """Every vector the worker works out of ``texts`` is the database's; how many it did."""
    # (the index drops NUL, and a lone surrogate is no text PostgreSQL takes)
    texts = [t.replace("\x00", "") for t in texts if _encodes(t)]
    mine = [backends.vector_text(t) for t in texts]
    theirs = _database_vectors(texts)
    for text, given, read, expected in zip(
        texts, mine, _as_database_reads(mine), theirs, strict=True
    ):
        if given is not None:
            assert read == expected, text[:200]
    return sum(v is not None for v in mine)


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def test_edge_texts_get_the_database_vector_or_none():
    texts = [t for t in EDGES if _encodes(t)]
    assert _assert_same_vectors(texts) >= 6
    # past the edges: left to the database
    for text in ("5e5e5", "café", "x " + "b" * 2048, "日本語", "ⓐ", "\ud83d"):
        assert backends.vector_text(text) is None, text
    assert backends.vector_text("Hello, hello → World") == "hello:1,2 world:3"


def test_characters_taken_for_no_letter_or_digit_are_none_in_the_database():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c FROM unnest(%s::text[]) AS u(c) WHERE c ~ '[[:alnum:]]'",
            [sorted(backends.NOT_ALNUM)],
        )
        assert cursor.fetchall() == []


def _texts_of(path: Path) -> Iterator[str]:
    """Every string of the transcript's records, in the parts the index writes."""

    def strings(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from strings(item)
        elif isinstance(value, list):
            for item in value:
                yield from strings(item)

    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.strip():
            for text in strings(json.loads(line)):
                if len(text) > 20:
                    yield from services.parts(text)


def test_fixture_transcripts_texts_get_the_database_vector():
    files = sorted(FIXTURES.glob("*.jsonl"))
    done = sum(_assert_same_vectors(list(_texts_of(path))) for path in files)
    assert done > 100


@pytest.mark.slow
@needs_corpus
def test_corpus_texts_get_the_database_vector():
    for path in corpus_files():
        _assert_same_vectors(list(_texts_of(path)))


@pytest.mark.usefixtures("clean_media")
def test_rows_with_and_without_a_given_vector_are_found_alike(make_transcript, tool_heavy_jsonl):
    transcript = make_transcript(tool_heavy_jsonl)
    runner.execute_run(transcript.runs.get().pk)
    rows = Entry.objects.filter(transcript=transcript)
    assert rows.count() > 10
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM search_entry WHERE transcript_id = %s AND vector::text "
            f"IS DISTINCT FROM {DATABASE_VECTOR.replace('(t,', '(body,')}",
            [transcript.pk],
        )
        assert cursor.fetchone() == (0,)
    # a row written without one (the ORM, as before) gets the database's, and is found
    Entry.objects.bulk_create([Entry(**{**_fields(rows.first()), "body": "zyzzyva → café"})])
    query = parse("zyzzyva")
    assert list(backends.matching(rows, query).values_list("body", flat=True)) == ["zyzzyva → café"]
    # a text changed: its vector too
    rows.filter(body="zyzzyva → café").update(body="quokka")
    assert not backends.matching(rows, query).exists()
    assert backends.matching(rows, parse("quokka")).count() == 1


def _fields(entry: Entry) -> dict[str, Any]:
    return {
        f.name: getattr(entry, f.attname)
        for f in Entry._meta.concrete_fields
        if f.name not in ("id", "transcript")
    } | {"transcript_id": entry.transcript_id}
