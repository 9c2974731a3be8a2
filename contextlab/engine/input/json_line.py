"""One line of JSON as ContextLab accepts it: hostile input turned into a reason or a clean value.

A transcript comes from a stranger: non-finite numbers, nesting past ``MAX_JSON_DEPTH``, and NUL
characters or lone surrogates (valid JSON escapes that no database column or page can hold) are
refused or replaced here, before any adapter reads the value.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec

#: JSON nested deeper than this is rejected per line (Claude Code records nest about 10 deep).
MAX_JSON_DEPTH = 200

#: JSON escapes of what no database or page can hold: NUL and UTF-16 surrogate halves (a pair
#: decodes to one character; a lone half stays a surrogate, which UTF-8 cannot encode)
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class JSONLineError(ValueError):
    """A line that is JSON text but not data ContextLab accepts; the message says why."""


def _reject_constant(name: str) -> Any:
    raise JSONLineError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONLineError(f"the number {text[:40]} is out of range")
    return value


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
#: msgspec reads what the decoder above accepts into the same values, three times as fast (no
#: Python call per number), and refuses the rest: non-finite numbers, a lone surrogate
#: character. A line it refuses is read again by the decoder above, which accepts or gives its
#: reason as before (tests/engine/test_json_line.py holds both readings equal).
_FAST_DECODER = msgspec.json.Decoder()


def decode_json_line(text: str) -> tuple[Any, int]:
    """Parse one line of JSON as ContextLab accepts it: ``(value, characters_replaced)``.

    Raises ``ValueError`` (``json.JSONDecodeError`` or ``JSONLineError``) with a readable reason
    for what is not JSON or not acceptable: ``NaN``/``Infinity`` and numbers that overflow to
    them, nesting deeper than ``MAX_JSON_DEPTH``. NUL characters and lone surrogates (valid JSON
    escapes, but unstorable in PostgreSQL and unencodable in a page) are replaced with U+FFFD,
    in keys and values; the count says how many.
    """
    fast = False
    try:
        if type(text) is str and not text.startswith("\ufeff"):
            try:
                value = _FAST_DECODER.decode(text)
                fast = True
            except (msgspec.DecodeError, UnicodeEncodeError):  # a str msgspec cannot encode
                # what json.loads does with these hooks, without building a decoder per line
                value = _DECODER.decode(text)
        else:
            value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise JSONLineError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    # cheap scans first: only a line with enough brackets can be too deep, and only one with a
    # NUL or surrogate escape can hold an unstorable character
    if (
        # (the value parsed: each bracket of a line nested that deep is closed again, so a
        # line of fewer than two characters a level cannot be)
        len(text) > 2 * MAX_JSON_DEPTH
        and text.count("[") + text.count("{") > MAX_JSON_DEPTH
        and _deeper_than(value, MAX_JSON_DEPTH)
    ):
        raise JSONLineError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    # (a line without any ``\u`` escape has none of them: one fast scan before the pattern's;
    # what msgspec read holds no lone surrogate, which it refuses, so there only a ``\u0000``
    # escape can make one: a needle of six characters, scanned about four times as fast as
    # ``\u``, whose ``u`` is in most words)
    needle = "\\u0000" if fast else "\\u"
    if needle not in text or _SUSPECT_ESCAPE.search(text) is None:
        return value, 0
    replaced = [0]
    return _scrub(value, replaced), replaced[0]


def _deeper_than(value: Any, limit: int) -> bool:
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def _scrub_text(text: str, replaced: list[int]) -> str:
    cleaned, count = _UNSTORABLE.subn("\ufffd", text)
    replaced[0] += count
    return cleaned


def _scrub(value: Any, replaced: list[int]) -> Any:
    # recursion is safe: the depth was checked first
    if isinstance(value, str):
        return _scrub_text(value, replaced)
    if isinstance(value, list):
        return [_scrub(v, replaced) for v in value]
    if isinstance(value, dict):
        return {_scrub_text(k, replaced): _scrub(v, replaced) for k, v in value.items()}
    return value
