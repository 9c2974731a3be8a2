"""A live session's file read on from where the last append's read stopped
(``engine.load_growing``) is the session a read from its first byte makes: the same messages,
problems and side records, and a replay of it gives identical JSON, whatever the append brought
(a compaction, a subagent file, a problem line) and however many appends came before."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.input.session_cache import load_growing
from contextlab.engine.input.sources.claude_code.growing import STATE_VERSION
from tests.conftest import DEMO, FIXTURES
from tests.engine.builders import TranscriptBuilder

TOOL_HEAVY = DEMO / "marot__spotter__tool_heavy.jsonl"
SUBAGENT = (
    FIXTURES / "marot__spotter__8463c716-a2ea-4c14-9efa-87158ebd9f20_subagents_agent-a7be2f0.jsonl"
)


def replayed(session: engine.Session) -> dict[str, Any]:
    config, preset = engine.resolve_session_config(session)
    return engine.replay(session, config, mode="recorded", preset_name=preset).to_json()


def assert_same_session(grown: engine.Session, whole: engine.Session) -> None:
    assert engine.messages_json(grown) == engine.messages_json(whole)
    assert grown.problems == whole.problems
    assert grown.side == whole.side
    assert (grown.versions, grown.session_id, grown.record_count) == (
        whole.versions,
        whole.session_id,
        whole.record_count,
    )
    assert grown.record_uuids == whole.record_uuids
    a, b = replayed(grown), replayed(whole)
    # identical JSON for every request (and the rest of the result)
    assert json.dumps(a["requests"], sort_keys=True) == json.dumps(b["requests"], sort_keys=True)
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def compacting_transcript() -> tuple[bytes, list[int]]:
    """A session whose later part holds a recorded compaction; the offsets of its line ends."""
    b = TranscriptBuilder()
    for turn in range(3):
        b.prompt(f"turn {turn}: read the files and fix the tests")
        b.assistant(
            [{"type": "thinking", "thinking": "Looking at the layout first.", "signature": "s"}]
        )
        b.tool_call("Read", {"file_path": f"/work/project/src/mod{turn}.py"}, "x = 1\n" * 300)
        b.tool_call("Bash", {"command": "pytest -q"}, f"{turn} failed, 3 passed")
        b.assistant([{"type": "text", "text": f"Fixed turn {turn}."}])
    b.compact("Summary: the user asked for fixes; three modules were edited.", 150_000)
    for turn in range(3, 5):
        b.prompt(f"turn {turn}: now the docs")
        b.tool_call("Read", {"file_path": "/work/project/README.md"}, "# Project\n" * 50)
        b.assistant([{"type": "text", "text": f"Docs updated in turn {turn}."}])
    data = b.text().encode()
    ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    return data, ends


def test_the_builder_session_compacts_after_its_start():
    data, _ = compacting_transcript()
    assert data.index(b"compact_boundary") > len(data) // 2


@pytest.mark.parametrize("share", [0.2, 0.5, 0.62, 0.75, 0.9])
def test_an_append_read_on_is_a_whole_read_across_a_compaction(tmp_path, share):
    data, ends = compacting_transcript()
    cut = ends[int(len(ends) * share)]
    path = tmp_path / "session.jsonl"
    path.write_bytes(data[:cut])
    first, resumed = load_growing(path, cache_dir=tmp_path / "cache", sha256="v1")
    assert not resumed
    first.close()
    path.write_bytes(data)
    grown, resumed = load_growing(
        path, cache_dir=tmp_path / "cache", sha256="v2", earlier_sha256="v1"
    )
    assert resumed, "the append was read from the first byte"
    whole = engine.load_session(str(path))
    assert_same_session(grown, whole)
    if share > 0.62:
        assert any(
            e["step"] == "autocompact" for r in replayed(grown)["requests"] for e in r["events"]
        )
    # the state moved on: the earlier one is gone, the grown one is there for the next append
    names = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert names == [f"v2.reading-v{STATE_VERSION}.pickle"]


def test_many_appends_of_a_real_session_each_equal_a_whole_read(tmp_path):
    data = TOOL_HEAVY.read_bytes()
    ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    path = tmp_path / "session.jsonl"
    cache = tmp_path / "cache"
    earlier = None
    resumed_count = 0
    for n, cut in enumerate([ends[len(ends) * k // 5] for k in range(1, 5)] + [len(data)]):
        path.write_bytes(data[:cut])
        grown, resumed = load_growing(path, cache_dir=cache, sha256=f"v{n}", earlier_sha256=earlier)
        resumed_count += resumed
        assert_same_session(grown, engine.load_session(str(path)))
        earlier = f"v{n}"
    assert resumed_count == 4


def test_an_appended_subagent_file_and_main_lines(tmp_path):
    """A session folder: the main file grows and a subagent's file appears beside it."""
    data, ends = compacting_transcript()
    folder = tmp_path / "upload"
    (folder / "subagents").mkdir(parents=True)
    main = folder / "session.jsonl"
    main.write_bytes(data[: ends[len(ends) // 3]])
    load_growing(folder, cache_dir=tmp_path / "cache", sha256="v1")[0].close()
    main.write_bytes(data)
    shutil.copy(SUBAGENT, folder / "subagents" / "agent-a7be2f0.jsonl")
    grown, resumed = load_growing(
        folder, cache_dir=tmp_path / "cache", sha256="v2", earlier_sha256="v1"
    )
    assert resumed
    assert any(t.kind == "subagent" for t in grown.threads)
    assert_same_session(grown, engine.load_session(str(folder)))


def test_appended_lines_with_problems_are_reported_as_a_whole_read_reports_them(tmp_path):
    data, ends = compacting_transcript()
    cut = ends[len(ends) // 2]
    path = tmp_path / "session.jsonl"
    path.write_bytes(data[:cut] + b'{"type": "mystery-record"}\n')
    load_growing(path, cache_dir=tmp_path / "cache", sha256="v1")[0].close()
    path.write_bytes(data[:cut] + b'{"type": "mystery-record"}\nnot json\n' + data[cut:])
    grown, resumed = load_growing(
        path, cache_dir=tmp_path / "cache", sha256="v2", earlier_sha256="v1"
    )
    assert resumed
    whole = engine.load_session(str(path))
    assert {p.code for p in whole.problems} >= {"invalid_json", "unknown_record_type"}
    assert_same_session(grown, whole)


def test_a_state_of_other_bytes_is_not_read_on(tmp_path):
    """A file whose bytes before the state's offset are not the earlier version's (a caller
    naming the wrong earlier digest): read from the first byte. The state is keyed by the
    earlier version's digest, so only its last bytes are compared, not every byte."""
    data, ends = compacting_transcript()
    cut = ends[len(ends) // 2]
    path = tmp_path / "session.jsonl"
    path.write_bytes(data[:cut])
    load_growing(path, cache_dir=tmp_path / "cache", sha256="v1")[0].close()
    rewritten = data[: cut - 20] + data[cut - 20 : cut].upper() + data[cut:]
    path.write_bytes(rewritten)
    grown, resumed = load_growing(
        path, cache_dir=tmp_path / "cache", sha256="v2", earlier_sha256="v1"
    )
    assert not resumed
    assert_same_session(grown, engine.load_session(str(path)))


def test_a_last_line_without_its_end_leaves_no_state(tmp_path):
    """The next read cannot go on from the middle of a line: it reads the file whole."""
    data, ends = compacting_transcript()
    cut = ends[len(ends) // 2] - 1  # the line's newline left out
    path = tmp_path / "session.jsonl"
    path.write_bytes(data[:cut])
    load_growing(path, cache_dir=tmp_path / "cache", sha256="v1")[0].close()
    assert not list((tmp_path / "cache").glob("v1.*"))
    path.write_bytes(data)
    grown, resumed = load_growing(
        path, cache_dir=tmp_path / "cache", sha256="v2", earlier_sha256="v1"
    )
    assert not resumed
    assert_same_session(grown, engine.load_session(str(path)))


def test_the_appended_bytes_alone_are_read(tmp_path, monkeypatch):
    """Reading on parses only the new lines: the earlier lines are never decoded again."""
    from contextlab.engine.input import json_line
    from contextlab.engine.input.sources.claude_code import records

    data, ends = compacting_transcript()
    cut = ends[len(ends) - 4]
    path = tmp_path / "session.jsonl"
    path.write_bytes(data[:cut])
    load_growing(path, cache_dir=tmp_path / "cache", sha256="v1")[0].close()
    path.write_bytes(data)
    decoded: list[str] = []
    real = json_line.decode_json_line

    def counting(text: str) -> Any:
        decoded.append(text)
        return real(text)

    monkeypatch.setattr(records, "decode_json_line", counting)
    _grown, resumed = load_growing(
        path, cache_dir=tmp_path / "cache", sha256="v2", earlier_sha256="v1"
    )
    assert resumed
    assert "".join(decoded).encode() == data[cut:]


def test_an_append_adds_one_frame_to_the_state_not_a_whole_new_one(tmp_path):
    """What is written per append grows with the append: the earlier state is kept as it was
    and this read's frame (its new records) follows it."""
    data, ends = compacting_transcript()
    cut = ends[len(ends) - 6]
    path = tmp_path / "session.jsonl"
    cache = tmp_path / "cache"
    path.write_bytes(data[:cut])
    load_growing(path, cache_dir=cache, sha256="v1")[0].close()
    before = (cache / f"v1.reading-v{STATE_VERSION}.pickle").read_bytes()
    path.write_bytes(data)
    load_growing(path, cache_dir=cache, sha256="v2", earlier_sha256="v1")[0].close()
    after = (cache / f"v2.reading-v{STATE_VERSION}.pickle").read_bytes()
    assert after.startswith(before)
    assert len(after) - len(before) < 2 * (len(data) - cut) + 4096
    assert len(after) - len(before) < len(before) / 2


def test_a_state_cut_short_is_read_from_the_first_byte(tmp_path):
    """A write of the state cut short (a full disk, a crash) costs a whole read, nothing else."""
    data, ends = compacting_transcript()
    path = tmp_path / "session.jsonl"
    cache = tmp_path / "cache"
    path.write_bytes(data[: ends[len(ends) // 3]])
    load_growing(path, cache_dir=cache, sha256="v1")[0].close()
    path.write_bytes(data[: ends[2 * len(ends) // 3]])
    load_growing(path, cache_dir=cache, sha256="v2", earlier_sha256="v1")[0].close()
    state = cache / f"v2.reading-v{STATE_VERSION}.pickle"
    state.write_bytes(state.read_bytes()[:-100])
    path.write_bytes(data)
    grown, resumed = load_growing(path, cache_dir=cache, sha256="v3", earlier_sha256="v2")
    assert not resumed
    assert_same_session(grown, engine.load_session(str(path)))
