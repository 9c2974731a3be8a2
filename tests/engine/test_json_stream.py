"""``write_json`` writes what ``json.dumps`` returns, piece by piece."""

from __future__ import annotations

import io
import json

import pytest

from contextlab import engine
from contextlab.engine.results.json_stream import write_json
from tests.engine.test_pipeline import long_session

VALUES = [
    {},
    [],
    "a string → 🎉",
    1.5,
    {"a": [1, {"b": '→🎉 \\ " \n\t'}], "c": {}, "d": None},
    {"non-str keys below": {1: 2, None: 3}},
    [[1, [2, [3, [4]]]]],
]
FORMATS = [{}, {"ensure_ascii": False, "separators": (",", ":")}]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("options", FORMATS)
def test_write_json_writes_what_json_dumps_returns(value, options):
    out = io.StringIO()
    write_json(value, out, **options)
    assert out.getvalue() == json.dumps(value, **options)


def test_a_replay_result_written_is_its_dumped_json(tmp_path):
    session = engine.load_session(str(long_session(5).write(tmp_path / "s.jsonl")))
    data = engine.replay(session, engine.get_preset("claude-code-2.1.88")).to_json()
    pieces: list[str] = []

    class Sink:
        def write(self, text: str) -> None:
            pieces.append(text)

    write_json(data, Sink(), ensure_ascii=False, separators=(",", ":"))
    assert "".join(pieces) == json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    longest = max(map(len, pieces))
    assert longest < len("".join(pieces)) / 2  # written in pieces, never the whole at once


@pytest.mark.parametrize("count", [0, 1, 3, 40])
def test_a_part_of_json_text_is_written_as_the_items_it_holds(count):
    """A result whose requests fit one part is written with that part's text
    (``engine.JsonText``, not encoded again): the same characters as ``json.dumps``."""
    items = [{"index": i, "text": f"caf\u00e9 {i}", "sizes": [i, i * 2]} for i in range(count)]
    parts = list(engine.json_list_parts(items, 1 << 20))
    assert len(parts) == (1 if items else 0)
    value = {"summary": {"n": count}, "requests": engine.JsonText(parts[0]) if parts else []}
    out = io.StringIO()
    write_json(value, out)
    assert out.getvalue() == json.dumps({"summary": {"n": count}, "requests": items})
