"""The full-text index behind one interface: PostgreSQL (a ``tsvector`` column, GIN-indexed,
matched with Django's ``SearchQuery``) in production, SQLite's FTS5 locally. Both index the
text in runs of letters and digits, as ``search.query`` splits a query, and take the same ``Query``, so a search finds the same
blocks on either (tests/search run both)."""

from __future__ import annotations

from django.contrib.postgres.search import SearchQuery, SearchVectorField
from django.db import connection
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from contextlab.search.models import Entry
from contextlab.search.query import Query

#: the FTS5 table (SQLite) kept in step with ``search_entry`` by triggers (both made by
#: ``migrations/0001``; PostgreSQL gets a generated ``vector`` column and its GIN index)
FTS_TABLE = "search_entry_fts"


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
