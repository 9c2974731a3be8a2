"""Claude Code 2.1.4x–2.1.7x transcripts (issue #20 item 5): no recorded request is lost.

The fixture holds what those sessions write around the requests: progress records between
messages, a rewind that forks from an earlier record, parallel tool calls whose results hang
from different assistant records of one response, a ``<synthetic>`` record, a model switch,
the file continued under a second session id, and records in a ``parentUuid`` cycle that no
walk from a leaf reaches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contextlab import engine
from tests.engine.builders import TranscriptBuilder
from tests.engine.invariants import auto_config


def _progress(b: TranscriptBuilder) -> None:
    """A hook's progress record on the chain (Claude Code links the next record to it)."""
    b.add(b.envelope("progress", b.last_uuid, data={"type": "hook_progress"}))


def _recorded_ids(records: list[dict[str, Any]]) -> set[str]:
    return {
        r["message"]["id"]
        for r in records
        if r["type"] == "assistant"
        and r["message"].get("usage")
        and r["message"]["model"] != "<synthetic>"
    }


def _era_session(b: TranscriptBuilder) -> TranscriptBuilder:
    b.prompt("start")
    for n in range(4):
        _progress(b)
        b.tool_call("Read", {"file_path": f"/work/f{n}.py"}, f"contents {n}\n" * 40)
    fork = b.last_uuid
    # parallel tool calls: one response, two records, each result hanging from its own record
    calls = b.assistant(
        [
            {"type": "tool_use", "id": "toolu_a", "name": "Bash", "input": {"command": "ls"}},
            {"type": "tool_use", "id": "toolu_b", "name": "Bash", "input": {"command": "pwd"}},
        ],
        message_id="msg_parallel",
    )
    b.tool_result("toolu_a", "a\nb", parent=calls[0]["uuid"])
    b.tool_result("toolu_b", "/work", parent=calls[1]["uuid"])
    b.assistant([{"type": "text", "text": "API Error: overloaded"}], model="<synthetic>")
    b.assistant([{"type": "text", "text": "on sonnet"}], model="claude-sonnet-4-6")
    # a rewind: the user went back to before the parallel calls and asked again
    b.last_uuid = fork
    b.prompt("rewound question")
    _progress(b)
    b.assistant([{"type": "text", "text": "rewound answer"}], message_id="msg_rewound")
    b.session_id = "99999999-2222-3333-4444-555555555555"  # continued under a second id
    b.prompt("later")
    b.assistant([{"type": "text", "text": "answer"}], message_id="msg_later")
    return b


def test_every_recorded_request_is_replayed_once(tmp_path: Path) -> None:
    b = _era_session(TranscriptBuilder(version="2.1.72"))
    recorded = _recorded_ids(b.records)
    session = engine.load_session(str(b.write(tmp_path / "era.jsonl")))
    config, preset = auto_config(session)
    result = engine.replay(session, config, mode="recorded", preset_name=preset).to_json()
    rows = [*result["requests"], *(r for s in result["subagents"] for r in s["requests"])]
    # the abandoned branch (before the rewind) is a thread of its own; its requests are emitted
    assert [t.kind for t in session.threads] == ["main", "branch"]
    assert len(rows) == len(recorded) == 8
    assert not [p for p in session.problems if p.code == "unplaced_requests"]


def test_a_branch_forks_at_its_last_message_on_the_main_chain(tmp_path: Path) -> None:
    b = _era_session(TranscriptBuilder(version="2.1.72"))
    session = engine.load_session(str(b.write(tmp_path / "era.jsonl")))
    branch = session.threads[1]
    main_uuids = {u for m in session.main.messages for u in m.uuids}
    shared = branch.messages[: branch.fork_index]
    assert shared
    assert all(m.uuid in main_uuids for m in shared)
    assert branch.messages[branch.fork_index].message_id == "msg_parallel"


def test_requests_no_chain_reaches_are_reported_and_still_counted(tmp_path: Path) -> None:
    b = _era_session(TranscriptBuilder(version="2.1.72"))
    # two records linked to each other: neither is a leaf, no walk from a leaf reaches them
    first = b.envelope("user", None, message={"role": "user", "content": "lost prompt"})
    lost = b.assistant([{"type": "text", "text": "lost answer"}], message_id="msg_lost")
    first["parentUuid"] = lost[0]["uuid"]
    lost[0]["parentUuid"] = first["uuid"]
    b.records.insert(3, b.records.pop())  # written mid-file, not last
    b.records.insert(3, first)
    recorded = _recorded_ids(b.records)
    session = engine.load_session(str(b.write(tmp_path / "lost.jsonl")))
    assert [p.code for p in session.problems if p.code == "unplaced_requests"] == [
        "unplaced_requests"
    ]
    config, preset = auto_config(session)
    result = engine.replay(session, config, mode="recorded", preset_name=preset).to_json()
    rows = [*result["requests"], *(r for s in result["subagents"] for r in s["requests"])]
    assert len(rows) == len(recorded) == 9
