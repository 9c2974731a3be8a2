"""JavaScript-compatible arithmetic and string helpers.

Claude Code is written in TypeScript; its thresholds and previews depend on JS semantics
(UTF-16 string lengths, Math.round, toFixed, JSON.stringify). These helpers reproduce them.
"""

from __future__ import annotations

import json
import math
from decimal import ROUND_HALF_UP, Decimal
from typing import Any


def js_len(text: str) -> int:
    """Length of ``text`` as JavaScript counts it (UTF-16 code units)."""
    # Fast path: pure-BMP strings have the same length in both languages.
    if text.isascii():
        return len(text)
    # astral characters are two UTF-16 code units; encoding is far faster than a Python loop
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def js_slice(text: str, end: int) -> str:
    """``text.slice(0, end)`` with ``end`` in UTF-16 code units."""
    if text.isascii() or end <= 0:
        return text[: max(end, 0)]
    units = 0
    for i, ch in enumerate(text):
        width = 2 if ord(ch) > 0xFFFF else 1
        if units + width > end:
            return text[:i]
        units += width
    return text


def js_round(value: float) -> int:
    """``Math.round``: halves round toward +infinity (Python's ``round`` is banker's)."""
    return math.floor(value + 0.5)


def js_to_fixed_1(value: float) -> str:
    """``Number.prototype.toFixed(1)``: half-up on the exact binary value."""
    return str(Decimal(value).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def format_file_size(size: int) -> str:
    """Claude Code's ``formatFileSize``: ``"812 bytes"``, ``"2KB"``, ``"48.8KB"``, ``"1.2MB"``."""
    if size < 1024:
        return f"{size} bytes"
    value = size / 1024
    for unit in ("KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            text = js_to_fixed_1(value)
            if text.endswith(".0"):
                text = text[:-2]
            return text + unit
        value /= 1024
    raise AssertionError("unreachable")


def json_stringify(value: Any) -> str:
    """``JSON.stringify`` (compact, non-ASCII kept, key order preserved)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
