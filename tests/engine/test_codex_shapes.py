"""Rollout shapes of later Codex versions, read from Codex's source (issue 24, round 4): items
whose text the model was sent, images in tool outputs, bookkeeping records, thread rollbacks.
The fixtures are ContextLab's own text and figures in those shapes (docs/codex-provenance.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contextlab import engine
from contextlab.engine.input.rough import block_rough
from contextlab.engine.input.sources.codex.lineage import Parent, parent_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
TOOLS = FIXTURES / "v0_130_tool_search_images_agents.jsonl"
ROLLBACK = FIXTURES / "v0_120_thread_rollback.jsonl"


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def blocks_of(session: Any) -> list[Any]:
    return [b for m in session.main.messages for b in m.blocks]


def recorded_requests(session: Any) -> list[dict[str, Any]]:
    config, preset = engine.resolve_config("auto", version=session.version)
    return engine.replay(session, config, mode="recorded", preset_name=preset).to_json()["requests"]


def test_items_of_later_versions_the_model_was_sent_are_in_its_context():
    session = engine.load_session(TOOLS)
    assert not [p for p in session.problems if p.code == "unknown_codex_shape"]
    raw = {
        r["payload"]["type"]: r["payload"] for r in records(TOOLS) if r["type"] == "response_item"
    }
    blocks = blocks_of(session)
    # the definitions a client-run tool search loaded answer its call
    loaded = next(b for b in blocks if b.type == "tool_result" and b.tool_use_id == "tsc_1")
    for tool in raw["tool_search_output"]["tools"]:
        assert tool["description"] in loaded.text
    assert loaded.tool_name == "tool_search_call"
    # tools added mid-session and a subagent's message: context, sent once
    texts = [b.text for m in session.main.messages if m.kind == "meta" for b in m.blocks]
    assert any("open_ticket" in t for t in texts)
    note = raw["agent_message"]["content"][0]["text"]
    assert sum(t.count(note) for t in texts) == 1  # its bookkeeping record adds nothing


def test_images_are_images_not_their_base64_text():
    session = engine.load_session(TOOLS)
    blocks = blocks_of(session)
    screenshot = next(b for b in blocks if b.type == "tool_result" and b.tool_use_id == "call_3")
    assert screenshot.media == 1
    assert "base64" not in screenshot.text
    assert "Screenshot of" in screenshot.text
    banner = next(b for b in blocks if b.tool_name == "image_generation_call")
    result = next(
        r["payload"]["result"]
        for r in records(TOOLS)
        if r["payload"].get("type") == "image_generation_call"
    )
    assert banner.media == 1
    assert result not in banner.text
    assert "revised_prompt" in banner.text
    # sized as one image and a sentence, not as 54,000 characters of base64
    assert block_rough(banner) < len(result) // 8


def test_a_server_run_tool_search_is_part_of_the_models_output(tmp_path):
    rows = records(TOOLS)
    for row in rows:
        if row["payload"].get("type") in ("tool_search_call", "tool_search_output"):
            row["payload"].update(call_id=None, execution="server")
    # run by the server, the search's output is in the same response as its call: before the
    # call's token count
    at = [r["payload"].get("type") for r in rows].index("tool_search_output")
    call = [r["payload"].get("type") for r in rows].index("tool_search_call")
    rows.insert(call + 1, rows.pop(at))
    session = engine.load_session(write(tmp_path / "server.jsonl", rows))
    calls = [m for m in session.main.messages if m.role == "assistant"]
    assert all(m.usage for m in calls)
    assert len(calls) == 7
    names = [b.tool_name for b in calls[0].blocks if b.type == "tool_use"]
    assert names[:2] == ["tool_search_call", "tool_search_output"]
    assert not [
        p for p in session.problems if p.code in ("orphan_tool_result", "unknown_codex_shape")
    ]


def test_a_rolled_back_turn_leaves_the_context_of_the_calls_after_it():
    session = engine.load_session(ROLLBACK)
    log_prompt = next(
        r["payload"]["content"][0]["text"]
        for r in records(ROLLBACK)
        if r["payload"].get("role") == "user" and "last night's log" in str(r["payload"])
    )
    main_texts = [b.text for b in blocks_of(session)]
    assert log_prompt not in main_texts
    (branch,) = [t for t in session.threads if t.kind == "branch"]
    own = branch.messages[branch.fork_index :]
    assert own[0].kind == "prompt"
    assert own[0].blocks[0].text == log_prompt
    assert sum(1 for m in own if m.role == "assistant" and m.usage) == 2  # its calls counted
    assert [p.code for p in session.problems] == ["rolled_back"]
    rows = recorded_requests(session)
    after = rows[[r["thread"] for r in rows].index("main", 3)]  # the first call after it
    last_rolled_back = [r for r in rows if r["thread"] == branch.id][-1]
    # as the recorded input fell (17,900 -> 10,790 tokens), so does the replayed prompt
    assert after["recorded_total"] < last_rolled_back["recorded_total"]
    assert after["raw_tokens"] < last_rolled_back["raw_tokens"] // 4


def test_a_rollback_with_nothing_to_cut_is_reported_never_a_failure(tmp_path):
    rows = records(ROLLBACK)
    start = {"timestamp": rows[1]["timestamp"], "type": "event_msg"}
    rows.insert(1, {**start, "payload": {"type": "thread_rolled_back", "num_turns": 2}})
    rows.insert(2, {**start, "payload": {"type": "thread_rolled_back", "num_turns": "two"}})
    session = engine.load_session(write(tmp_path / "odd.jsonl", rows))
    skipped = [p for p in session.problems if p.code == "rollback_not_applied"]
    assert len(skipped) == 2
    assert all(p.severity == "info" for p in skipped)
    assert [t.kind for t in session.threads] == ["main", "branch"]


def test_a_context_compaction_item_is_a_remote_compactions_opaque_summary(tmp_path):
    source = FIXTURES / "v0_64_remote_compaction.jsonl"
    rows = records(source)
    for row in rows:
        for item in row["payload"].get("replacement_history") or []:
            if item.get("type") == "compaction":
                item["type"] = "context_compaction"
    renamed = engine.load_session(write(tmp_path / "renamed.jsonl", rows))
    original = engine.load_session(source)
    assert not [p for p in renamed.problems if p.code == "unknown_codex_shape"]

    def summaries(session: Any) -> list[Any]:
        return [b.data for m in session.main.messages if m.kind == "summary" for b in m.blocks]

    assert summaries(renamed) == summaries(original) != []


def test_later_session_meta_fields_name_the_session_and_a_subagents_parent(tmp_path):
    rows = records(FIXTURES / "v0_58_calls.jsonl")
    meta = rows[0]["payload"]
    meta["session_id"] = meta.pop("id")
    session = engine.load_session(write(tmp_path / "renamed.jsonl", rows))
    assert session.session_id == meta["session_id"]
    spawned = {
        "thread_source": "subagent",
        "parent_thread_id": "019d0000-aaaa-7bbb-8ccc-000000000001",
    }
    assert parent_of(spawned) == Parent("subagent", spawned["parent_thread_id"])


def test_content_parts_of_types_it_does_not_read_are_reported_and_the_rest_kept(tmp_path):
    rows = records(TOOLS)
    for row in rows:
        if row["payload"].get("call_id") == "call_3" and row["payload"]["type"].endswith("output"):
            row["payload"]["output"] += [
                {"type": "input_audio", "audio_url": "data:audio/wav;base64,UklGRg=="},
                {"type": "encrypted_content", "encrypted_content": "gAAAAABz"},
            ]
    session = engine.load_session(write(tmp_path / "parts.jsonl", rows))
    shapes = [p.message for p in session.problems if p.code == "unknown_codex_shape"]
    assert len(shapes) == 2
    assert any("'input_audio'" in m for m in shapes)
    assert any("'encrypted_content'" in m for m in shapes)
    screenshot = next(
        b for b in blocks_of(session) if b.tool_use_id == "call_3" and b.type == "tool_result"
    )
    assert "Screenshot of" in screenshot.text
    assert screenshot.media == 1


def test_another_agents_message_in_the_history_as_an_assistant_message_is_no_calls_output(
    tmp_path,
):
    rows = records(TOOLS)
    at = next(i for i, r in enumerate(rows) if r["payload"].get("type") == "agent_message")
    agent = rows[at]["payload"]
    note = agent["content"][0]["text"]
    # before ``agent_message``: the history holds the communication's JSON as an assistant
    # message (phase commentary)
    communication = {
        "author": agent["author"],
        "recipient": agent["recipient"],
        "other_recipients": [],
        "content": note,
        "trigger_turn": True,
    }
    rows[at]["payload"] = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": json.dumps(communication)}],  # as sent
        "phase": "commentary",
    }
    session = engine.load_session(write(tmp_path / "json_message.jsonl", rows))
    sent = json.dumps(communication)
    holding = [m for m in session.main.messages if any(sent in b.text for b in m.blocks)]
    assert [m.kind for m in holding] == ["meta"]
    assert len([m for m in session.main.messages if m.role == "assistant"]) == 7


def test_a_messages_parts_read_in_one_pass_as_by_the_three_readers() -> None:
    """``parts_of`` (the adapter's one pass over a message's content) gives what ``text_of``,
    ``images_in`` and ``unknown_parts`` give, for every shape of content, hostile ones too."""
    from contextlab.engine.input.sources.codex.items import (
        images_in,
        parts_of,
        text_of,
        unknown_parts,
    )

    contents: list[Any] = [
        "plain text",
        "",
        None,
        7,
        {"text": "an object, not a list"},
        [],
        [{"type": "input_text", "text": "one"}],
        [{"type": "output_text", "text": "a"}, {"type": "output_text", "text": "b"}],
        [{"type": "input_image", "image_url": "data:..."}, {"type": "input_text", "text": "x"}],
        [{"type": "input_image"}, {"type": "input_image", "text": "caption"}],
        [{"type": "input_audio", "data": "..."}, {"type": "encrypted_content"}],
        [{"text": "no type"}, {"type": ["a", "list"], "text": "unhashable type"}],
        [{"type": None}, {"type": 3, "text": 4}, {"type": "text", "text": None}],
        ["a bare string", 5, None, ["nested"], {"type": "input_file", "text": "f"}],
    ]
    for content in contents:
        expected = (text_of(content), images_in(content), tuple(unknown_parts(content)))
        assert parts_of(content) == expected, content
