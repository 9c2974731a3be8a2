"""A compaction fork (``subagents/agent-acompact-*.jsonl``) is Claude Code's summarizer call: it
continues the main conversation (same system prompt, tools and model), so it reads the main
conversation's prompt cache (facts §11: "the forked summarizer reads the main prefix").

Built from tiny hand-written folders, then checked on the two real forks of the corpus, whose
main sessions are in the corpus too (the files are the session folders, flattened).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from contextlab import engine
from tests.conftest import corpus_path
from tests.engine.builders import TranscriptBuilder

FORK_ID = "acompact-0123456789abcdef"


def folder(tmp_path: Path, *, gap_before_fork: float, turn_end: bool = False) -> Path:
    """A main session of a few tool calls, then (``gap_before_fork`` seconds later) the
    compaction fork's prompt and reply, hanging from the last main message (or from the
    turn-end system record after it)."""
    main = TranscriptBuilder()
    main.prompt("refactor the parser " + "please " * 200)
    for n in range(4):
        main.tool_call("Read", {"file_path": f"/src/f{n}.py"}, "line of code\n" * 300)
    main.assistant([{"type": "text", "text": "done " * 50}])
    if turn_end:
        main.system("turn_duration", durationMs=1234)
    fork = TranscriptBuilder(session_id=main.session_id, clock=main.clock, usage_total=0)
    fork.uuid = main.uuid  # type: ignore[method-assign]  # uuids unique across both files
    # a meta record copied from the main chain (as real forks have), off the prompt's path
    fork.add(
        fork.envelope(
            "user",
            main.records[2]["uuid"],
            isMeta=True,
            message={"role": "user", "content": "<system-reminder>hook context</system-reminder>"},
        )
    )
    fork.add(
        fork.envelope(
            "user",
            main.last_uuid,
            seconds=gap_before_fork,
            message={"role": "user", "content": "Your task is to create a detailed summary…"},
        )
    )
    fork.assistant(
        [{"type": "text", "text": "<summary>1. Primary Request</summary>"}],
        usage={
            "input_tokens": 3,
            "cache_read_input_tokens": 30_000,
            "cache_creation_input_tokens": 500,
            "output_tokens": 800,
        },
    )
    for r in fork.records:
        r["isSidechain"] = True
        r["agentId"] = FORK_ID
    path = tmp_path / "s.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{main.session_id}.jsonl", main.text())
        zf.writestr(f"{main.session_id}/subagents/agent-{FORK_ID}.jsonl", fork.text())
    return path


def fork_thread(session: engine.Session) -> engine.Thread:
    (thread,) = [t for t in session.threads if t.id == f"agent-{FORK_ID}"]
    return thread


@pytest.mark.parametrize("turn_end", [False, True])
def test_a_compaction_fork_continues_the_main_chain(tmp_path, turn_end):
    session = engine.load_session(str(folder(tmp_path, gap_before_fork=20, turn_end=turn_end)))
    main, fork = session.main, fork_thread(session)
    assert fork.compaction_fork
    assert fork.kind == "subagent"  # still listed apart from the main session
    assert fork.fork_index == len(main.messages)
    assert fork.messages[: fork.fork_index] == main.messages
    own = fork.messages[fork.fork_index :]
    assert [m.role for m in own] == ["user", "assistant"]  # the copied meta record is dropped
    assert [m.index for m in own] == [fork.fork_index, fork.fork_index + 1]


def test_the_fork_reads_the_main_cache_within_its_ttl_and_misses_after(tmp_path):
    warm = engine.replay(
        engine.load_session(str(folder(tmp_path, gap_before_fork=20))),
        engine.get_preset("claude-code-2.1.88"),
    )
    (tmp_path / "late").mkdir()
    late = engine.load_session(str(folder(tmp_path / "late", gap_before_fork=900)))
    # the thread started warm, so its static system prompt outlives the break by default
    # (``cache_system_survival_seconds``); without that rule nothing at all is read
    cold = engine.replay(
        late, engine.get_preset("claude-code-2.1.88").replace(cache_system_survival_seconds=0)
    )
    survived = engine.replay(late, engine.get_preset("claude-code-2.1.88"))
    for result, reason in ((warm, "hit"), (cold, "ttl_expired")):
        data = result.to_json()
        main_last = data["requests"][-1]
        (sub,) = data["subagents"]
        (request,) = sub["requests"]  # the main chain's requests are replayed, not listed
        assert request["cache_estimate"]["reason"] == reason
        # the fork's prompt is the main conversation's: as large as its last request, and more
        assert request["model_tokens"] > main_last["model_tokens"]
    hit = warm.to_json()["subagents"][0]["requests"][0]
    assert hit["cache_estimate"]["read"] > 0.9 * hit["model_tokens"]
    assert cold.to_json()["subagents"][0]["requests"][0]["cache_estimate"]["read"] == 0
    data = survived.to_json()
    system_only = data["subagents"][0]["requests"][0]
    assert system_only["cache_estimate"]["reason"] == "ttl_expired"
    # the system prompt alone: no more than what the session's first request found warm
    first_read = data["requests"][0]["recorded"]["cache_read"]
    assert 0 < system_only["cache_estimate"]["read"] <= first_read


def test_a_whatif_replay_leaves_the_recorded_compaction_fork_out(tmp_path):
    session = engine.load_session(str(folder(tmp_path, gap_before_fork=20)))
    recorded = engine.replay(session, engine.get_preset("claude-code-2.1.88")).to_json()
    whatif = engine.replay(
        session, engine.get_preset("claude-code-2.1.88"), mode="whatif"
    ).to_json()
    assert [s["thread"] for s in recorded["subagents"]] == [f"agent-{FORK_ID}"]
    assert whatif["subagents"] == []
    assert len(whatif["requests"]) == len(recorded["requests"])


def test_a_fork_uploaded_without_its_main_session_stays_a_plain_thread(tmp_path):
    with zipfile.ZipFile(folder(tmp_path, gap_before_fork=20)) as zf:
        name = next(n for n in zf.namelist() if "acompact" in n)
        (tmp_path / "fork.jsonl").write_bytes(zf.read(name))
    session = engine.load_session(str(tmp_path / "fork.jsonl"))
    assert not any(t.compaction_fork for t in session.threads)


def _corpus_folder(tmp_path: Path, session_id: str, fork: str) -> Path:
    # the main sessions are 2.7-2.9 MB, too large to commit: skipped without the corpus
    main = corpus_path(f"marot__spotter__{session_id}.jsonl")
    sub = corpus_path(f"marot__spotter__{session_id}_subagents_agent-{fork}.jsonl")
    path = tmp_path / f"{session_id}.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{session_id}.jsonl", main.read_bytes())
        zf.writestr(f"{session_id}/subagents/agent-{fork}.jsonl", sub.read_bytes())
    return path


@pytest.mark.parametrize(
    ("session_id", "fork", "recorded_hit"),
    [
        # 1 h cache, fork a minute after the main request: read 167,093 of 169,910
        ("8463c716-a2ea-4c14-9efa-87158ebd9f20", "acompact-f46190", True),
        # 5 min cache, fork 13 min after the main turn ended: read 17,842 of 139,534
        ("ae4a77f8-aedd-4bc1-888f-c94edc91af04", "acompact-946d2b", False),
    ],
)
@pytest.mark.slow
def test_the_corpus_compaction_forks_match_their_recording(
    tmp_path, session_id, fork, recorded_hit
):
    session = engine.load_session(str(_corpus_folder(tmp_path, session_id, fork)))
    config, preset = engine.resolve_config("auto", version=session.version)
    data = engine.replay(session, config, preset_name=preset).to_json()
    (sub,) = [s for s in data["subagents"] if s["thread"] == f"agent-{fork}"]
    (request,) = sub["requests"]
    recorded = request["recorded_total"]
    assert abs(request["model_tokens"] - recorded) <= 0.03 * recorded
    recorded_read_share = request["recorded"]["cache_read"] / recorded
    estimated_read_share = request["cache"]["read"] / request["model_tokens"]
    assert (recorded_read_share >= 0.5) is recorded_hit
    assert (estimated_read_share >= 0.5) is recorded_hit


def test_stored_messages_keep_the_shared_main_prefix_once(tmp_path):
    """The explorer's stored messages: the fork's leading main messages are not stored again,
    and expanding them gives the fork its whole list back."""
    import json

    session = engine.load_session(str(folder(tmp_path, gap_before_fork=20)))
    fork = fork_thread(session)
    stored = json.loads(json.dumps(engine.messages_json(session)))
    assert len(stored[fork.id]) == 2  # only its prompt and reply
    assert stored["_shared_prefixes"] == {fork.id: {"thread": "main", "length": fork.fork_index}}
    full = engine.expand_messages(stored)
    assert "_shared_prefixes" not in full
    assert [m["index"] for m in full[fork.id]] == list(range(len(fork.messages)))
    assert [m["uuid"] for m in full[fork.id]] == [m.uuid for m in fork.messages]
    assert full["main"] == stored["main"]
    # a store written before prefixes were shared is read as it is
    assert engine.expand_messages({"main": stored["main"]}) == {"main": stored["main"]}
