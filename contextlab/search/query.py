"""What a search box's text means, the same on every database: words and quoted phrases, all
of which a block must hold (case-insensitive), and the highlighted snippet of a hit.

A word is a run of letters and digits (``[^\\W_]+``): anything else separates words, as the
FTS5 ``unicode61`` tokenizer and the PostgreSQL index (``search.backends``) split the text.
A word the user types with separators inside (``app.py``, ``src/app.py``, ``my_func``) is the
phrase of its parts, so a path or an identifier is found where the text holds it. Every
character of the query that is not part of a word is dropped: no FTS5 or tsquery syntax ever
reaches the database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

#: a query longer than this (characters) is refused, not searched
MAX_QUERY_CHARS = 500
#: terms (words and phrases) kept from a query; more would only slow the search
MAX_TERMS = 12
#: words kept in one phrase, and characters kept of one word
MAX_PHRASE_WORDS = 16
MAX_WORD_CHARS = 100

_WORD = re.compile(r"[^\W_]+")
_QUOTED = re.compile(r'"([^"]*)"')


class QueryError(ValueError):
    """A query that cannot be searched, with the reason a user can read."""


@dataclass(frozen=True)
class Query:
    """The terms of a search: each a phrase of one or more lower-case words."""

    terms: tuple[tuple[str, ...], ...]

    @property
    def empty(self) -> bool:
        return not self.terms

    def fts5(self) -> str:
        """The FTS5 MATCH expression: every term, each a quoted phrase (words hold letters and
        digits only, so nothing inside the quotes needs escaping)."""
        return " ".join('"' + " ".join(words) + '"' for words in self.terms)

    def tsquery(self) -> str:
        """The PostgreSQL ``to_tsquery`` text: terms joined by ``&``, a phrase's words by
        ``<->`` (followed by)."""
        return " & ".join("(" + " <-> ".join(words) + ")" for words in self.terms)

    def pattern(self) -> re.Pattern[str] | None:
        """A regex finding any term in the original text (for the snippet)."""
        return _pattern(self.terms) if self.terms else None


@lru_cache(maxsize=64)
def _pattern(terms: tuple[tuple[str, ...], ...]) -> re.Pattern[str]:
    parts = [r"[\W_]+".join(re.escape(w) for w in words) for words in terms]
    return re.compile(
        r"(?<![^\W_])(?:" + "|".join(sorted(parts, key=len, reverse=True)) + r")(?![^\W_])",
        re.IGNORECASE,
    )


def parse(text: str | None) -> Query:
    """The query ``text`` means; raises ``QueryError`` for one that is empty, too long or
    holds a NUL. A query of punctuation only gives an empty ``Query`` (nothing to find)."""
    text = text or ""
    if "\x00" in text:
        raise QueryError("The search text holds a NUL character.")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"The search text is longer than {MAX_QUERY_CHARS} characters.")
    if not text.strip():
        raise QueryError("Type a word or a phrase to search for.")
    chunks = _QUOTED.findall(text)
    chunks.extend(_QUOTED.sub(" ", text).split())
    terms: list[tuple[str, ...]] = []
    for chunk in chunks:
        words = tuple(w.lower()[:MAX_WORD_CHARS] for w in _WORD.findall(chunk))[:MAX_PHRASE_WORDS]
        if words and words not in terms:
            terms.append(words)
    return Query(tuple(terms[:MAX_TERMS]))


def snippet(text: str, query: Query, *, before: int = 70, after: int = 150) -> SafeString:
    """An escaped extract of ``text`` around its first match, every match in ``<mark>``. The
    text is a transcript's (hostile HTML): only the marks this function adds are markup."""
    pattern = query.pattern()
    found = pattern.search(text) if pattern is not None else None
    start = max(0, found.start() - before) if found else 0
    end = min(len(text), (found.end() if found else 0) + after)
    # start and end at a word boundary where one is near
    if start > 0:
        space = text.find(" ", start, start + 20)
        start = space + 1 if space != -1 else start
    if end < len(text):
        space = text.rfind(" ", end - 20, end)
        end = space if space > start else end
    piece = " ".join(text[start:end].split())
    out: list[str] = ["…" if start > 0 else ""]
    last = 0
    if pattern is not None:
        for match in pattern.finditer(piece):
            out.append(escape(piece[last : match.start()]))
            out.append("<mark>" + escape(match.group(0)) + "</mark>")
            last = match.end()
    out.append(escape(piece[last:]))
    out.append("…" if end < len(text) else "")
    return mark_safe("".join(out))  # every piece of the transcript's text is escaped above
