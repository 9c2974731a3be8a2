"""Write JSON piece by piece, the same characters ``json.dumps`` gives.

``json.dumps`` of a whole result holds the whole JSON string at once (and its pieces while it
joins them); ``json.dump`` to a stream does not, but runs the pure-Python encoder, several times
slower. ``write_json`` walks the first levels of dicts and lists itself and hands each value
below them to ``json.dumps`` (the C encoder): the largest string held is one request's row.
"""

from __future__ import annotations

import json
from typing import Any, Protocol


class TextSink(Protocol):
    """Where text is written: a text file, or a stream that takes text (a database's COPY)."""

    def write(self, text: str, /) -> object: ...


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
    if depth > 0 and isinstance(value, dict) and all(isinstance(k, str) for k in value):
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
