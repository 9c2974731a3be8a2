"""Attachment records as the model gets them, and requests the server answered in several calls.

Both are 2.1.x transcript features that the corpus shows (hook results on every tool call,
advisor calls inside one request); the tests build small transcripts and need no corpus.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contextlab import engine
from contextlab.engine.input.sources.claude_code.attachments import render_attachment
from contextlab.engine.measures.cost import load_pricing, request_cost
from tests.engine.builders import TranscriptBuilder


def attach(b: TranscriptBuilder, attachment: dict[str, Any]) -> dict[str, Any]:
    return b.add(b.envelope("attachment", b.last_uuid, attachment=attachment))


def model_view_texts(path: Path) -> list[str]:
    session = engine.load_session(str(path))
    return [blk.text for m in session.main.messages if m.kind == "attachment" for blk in m.blocks]


# --------------------------------------------------------------------------- attachments


def test_tool_hook_results_are_not_sent_but_prompt_hook_output_is():
    post = {
        "type": "hook_success",
        "hookName": "PostToolUse:Bash",
        "hookEvent": "PostToolUse",
        "content": "",
        "stdout": "{}",
        "command": "entire hooks claude-code post-tool-use " + "x" * 400,
    }
    start = {
        "type": "hook_success",
        "hookName": "SessionStart:startup",
        "hookEvent": "SessionStart",
        "content": "Linked to checkpoint 42",
        "command": "entire hooks session-start",
    }
    assert render_attachment(post) == ("", True)
    text, known = render_attachment(start)
    assert known
    assert "SessionStart:startup hook success: Linked to checkpoint 42" in text
    assert "entire hooks" not in text  # the command line is the terminal's, not the model's
    assert text.startswith("<system-reminder>")


def test_terminal_only_and_bookkeeping_records_are_not_sent():
    for attachment in (
        {"type": "hook_system_message", "content": "Entire CLI will link this conversation"},
        {"type": "command_permissions", "allowedTools": ["Bash"]},
        {"type": "batching_reminder_sent", "text": "batch your calls"},
        {"type": "prompt_snapshot", "systemPrompt": ["You are Claude Code."]},
    ):
        assert render_attachment(attachment) == ("", True), attachment["type"]


def test_a_file_attachment_is_the_read_call_and_its_numbered_result():
    text, known = render_attachment(
        {
            "type": "file",
            "filename": "/src/app.py",
            "content": {
                "type": "text",
                "file": {
                    "filePath": "/src/app.py",
                    "content": "import os\nprint(1)",
                    "startLine": 1,
                },
            },
        }
    )
    assert known
    assert 'Called the Read tool with the following input: {"file_path":"/src/app.py"}' in text
    assert "     1→import os\n     2→print(1)" in text
    assert '\\"' not in text  # not the record's escaped JSON


def test_the_context_newer_versions_send_as_attachments_is_rendered_from_its_fields():
    text, known = render_attachment(
        {
            "type": "environment",
            "snapshot": {
                "workingDirectory": "/home/ann/app",
                "platform": "linux",
                "isGitRepo": True,
            },
        }
    )
    assert known
    assert "workingDirectory: /home/ann/app\nplatform: linux" in text
    assert "{" not in text
    assert '"' not in text
    assert render_attachment({"type": "deferred_tools_record", "entries": []}) == ("", True)


def test_a_rendered_attachment_is_taken_as_written():
    assert render_attachment({"type": "anything_new", "rendered": ["a", "b"]}) == ("a\nb", True)


def test_an_unknown_attachment_type_counts_as_its_json_and_is_reported(tmp_path):
    b = TranscriptBuilder(version="2.1.300")
    b.prompt("hello")
    attach(b, {"type": "shiny_new_reminder", "payload": {"x": 1}})
    attach(b, {"type": "shiny_new_reminder", "payload": {"x": 2}})
    attach(b, {"type": "total_tokens_reminder", "text": "<total_tokens>5 left</total_tokens>"})
    b.assistant([{"type": "text", "text": "hi"}])
    path = b.write(tmp_path / "s.jsonl")
    texts = model_view_texts(path)
    assert '{"type":"shiny_new_reminder","payload":{"x":1}}' in texts
    assert "<system-reminder>\n<total_tokens>5 left</total_tokens>\n</system-reminder>" in texts
    problems = list(engine.load_session(str(path)).problems)
    (unknown,) = [p for p in problems if p.code == "unknown_attachment_type"]
    assert "2 attachment(s) of type 'shiny_new_reminder'" in unknown.message
    assert unknown.severity == "info"


def test_hostile_attachment_fields_do_not_break_the_reading(tmp_path):
    b = TranscriptBuilder()
    b.prompt("hello")
    for attachment in (
        {"type": "file", "filename": 7, "content": "not an object"},
        {"type": "hook_additional_context", "content": "a string, not a list"},
        {"type": "task_reminder", "content": [None, {"id": 1, "status": "x", "subject": "<b>"}]},
        {"type": "async_hook_response", "response": ["odd"]},
        {"type": "nested_memory", "content": None},
        {"type": "queued_command", "prompt": [{"type": "text", "text": 5}]},
        {"no_type": True},
    ):
        attach(b, attachment)
    b.assistant([{"type": "text", "text": "fine"}])
    path = b.write(tmp_path / "s.jsonl")
    texts = model_view_texts(path)
    assert len(texts) == 7
    assert any("#1. [x] <b>" in t for t in texts)  # kept as text: pages escape it


# --------------------------------------------------------------------------- iterations

ADVISOR_USAGE = {
    "input_tokens": 2,
    "cache_creation_input_tokens": 4107,
    "cache_read_input_tokens": 219031,
    "output_tokens": 1568,
    "cache_creation": {"ephemeral_1h_input_tokens": 931, "ephemeral_5m_input_tokens": 0},
    "iterations": [
        {
            "type": "message",
            "input_tokens": 1,
            "output_tokens": 1171,
            "cache_read_input_tokens": 109050,
            "cache_creation_input_tokens": 931,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 931},
        },
        {
            "type": "advisor_message",
            "model": "claude-opus-5",
            "input_tokens": 149112,
            "output_tokens": 14153,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        },
        {
            "type": "message",
            "input_tokens": 1,
            "output_tokens": 397,
            "cache_read_input_tokens": 109981,
            "cache_creation_input_tokens": 3176,
            "cache_creation": {"ephemeral_5m_input_tokens": 3176, "ephemeral_1h_input_tokens": 0},
        },
    ],
}


def advisor_session(tmp_path: Path) -> Path:
    b = TranscriptBuilder(version="2.1.232")
    b.prompt("review the design")
    b.assistant(
        [{"type": "text", "text": "the design holds " * 40}],
        usage=json.loads(json.dumps(ADVISOR_USAGE)),
        split=False,
    )
    b.prompt("thanks")
    b.assistant([{"type": "text", "text": "you are welcome"}])
    return b.write(tmp_path / "advisor.jsonl")


def test_a_request_with_an_advisor_call_counts_its_own_prompt_and_bills_every_call(tmp_path):
    session = engine.load_session(str(advisor_session(tmp_path)))
    usage = next(m.usage for m in session.main.messages if m.usage is not None)
    # the prompt as the request sent it: the first call's, not the sum of the two
    assert usage.prompt_total == 1 + 109_050 + 931
    assert usage.cache_write_1h == 931
    assert [i.kind for i in usage.iterations] == ["advisor_message", "message"]
    # Claude Code's own arithmetic (and the window evidence) keeps the top-level sums
    assert usage.counted_prompt == 2 + 219_031 + 4107
    assert usage.total == usage.counted_prompt + 1568
    assert session.max_recorded_prompt == usage.counted_prompt

    result = engine.replay(session, engine.get_preset("claude-code-2.1.88")).to_json()
    row = result["requests"][0]
    assert row["recorded_total"] == 1 + 109_050 + 931
    pricing = load_pricing()

    def billed(model: str, uncached: int, read: int, w5m: int, w1h: int, output: int) -> float:
        return request_cost(
            model,
            uncached=uncached,
            cache_read=read,
            cache_write_5m=w5m,
            cache_write_1h=w1h,
            output=output,
            pricing=pricing,
        )

    advisor = billed("claude-opus-5", 149_112, 0, 0, 0, 14_153)
    continuation = billed("claude-opus-4-6", 1, 109_981, 3176, 0, 397)
    first = billed("claude-opus-4-6", 1, 109_050, 0, 931, 1171)
    assert abs(row["iteration_cost_usd"] - (advisor + continuation)) < 1e-5
    assert abs(row["recorded_cost_usd"] - (first + advisor + continuation)) < 1e-5
    # the replay's own estimate carries the same server calls
    assert row["cost_usd"] >= row["iteration_cost_usd"]
    assert result["summary"]["iteration_cost_usd"] == row["iteration_cost_usd"]


def test_usage_without_extra_calls_is_read_as_before(tmp_path):
    b = TranscriptBuilder()
    b.prompt("hi")
    usage = {
        "input_tokens": 3,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 20_000,
        "output_tokens": 50,
        "iterations": [
            {
                "type": "message",
                "input_tokens": 3,
                "cache_creation_input_tokens": 100,
                "cache_read_input_tokens": 20_000,
                "output_tokens": 50,
            }
        ],
    }
    b.assistant([{"type": "text", "text": "hello"}], usage=usage, split=False)
    session = engine.load_session(str(b.write(tmp_path / "s.jsonl")))
    (u,) = [m.usage for m in session.main.messages if m.usage is not None]
    assert (u.prompt_total, u.output, u.iterations) == (20_103, 50, ())
    assert u.total == u.counted_prompt + u.output == 20_153


def test_malformed_iterations_fall_back_to_the_top_level_fields(tmp_path):
    b = TranscriptBuilder()
    b.prompt("hi")
    usage = {
        "input_tokens": 3,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 20_000,
        "output_tokens": 50,
        "iterations": ["x", {"type": "advisor_message", "input_tokens": "many"}],
    }
    b.assistant([{"type": "text", "text": "hello"}], usage=usage, split=False)
    session = engine.load_session(str(b.write(tmp_path / "s.jsonl")))
    (u,) = [m.usage for m in session.main.messages if m.usage is not None]
    # no "message" call to take the request's prompt from: the top-level fields stand
    assert (u.prompt_total, u.iterations) == (20_103, ())
