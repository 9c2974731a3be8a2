"""The words the worker gives the index (``backends.index_words``) make the vector the
database made of the text itself (``migrations/0001``'s expression, now ``0003``'s trigger's
when no words are given), and rows written either way are found alike. PostgreSQL only
(SQLite's FTS5 splits the text itself)."""

from __future__ import annotations

import json
import random
import string
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

#: the vector ``migrations/0001`` generated of a text ``t``
DATABASE_VECTOR = "to_tsvector('simple'::regconfig, regexp_replace(t, '[^[:alnum:]]+', ' ', 'g'))"

#: texts at the edges of what the worker splits into words, and past them (left to the
#: database)
EDGES = [
    "",
    "   \n\t ",
    "Hello, World! hello WORLD",
    "src/main.rs:12:5 foo_bar-baz a.b.c x@y.z https://example.com/a?b=c#d",
    "0x1F 123abc abc123 007 12 3.14 1.2.3 -5 +7 1e5 5e5e5 1E10 x1e5 e5 1e",
    "the " * 300 + "end",  # a word past its 255 positions
    "naïve café façade Ünïcödé ÀÉÎ straße",
    "arrows → ← and dashes — – quotes “a” ‘b’ … • ✓ ✗ × · │ ─",
    "a " + "b" * 2047 + " c " + "d" * 2048 + " e",
    "ª º ⓐ Ⓑ ½ ² ٣ 三 日本語 Ελληνικά",
    "tab\there\x01\x7f and\u00a0nbsp",
    "<b>tag</b> &amp; &#123; 'quoted' \"double\" back\\slash {json: [1, 2]}",
    "word " * 17000,  # past the last position
]


def _vectors(sql: str, texts: list[str | None]) -> list[str | None]:
    """``sql`` (of ``t``) of each of ``texts``, as text, in their order."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT ({sql})::text FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n) ORDER BY n",
            [texts],
        )
        return [row[0] for row in cursor.fetchall()]


def _assert_same_vectors(texts: list[str]) -> int:
    """The vector of the words the worker gives of each of ``texts`` is the database's
    vector of the text; how many it gave words for."""
    texts = [t.replace("\x00", "") for t in texts]  # (the index drops NUL)
    words = [backends.index_words(t) for t in texts]
    given = _vectors("to_tsvector('simple'::regconfig, t)", words)
    theirs = _vectors(DATABASE_VECTOR, texts)
    for text, mine, vector, expected in zip(texts, words, given, theirs, strict=True):
        if mine is not None:
            assert vector == expected, text[:200]
    return sum(w is not None for w in words)


def test_edge_texts_get_the_database_vector_or_none():
    assert _assert_same_vectors(EDGES) >= 9
    # past the edges: left to the database
    for text in ("café", "日本語", "ⓐ", "naïve → x"):
        assert backends.index_words(text) is None, text
    assert backends.index_words("Hello, hello → World") == "Hello  hello   World"


def test_random_ascii_texts_get_the_database_vector():
    chars = string.printable + "_" * 5 + "é→"
    rng = random.Random(25)
    texts = ["".join(rng.choices(chars, k=rng.randint(0, 400))) for _ in range(500)]
    assert _assert_same_vectors(texts) > 100


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
def test_rows_with_and_without_given_words_are_found_alike(make_transcript, tool_heavy_jsonl):
    transcript = make_transcript(tool_heavy_jsonl)
    runner.execute_run(transcript.runs.get().pk)
    rows = Entry.objects.filter(transcript=transcript)
    assert rows.count() > 10
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(words) FROM search_entry WHERE transcript_id = %s AND "
            f"vector IS DISTINCT FROM {DATABASE_VECTOR.replace('(t,', '(body,')}",
            [transcript.pk],
        )
        assert cursor.fetchone() == (0, 0)
        cursor.execute("SELECT count(*) FROM search_entry WHERE words IS NOT NULL")
        assert cursor.fetchone() == (0,)  # never stored
    # a row written without words (the ORM, as before) gets the database's vector, and is found
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
