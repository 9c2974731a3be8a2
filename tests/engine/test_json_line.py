"""``decode_json_line`` reads every line as the standard library's decoder with ContextLab's hooks
does (its msgspec fast path changes speed, not values, counts or reasons)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest

from contextlab.engine.input import json_line
from contextlab.engine.input.json_line import decode_json_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

EDGE_LINES = [
    '{"a": 1, "b": [1.5, -0.0, 1e-400, 2.2250738585072011e-308, 1.7976931348623157e308]}',
    '{"n": 123456789012345678901234567890, "m": -0, "e": 1E2}',
    '{"a": 1, "a": 2}',
    '  {"a" : [1 , 2]}  ',
    '{"t": "\\u00e9\\ud83d\\ude00 \\/ \\"q\\""}',
    '{"nul": "a\\u0000b"}',
    '{"lone": "x\\ud800y", "k\\udfff": 1}',
    '{"raw": "x\ud800y"}',
    '{"big": 1e999}',
    '{"small": -1e400}',
    '{"nan": NaN}',
    '{"inf": Infinity}',
    '{"tab": "a\tb"}',
    '{"a": 1}x',
    "[1,]",
    "",
    "\ufeff{}",
    "[" * 150 + "]" * 150,
    "[" * 250 + "]" * 250,
    '{"a":' * 300 + "1" + "}" * 300,
    "[" * 5000 + "]" * 5000,
]


def reading(text: str) -> tuple[str, Any]:
    try:
        return "value", decode_json_line(text)
    except ValueError as error:
        return type(error).__name__, str(error)


def standard_reading(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Any]:
    class Refusing:
        def decode(self, text: str) -> Any:
            raise msgspec.DecodeError("refused")

    with monkeypatch.context() as patched:
        patched.setattr(json_line, "_FAST_DECODER", Refusing())
        return reading(text)


def fixture_lines() -> list[str]:
    lines: list[str] = []
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        lines += path.read_text(encoding="utf-8", errors="surrogateescape").splitlines()[:200]
    return lines


@pytest.mark.parametrize("text", EDGE_LINES, ids=lambda t: repr(t)[:30])
def test_an_edge_line_reads_as_the_standard_decoder_reads_it(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, standard = reading(text), standard_reading(text, monkeypatch)
    assert repr(fast) == repr(standard)


def test_the_fixtures_lines_read_as_the_standard_decoder_reads_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = fixture_lines()
    assert len(lines) > 500
    for text in lines:
        assert repr(reading(text)) == repr(standard_reading(text, monkeypatch))


def test_numbers_read_to_the_same_floats() -> None:
    """Random decimal spellings, subnormals to overflow: the same float (repr) or both refused."""
    rng = random.Random(5)
    for _ in range(20_000):
        whole, fraction = (rng.randint(0, 10 ** rng.randint(1, 22)) for _ in range(2))
        text = f"[{whole}.{fraction}e{rng.randint(-340, 320)}]"
        expected: Any
        try:
            expected = json.loads(text, parse_float=json_line._finite_float)
        except ValueError:
            expected = "refused"
        try:
            got: Any = decode_json_line(text)[0]
        except ValueError:
            got = "refused"
        assert repr(got) == repr(expected), text


@pytest.mark.parametrize("spaced", [False, True])
def test_depth_limit_at_its_boundary(spaced: bool) -> None:
    """The shortest lines one level past ``MAX_JSON_DEPTH`` (two characters a level: the
    length gate before the bracket counts must let them through) are refused; one level less
    is read, also padded past the gate."""
    depth = json_line.MAX_JSON_DEPTH
    too_deep = "[" * (depth + 1) + "]" * (depth + 1)
    assert len(too_deep) == 2 * depth + 2
    with pytest.raises(json_line.JSONLineError, match="nested deeper"):
        decode_json_line(too_deep)
    within = "[" * depth + "]" * depth
    if spaced:
        within = within + " " * 10
    value, replaced = decode_json_line(within)
    assert replaced == 0
    for _ in range(depth - 1):
        value = value[0]
    assert value == []
