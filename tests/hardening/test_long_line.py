"""One huge line without whitespace (issue #23: a 63 MB line took 3.6 GB and 73 s to count):
the replay counts it in bounded memory, and counting in pieces gives the same figures as
counting whole wherever the pieces are cut at line starts."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from contextlab.engine.measures.tokens import (
    COUNT_CHUNK_CHARS,
    TiktokenCounter,
    _encoding,
    count_pieces,
)
from tests.conftest import DEMO, ROOT

pytestmark = pytest.mark.slow

MB = 1024 * 1024


def session_with_one_long_line(path: Path, size: int) -> None:
    records = [json.loads(line) for line in (DEMO / "marot__spotter__tool_heavy.jsonl").open()]
    for record in reversed(records):
        content = record.get("message", {}).get("content")
        if record.get("type") == "user" and isinstance(content, list):
            results = [b for b in content if b.get("type") == "tool_result"]
            if results:
                results[0]["content"] = "x" * size  # one pre-tokenizer piece as long as the line
                break
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_30_mb_line_is_replayed_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    session_with_one_long_line(path, 30 * MB)
    # the replay in a child of its own, which reports its own peak (in KiB)
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\n"
            "from contextlab import engine\n"
            "session = engine.load_session(sys.argv[1])\n"
            "config, preset = engine.resolve_config('auto', version=session.version)\n"
            "result = engine.replay(session, config, mode='recorded', preset_name=preset).to_json()\n"
            "assert result['requests']\n"
            # VmHWM: this image's own peak (ru_maxrss would count the pages of the test
            # process it was forked from)
            "print([l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1])\n",
            str(path),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr[-2000:]
    peak_mb = int(probe.stdout.split()[-1]) / 1024
    assert peak_mb <= 600, f"peak {peak_mb:.0f} MB"


def test_counting_in_pieces_equals_counting_whole_when_cut_at_line_starts() -> None:
    rng = random.Random(7)
    words = ["def", "return", "  ", "\n", "\n\n", "x = 1", "日本語", "{'a': 2}", "    pass", "é"]
    text = "".join(rng.choice(words) + rng.choice([" ", "\n", "", "\t"]) for _ in range(200_000))
    encoding = _encoding()
    pieces = list(count_pieces(text, 4096))
    assert "".join(pieces) == text
    assert max(len(p) for p in pieces) <= 4096
    whole = len(encoding.encode_ordinary(text))
    assert sum(len(encoding.encode_ordinary(p)) for p in pieces) == whole
    counter = TiktokenCounter()
    assert counter.count_plain(text) == whole  # over COUNT_CHUNK_CHARS: counted in pieces
    # the whole text's content kind scales the sum of the pieces, as it would the whole
    assert counter.count(text) == counter.kind_ratios.scale(text, whole)


def test_a_line_with_no_line_start_is_cut_at_the_chunk_size() -> None:
    pieces = list(count_pieces("x" * (3 * COUNT_CHUNK_CHARS + 5)))
    assert [len(p) for p in pieces] == [COUNT_CHUNK_CHARS] * 3 + [5]
