"""Write JSON piece by piece, the same characters ``json.dumps`` gives.

``json.dumps`` of a whole result holds the whole JSON string at once (and its pieces while it
joins them); ``json.dump`` to a stream does not, but runs the pure-Python encoder, several times
slower. ``write_json`` walks the first levels of dicts and lists itself and hands each value
below them to ``json.dumps`` (the C encoder): the largest string held is one request's row.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, Protocol


class TextSink(Protocol):
    """Where text is written: a text file, or a stream that takes text (a database's COPY)."""

    def write(self, text: str, /) -> object: ...


class JsonText(str):
    """Text that is already JSON (``json_list_parts``' part): ``write_json`` writes it as it
    is, instead of encoding its values a second time."""


def write_json(
    value: Any,
    out: TextSink,
    *,
    depth: int = 2,
    ensure_ascii: bool = True,
    separators: tuple[str, str] = (", ", ": "),
) -> None:
    """``out.write(json.dumps(value, ensure_ascii=..., separators=...))``, written piece by
    piece through ``depth`` levels of dicts and lists."""
    item_separator, key_separator = separators
    if isinstance(value, JsonText):
        out.write(value)
    elif depth > 0 and isinstance(value, dict) and all(isinstance(k, str) for k in value):
        out.write("{")
        for i, (key, item) in enumerate(value.items()):
            key_text = json.dumps(key, ensure_ascii=ensure_ascii)
            out.write(f"{item_separator if i else ''}{key_text}{key_separator}")
            write_json(item, out, depth=depth - 1, ensure_ascii=ensure_ascii, separators=separators)
        out.write("}")
    elif depth > 0 and isinstance(value, list):
        out.write("[")
        for i, item in enumerate(value):
            if i:
                out.write(item_separator)
            write_json(item, out, depth=depth - 1, ensure_ascii=ensure_ascii, separators=separators)
        out.write("]")
    else:
        out.write(json.dumps(value, ensure_ascii=ensure_ascii, separators=separators))


def json_list_parts(items: Iterable[Any], max_chars: int) -> Iterator[str]:
    """The JSON texts of consecutive runs of ``items`` as lists, in order, each of at most
    ``max_chars`` characters of items (an item longer than that is a list of its own; no
    items: no part). Their lists joined are ``items``, as ``write_json`` writes them: a store
    keeps each part as one value (PostgreSQL's ``jsonb`` holds at most 256 MB in one), and
    one part's text is held at a time."""
    batch: list[str] = []
    size = 0
    for item in items:
        text = json.dumps(item)
        if batch and size + len(text) > max_chars:
            yield "[" + ", ".join(batch) + "]"
            batch, size = [], 0
        batch.append(text)
        size += len(text) + 2
    if batch:
        yield "[" + ", ".join(batch) + "]"
