"""A live session's read kept in memory (``session_cache._KEPT_READS``): the next append's
read goes on from its records without unpickling them, and the main thread is extended by the
appended records instead of built again from all of them (``claude_code.extending``). Whatever
the append brought, the session must be the one a read of the grown file from its first byte
makes; and an append that only continues the main chain must not be built whole."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from contextlab import engine
from contextlab.engine.input import session_cache
from contextlab.engine.input.session_cache import load_growing
from contextlab.engine.input.sources.claude_code.extending import READS
from tests.conftest import DEMO, FIXTURES
from tests.engine.builders import TranscriptBuilder
from tests.engine.test_growing_session import assert_same_session, compacting_transcript

SESSIONS = [
    DEMO / "marot__spotter__tool_heavy.jsonl",
    FIXTURES / "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
    FIXTURES / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl",
    FIXTURES / "Brads3290__cclogviewer__example.jsonl",
    FIXTURES / "hostile.jsonl",
    FIXTURES / "persisted_preview.jsonl",
]


def line_ends(data: bytes) -> list[int]:
    return [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]


def readable_ends(tmp_path: Path, data: bytes) -> list[int]:
    """The line ends from the first one where the file cut there is a session (before it, a
    read finds no message and refuses the file)."""
    ends = line_ends(data)
    probe = tmp_path / "probe.jsonl"
    for n, end in enumerate(ends):
        probe.write_bytes(data[:end])
        try:
            engine.load_session(str(probe)).close()
        except engine.TranscriptError:
            continue
        return ends[n:]
    return []


def assert_same_parse(grown: engine.Session, whole: engine.Session) -> None:
    """``assert_same_session`` without the replays (run at every cut)."""
    assert engine.messages_json(grown) == engine.messages_json(whole)
    assert [(t.id, t.kind, t.fork_index, t.synthetic_dropped) for t in grown.threads] == [
        (t.id, t.kind, t.fork_index, t.synthetic_dropped) for t in whole.threads
    ]
    assert grown.problems == whole.problems
    assert getattr(grown.problems, "dropped", 0) == getattr(whole.problems, "dropped", 0)
    assert grown.side == whole.side
    assert (grown.versions, grown.session_id, grown.record_count, grown.title) == (
        whole.versions,
        whole.session_id,
        whole.record_count,
        whole.title,
    )
    assert grown.record_uuids == whole.record_uuids


def grow(tmp_path: Path, data: bytes, cuts: list[int]) -> tuple[Counter[str], engine.Session]:
    """Grow a session file through ``cuts`` (the last its whole length), one read per append
    in this process, each checked against a whole read; how the reads built their threads."""
    path = tmp_path / "session.jsonl"
    cache = tmp_path / "cache"
    before = Counter(READS)
    earlier = None
    grown = None
    for n, cut in enumerate(cuts):
        path.write_bytes(data[:cut])
        grown, resumed = load_growing(path, cache_dir=cache, sha256=f"v{n}", earlier_sha256=earlier)
        assert resumed == (earlier is not None), f"append {n} was read from the first byte"
        whole = engine.load_session(str(path))
        assert_same_parse(grown, whole)
        whole.close()
        if n < len(cuts) - 1:
            grown.close()
        earlier = f"v{n}"
    assert grown is not None
    return Counter(READS) - before, grown


def linear_transcript(turns: int = 6) -> bytes:
    """A session whose every record continues the one before (no rewind, no compaction)."""
    b = TranscriptBuilder()
    for turn in range(turns):
        b.prompt(f"turn {turn}: read the module and fix it")
        b.assistant([{"type": "thinking", "thinking": "Reading first.", "signature": "s"}])
        b.tool_call("Read", {"file_path": f"/work/src/m{turn}.py"}, "y = 2\n" * 100)
        b.assistant(
            [{"type": "text", "text": f"Turn {turn}: "}, {"type": "text", "text": "fixed."}]
        )
    return b.text().encode()


def test_appends_that_continue_the_chain_are_extended_at_every_line(tmp_path):
    """Every cut at a line end, responses split between appends among them: only the first
    read builds the threads; each later one extends them and equals a whole read."""
    data = linear_transcript()
    ends = line_ends(data)
    reads, grown = grow(tmp_path, data, ends[2:])
    assert reads == Counter({"built whole": 1, "extended": len(ends) - 3})
    assert_same_session(grown, engine.load_session(str(tmp_path / "session.jsonl")))


@pytest.mark.parametrize("source", SESSIONS, ids=lambda p: p.name[:30])
def test_appends_of_real_sessions_equal_whole_reads(tmp_path, source):
    """Real sessions (rewinds, parallel tool results, compactions, hostile lines) cut at
    many line ends: the same session as a whole read, extended or built whole."""
    data = source.read_bytes()
    ends = readable_ends(tmp_path, data)
    step = max(1, len(ends) // 40)
    cuts = ends[1::step] + ([len(data)] if ends[-1] != len(data) else [])
    cuts = sorted({c for c in cuts if c <= len(data)})
    reads, grown = grow(tmp_path, data, cuts)
    assert sum(reads.values()) == len(cuts)
    assert_same_session(grown, engine.load_session(str(tmp_path / "session.jsonl")))


def test_most_appends_of_a_real_session_are_extended(tmp_path):
    data = (DEMO / "marot__spotter__tool_heavy.jsonl").read_bytes()
    reads, _ = grow(tmp_path, data, readable_ends(tmp_path, data))
    assert reads["extended"] >= reads["built whole"] * 3, reads


def test_an_append_across_a_compaction_is_built_whole_and_then_extended(tmp_path):
    data, ends = compacting_transcript()
    boundary = data.index(b"compact_boundary")
    cuts = [e for e in ends if e > len(data) // 4]
    reads, grown = grow(tmp_path, data, cuts)
    # the boundary starts a new root (no parent): that append is built whole
    assert reads["built whole"] >= 2
    assert reads["extended"] >= len(cuts) - 4
    assert any(e > boundary for e in cuts)
    assert_same_session(grown, engine.load_session(str(tmp_path / "session.jsonl")))


def test_a_rewind_is_built_whole_and_equals_a_whole_read(tmp_path):
    """A record hanging from an earlier one (an edited prompt) makes a branch: not extended."""
    b = TranscriptBuilder()
    first = b.prompt("write the parser")
    b.assistant([{"type": "text", "text": "Here is a parser."}])
    b.prompt("now add tests")
    b.assistant([{"type": "text", "text": "Tests added."}])
    before = b.text().encode()
    b.last_uuid = first["uuid"]  # the user went back to the first answer's prompt
    b.assistant([{"type": "text", "text": "Another parser."}])
    data = b.text().encode()
    reads, grown = grow(tmp_path, data, [len(before), len(data)])
    assert reads == Counter({"built whole": 2})
    assert len(grown.threads) == 2


def test_a_result_answering_a_passed_record_is_built_whole(tmp_path):
    """A tool result hanging from the chain that no call on it answered is reattached once an
    appended response makes that call: the append is built whole."""
    b = TranscriptBuilder()
    b.prompt("run it")
    call = b.assistant([{"type": "text", "text": "Running."}])[-1]
    # a result of a call not made yet, on a side branch of the chain
    b.tool_result("toolu_later", "done", parent=call["uuid"])
    b.last_uuid = call["uuid"]
    b.prompt("and?")
    before = b.text().encode()
    b.assistant([{"type": "tool_use", "id": "toolu_later", "name": "Bash", "input": {}}])
    data = b.text().encode()
    reads, _ = grow(tmp_path, data, [len(before), len(data)])
    assert reads == Counter({"built whole": 2})


def test_a_changed_state_file_is_not_read_on_from_memory(tmp_path):
    """The state on disk is the truth: a kept read whose state file was rewritten since is
    not used (the read goes on from the file, or from the first byte)."""
    data = linear_transcript()
    ends = line_ends(data)
    path, cache = tmp_path / "session.jsonl", tmp_path / "cache"
    path.write_bytes(data[: ends[5]])
    load_growing(path, cache_dir=cache, sha256="v1")[0].close()
    assert session_cache._KEPT_READS
    state = next(cache.glob("v1.reading-*"))
    state.write_bytes(b"not a state")
    path.write_bytes(data)
    before = Counter(READS)
    grown, resumed = load_growing(path, cache_dir=cache, sha256="v2", earlier_sha256="v1")
    assert not resumed
    assert Counter(READS) - before == Counter({"built whole": 1})
    assert_same_parse(grown, engine.load_session(str(path)))


def test_a_worker_reads_each_version_on_from_the_one_before(tmp_path, monkeypatch):
    """The worker's load of each version (``load_session_cached`` seeded by the version
    before) goes on from the read it kept of that version: the threads extended, only the new
    blocks' characters counted; each version's session equals a whole read and counts as a
    fresh load does, and the earlier version's session is left as it was."""
    from contextlab.engine.measures import tokenized
    from tests.engine.test_live_update_storage import CountingCounter, _figures

    monkeypatch.setattr(tokenized, "TiktokenCounter", CountingCounter)
    session_cache._RECENT.clear()
    data = linear_transcript(turns=8)
    ends = line_ends(data)
    cache = tmp_path / "cache"
    earlier: str | None = None
    previous: tuple[engine.Session, list[dict]] | None = None
    for n, cut in enumerate([*ends[3::3], len(data)]):
        folder = tmp_path / f"v{n}"
        folder.mkdir()
        path = folder / "session.jsonl"  # each version is a file of its own, as stored
        path.write_bytes(data[:cut])
        sha = engine.file_sha256(str(path))
        load_growing(path, cache_dir=cache, sha256=sha, earlier_sha256=earlier)[0].close()
        before = Counter(READS)
        CountingCounter.characters = 0
        worker = engine.load_session_cached(
            str(path), cache_dir=str(cache), sha256=sha, seed_sha256=earlier
        )
        counted = CountingCounter.characters
        whole = engine.load_session(str(path))
        assert_same_parse(worker, whole)
        fresh = engine.load_session_cached(str(path), cache_dir=str(tmp_path / f"fresh{n}"))
        assert _figures(worker) == _figures(fresh)
        if earlier is None:
            assert Counter(READS) == before  # the first upload: cached whole, no growing read
        elif n == 1:
            # the first version of the live session: read from the append's state
            assert Counter(READS) - before == Counter({"built whole": 1})
        else:
            assert Counter(READS) - before == Counter({"extended": 1})
            characters = sum(
                len(b.text) for t in worker.threads for m in t.messages for b in m.blocks
            )
            assert 0 < counted < characters / 2, (counted, characters, n)
        assert (sha in session_cache._VERSION_READS) == (earlier is not None)
        if previous is not None:
            # the version before, still held (``_RECENT``), is the session it was
            assert engine.messages_json(previous[0]) == previous[1]
        previous = (worker, engine.messages_json(worker))
        earlier = sha
    assert previous is not None
    assert_same_session(previous[0], engine.load_session(str(path)))


def test_a_worker_without_the_read_or_the_state_reads_the_file_whole(tmp_path):
    """Another host, a restart: no read kept and no state on this disk: read whole, right."""
    data = linear_transcript()
    ends = line_ends(data)
    cache = tmp_path / "cache"
    shas = []
    for n, cut in enumerate((ends[6], len(data))):
        folder = tmp_path / f"v{n}"
        folder.mkdir()
        path = folder / "session.jsonl"
        path.write_bytes(data[:cut])
        shas.append(engine.file_sha256(str(path)))
        load_growing(path, cache_dir=cache, sha256=shas[-1], earlier_sha256=shas[0] if n else None)[
            0
        ].close()
    session_cache._VERSION_READS.clear()
    session_cache._RECENT.clear()
    for state in cache.glob("*.reading-*"):
        state.unlink()
    before = Counter(READS)
    worker = engine.load_session_cached(
        str(path), cache_dir=str(cache), sha256=shas[1], seed_sha256=shas[0]
    )
    assert Counter(READS) == before  # no growing read: the file parsed as any session
    assert_same_session(worker, engine.load_session(str(path)))


def test_an_append_packs_only_the_appended_records_uuids(tmp_path, monkeypatch):
    """A read on from a kept one adds the appended records' uuids to the earlier read's set
    (``UuidSet.with_added``) instead of packing every uuid of the session again; the set
    equals a whole read's at every cut (``grow``)."""
    from contextlab.engine.input import uuid_set

    data = linear_transcript(turns=12)
    ends = line_ends(data)
    path = tmp_path / "session.jsonl"
    path.write_bytes(data[: ends[-3]])
    load_growing(path, cache_dir=tmp_path / "cache", sha256="v0")[0].close()
    packed: list[str] = []
    real = uuid_set._packed
    monkeypatch.setattr(uuid_set, "_packed", lambda u: packed.append(u) or real(u))
    path.write_bytes(data)
    grown, resumed = load_growing(
        path, cache_dir=tmp_path / "cache", sha256="v1", earlier_sha256="v0"
    )
    assert resumed
    # two lines appended: their uuids packed (and looked up), none of the earlier ones
    assert 0 < len(packed) <= 4, len(packed)
    whole = engine.load_session(str(path))
    assert grown.record_uuids == whole.record_uuids
    assert grown.record_uuids._rows == whole.record_uuids._rows  # type: ignore[attr-defined]
