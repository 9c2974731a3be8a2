"""The full-text index behind one interface: PostgreSQL (a ``tsvector`` column, GIN-indexed,
matched with Django's ``SearchQuery``) in production, SQLite's FTS5 locally. Both index the
text in runs of letters and digits, as ``search.query`` splits a query, and take the same ``Query``, so a search finds the same
blocks on either (tests/search run both)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchVectorField
from django.db import connection
from django.db.models import Max, Min, QuerySet
from django.db.models.expressions import RawSQL

from contextlab.search.models import Entry
from contextlab.search.query import Query

#: the FTS5 table (SQLite) kept in step with ``search_entry`` by triggers (both made by
#: ``migrations/0001``; PostgreSQL gets a generated ``vector`` column and its GIN index)
FTS_TABLE = "search_entry_fts"
#: SQLite: sessions searched in the first step (newest first); each next step takes twice as
#: many, so a word found everywhere stops after a few sessions and one found nowhere takes
#: about log2(sessions) steps
FIRST_STEP_SESSIONS = 4
#: SQLite: up to this many matching rows in the whole index, one ordered match is quicker
#: than steps (reading and sorting a row costs a few microseconds)
FEW_MATCHES = 2000
#: rows written per statement
BATCH = 500


def write_entries(entries: Iterable[Entry]) -> int:
    """Insert ``entries`` (new rows) in statements of ``BATCH`` rows (``entries`` may read
    the database as they come: one batch is held at a time); how many. On PostgreSQL each
    batch in one ``COPY``, each row with its text's words as the index reads them
    (``index_words``: the database makes the row's ``vector`` of them, ``migrations/0003``),
    or none where the worker cannot be sure to give the database's (it then works them out
    of the text itself); on SQLite in INSERTs (triggers keep the FTS5 table in step)."""
    count = 0
    batch: list[Entry] = []
    for entry in entries:
        batch.append(entry)
        if len(batch) >= BATCH:
            count += _insert(batch)
            batch = []
    return count + _insert(batch)


def _insert(batch: list[Entry]) -> int:
    if connection.vendor != "postgresql":
        return len(Entry.objects.bulk_create(batch))
    if not batch:
        return 0
    statement = f"COPY {Entry._meta.db_table} ({', '.join(_COPIED)}, words) FROM STDIN"
    # psycopg's own cursor (Django's has no COPY), its errors made Django's
    with (
        connection.cursor() as cursor,
        connection.wrap_database_errors,
        cursor.cursor.copy(statement) as copy,
    ):
        for entry in batch:
            copy.write_row([*(getattr(entry, name) for name in _COPIED), index_words(entry.body)])
    return len(batch)


#: the columns of a row ``write_entries`` copies (but its words): the model's, but its id
#: (the ``vector`` column, which the database makes, is not one of the model's fields)
_COPIED = tuple(f.attname for f in Entry._meta.concrete_fields if not f.primary_key)

#: characters that are no letter or digit in any locale: a text of ASCII and these only is
#: split into words alike here and by the database's ``[:alnum:]`` (tests/search check each
#: against it). Others (an accented letter: a letter, or not, by the server's locale) leave
#: the words to the database.
NOT_ALNUM = frozenset(
    "\u00a0\u00a7\u00ab\u00b0\u00b1\u00b7\u00bb\u00d7\u00f7"  # nbsp § « ° ± · » × ÷
    "\u2010\u2011\u2012\u2013\u2014\u2015\u2018\u2019\u201c\u201d\u2022\u2026"  # dashes quotes • …
    "\u2190\u2191\u2192\u2193\u2194\u21d2"  # arrows ← ↑ → ↓ ↔ ⇒
    "\u2264\u2265\u2260\u2248\u221e"  # ≤ ≥ ≠ ≈ ∞
    "\u2500\u2502\u250c\u2510\u2514\u2518\u251c\u2524\u252c\u2534\u253c"  # box drawing
    "\u2550\u2551\u2554\u2557\u255a\u255d\u2560\u2563"
    "\u25b6\u25b8\u25ba\u25bc\u25cf\u25cb\u25a0\u25a1"  # ▶ ▸ ► ▼ ● ○ ■ □
    "\u2605\u2606\u26a0\u2713\u2714\u2717\u2718\u274c\u2705"  # ★ ☆ ⚠ ✓ ✔ ✗ ✘ ❌ ✅
)
_SYMBOLS = "".join(sorted(NOT_ALNUM))
#: a character that is neither ASCII nor one of ``NOT_ALNUM``; one of ``NOT_ALNUM``
_UNSURE = re.compile("[^\\x00-\\x7f" + re.escape(_SYMBOLS) + "]")
_SYMBOL = re.compile("[" + re.escape(_SYMBOLS) + "]")
#: each ASCII byte as the words keep it: a letter or digit as it is, any other a space
_WORD_BYTES = bytes(c if chr(c).isalnum() and c < 128 else 32 for c in range(256))


def index_words(text: str) -> str | None:
    """What ``regexp_replace(text, '[^[:alnum:]]+', ' ', 'g')`` (the text the index's vector
    is made of, ``migrations/0001``) makes of ``text``, or the same words with more spaces
    between (``to_tsvector`` reads them alike): its letters and digits, every other
    character a space. Worked out here (a byte table: about a millisecond per 100 KB of
    text) rather than by the regular expression, which was about a fifth of the database's
    CPU per replay (bench/README.md, ``bench_run_db.py``). None where the database's words
    could differ (a character other than ASCII and ``NOT_ALNUM``: a letter or not by the
    server's locale)."""
    if not text.isascii():
        if _UNSURE.search(text):
            return None
        text = _SYMBOL.sub(" ", text)
    return text.encode("ascii").translate(_WORD_BYTES).decode("ascii")


def matching(entries: QuerySet[Entry], query: Query) -> QuerySet[Entry]:
    """The entries of ``entries`` whose text holds every term of ``query`` (none for an
    empty query)."""
    if query.empty:
        return entries.none()
    if connection.vendor == "postgresql":
        vector = RawSQL("search_entry.vector", [], output_field=SearchVectorField())
        return entries.alias(vector=vector).filter(
            vector=SearchQuery(query.tsquery(), search_type="raw", config="simple")
        )
    return entries.filter(
        id__in=RawSQL(f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s", (query.fts5(),))
    )


def first_matches(
    entries: QuerySet[Entry],
    sessions: Iterable[int],
    query: Query,
    *,
    order: Sequence[str],
    fields: Sequence[str],
    count: int,
    narrowed: bool = False,
) -> list[tuple[Any, ...]]:
    """``fields`` of the first ``count`` entries of ``sessions`` (``entries`` narrowed to
    them) holding every term of ``query``, in ``order``, which lists the newest session
    first (``-transcript_id``).

    PostgreSQL answers in one query (its GIN index gives the matching rows), and so does
    SQLite when few rows match. For a word in most blocks (``the``) FTS5 would hand every
    matching row id to the ordering first: tens of thousands of rows to read and sort for a
    page of 50. So then the sessions are searched newest first in growing steps, each step's
    full-text match bounded to the id range of its sessions' rows (FTS5 seeks to it), until
    ``count`` rows are found: the same rows in the same order, since every row of a step's
    sessions sorts before those of the next step's.

    ``narrowed`` (a tool or kind filter on ``entries``): the matches the filter keeps may be
    few, so a common word no longer means an early stop; one ordered match then, as before.
    """
    if order[0] != "-transcript_id":
        raise ValueError("first_matches lists the newest session first")
    if query.empty:
        return []
    if connection.vendor == "postgresql" or narrowed or _fts_count(query) <= FEW_MATCHES:
        return list(matching(entries, query).order_by(*order).values_list(*fields)[:count])
    newest_first = sorted(set(sessions), reverse=True)
    found: list[tuple[Any, ...]] = []
    start, size = 0, FIRST_STEP_SESSIONS
    while start < len(newest_first) and len(found) < count:
        step = newest_first[start : start + size]
        start, size = start + size, size * 2
        bounds = Entry.objects.filter(transcript_id__in=step).aggregate(
            low=Min("id"), high=Max("id")
        )
        if bounds["low"] is None:
            continue  # no indexed row in these sessions
        ids = RawSQL(
            f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s AND rowid BETWEEN %s AND %s",
            (query.fts5(), bounds["low"], bounds["high"]),
        )
        rows = entries.filter(transcript_id__in=step, id__in=ids).order_by(*order)
        found.extend(rows.values_list(*fields)[: count - len(found)])
    return found


def _fts_count(query: Query) -> int:
    """How many rows of the whole FTS5 index hold every term (FTS5 counts from its doclists
    without reading the rows: well under a millisecond for ``the`` over 100 sessions)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s", (query.fts5(),)
        )
        return int(cursor.fetchone()[0])
