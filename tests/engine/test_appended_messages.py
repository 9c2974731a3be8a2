"""A live session's stored messages grow by the rows an append changed or added
(``engine.appended_messages_json``): the earlier version's stored rows with them put in are
``messages_json`` of the grown session, cut at any line; a session that changed otherwise
(threads moved, a thread ending on another message) is refused (stored whole)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.results.explorer import SHARED_PREFIXES
from tests.conftest import DEMO, FIXTURES

TOOL_HEAVY = DEMO / "marot__spotter__tool_heavy.jsonl"
ENTIREIO = FIXTURES / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl"
VIEWER = FIXTURES / "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


def _stored(session: engine.Session) -> dict[str, Any]:
    """``messages_json`` as a store gives it back (through JSON)."""
    out: dict[str, Any] = json.loads(json.dumps(engine.messages_json(session)))
    return out


def _load(tmp_path: Path, data: bytes, name: str) -> engine.Session:
    path = tmp_path / name
    path.write_bytes(data)
    return engine.load_session(str(path), name="session.jsonl")


@pytest.mark.parametrize("source", [TOOL_HEAVY, ENTIREIO, VIEWER], ids=["tool", "entire", "viewer"])
def test_stored_rows_with_the_appended_ones_are_the_grown_sessions(tmp_path, source):
    data = source.read_bytes()
    ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    # every line end of the second half (a cut inside a response too), at most 12 of them,
    # and the last few (a response's parallel calls: the next comes after a result)
    cuts = [*ends[len(ends) // 2 :: max(1, len(ends) // 24)][:12], *ends[-12:-1]]
    grown = _load(tmp_path, data, "grown.jsonl")
    whole = _stored(grown)
    assert SHARED_PREFIXES not in whole  # else the append is stored whole
    stored_any = False
    for cut in cuts:
        earlier = _load(tmp_path, data[:cut], "earlier.jsonl")
        appended = engine.appended_messages_json(grown, engine.message_marks(earlier))
        if appended is None:
            continue  # a thread changed otherwise: stored whole
        stored_any = True
        rows = json.loads(json.dumps(appended))
        assert engine.apply_appended_messages(_stored(earlier), rows) == whole
        # only what the append brought, and each thread's last stored message again (and
        # from a response an appended record was merged into)
        for thread in earlier.threads:
            if thread.id in rows:
                assert rows[thread.id]["start"] <= max(0, len(thread.messages) - 1)
    assert stored_any


def test_appended_rows_are_in_step_with_a_growth_by_appends(tmp_path):
    """Versions appended one after another: each version's store is the last one's with the
    append's rows put in."""
    data = TOOL_HEAVY.read_bytes()
    ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    first = _load(tmp_path, data[: ends[11]], "v.jsonl")
    stored, marks = _stored(first), engine.message_marks(first)
    for cut in [*ends[12::3], len(data)]:
        version = _load(tmp_path, data[:cut], "v.jsonl")
        appended = engine.appended_messages_json(version, marks)
        assert appended is not None
        stored = engine.apply_appended_messages(stored, json.loads(json.dumps(appended)))
        assert stored == _stored(version)
        marks = engine.message_marks(version)


def test_a_session_that_changed_otherwise_is_stored_whole(tmp_path):
    data = TOOL_HEAVY.read_bytes()
    session = _load(tmp_path, data, "s.jsonl")
    marks = engine.message_marks(session)
    moved = [list(m) for m in marks]
    moved[0][2] = "another-uuid"  # the main thread's last stored message is another now
    assert engine.appended_messages_json(session, moved) is None
    longer = [list(m) for m in marks]
    longer[0][1] += 1  # the thread lost a message
    assert engine.appended_messages_json(session, longer) is None
    renamed = [["other", *m[1:]] for m in marks]
    assert engine.appended_messages_json(session, renamed) is None
    shared = [[*m[:3], 2, m[4]] for m in marks]  # the store's thread started with main's
    assert engine.appended_messages_json(session, shared) is None
    unsized = [m[:4] for m in marks]  # a store's marks before they counted records
    assert engine.appended_messages_json(session, unsized) is None
    merged = [[*m[:4], [*m[4][:2], m[4][2] - 1, *m[4][3:]]] for m in marks]
    # a record was merged into message 2 since: its rows on are written again
    assert engine.appended_messages_json(session, merged)[marks[0][0]]["start"] == 2
    assert engine.appended_messages_json(session, shared) is None
    assert engine.appended_messages_json(session, marks) is not None


def test_a_session_with_a_shared_prefix_is_stored_whole(tmp_path):
    session = _load(tmp_path, TOOL_HEAVY.read_bytes(), "s.jsonl")
    marks = engine.message_marks(session)
    main = session.threads[0]
    # a branch that leaves the main chain after its first two messages (the very objects)
    session.threads.append(
        engine.Thread(id="branch", kind="branch", messages=main.messages[:2], fork_index=2)
    )
    assert SHARED_PREFIXES in engine.messages_json(session)
    assert engine.appended_messages_json(session, marks) is None
