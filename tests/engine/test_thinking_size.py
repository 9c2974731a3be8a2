"""Thinking is counted at the size the response's output records, not at the text the file holds.

Claude 4 models return summarized thinking and newer Claude Code versions write none (only a
signature); the next request of the turn sends the whole thinking back, so the recorded prompt
grows by the response's ``output_tokens``. On the corpus, the next request's growth minus the
new tool results matched the output count to a median of -35..+145 tokens per session, and the
thinking text's own count to +51..+623 (tokens p90 3.40 % → 2.90 %, anchors 22 → 13).
"""

from __future__ import annotations

from pathlib import Path

from contextlab import engine
from contextlab.engine.tokens import TiktokenCounter, size_thinking
from contextlab.engine.transcript import Block, Message, Usage
from tests.engine.builders import TranscriptBuilder

COUNTER = TiktokenCounter()


def response(thinking: list[str], visible: str, output: int | None) -> Message:
    blocks = [Block("thinking", t) for t in thinking] + [Block("text", visible)]
    usage = Usage(input=3, output=output) if output is not None else None
    return Message("u1", "assistant", "response", blocks, usage=usage)


def test_empty_thinking_takes_what_the_output_holds_beyond_the_visible_text():
    msg = response([""], "the answer is 42 " * 10, output=2_000)
    size_thinking(msg, COUNTER)
    visible = COUNTER.count("the answer is 42 " * 10)
    assert msg.blocks[0].tok == 2_000 - visible
    # the visible block keeps its own count
    assert msg.blocks[1].tok in (-1, visible)


def test_several_thinking_blocks_share_it_by_their_text():
    msg = response(["short", "a much longer thought " * 30], "ok", output=5_000)
    size_thinking(msg, COUNTER)
    first, second = msg.blocks[0].tok, msg.blocks[1].tok
    assert first + second == 5_000 - COUNTER.count("ok")
    assert second > 10 * first


def test_a_streaming_snapshot_leaves_the_text_count():
    # the final usage was not written: output is the message_start snapshot
    text = "reasoning about the module layout " * 40
    msg = response([text], "done", output=8)
    size_thinking(msg, COUNTER)
    assert msg.blocks[0].tok == COUNTER.count(text)


def test_without_usage_or_thinking_nothing_changes():
    msg = response([""], "hello", output=None)
    size_thinking(msg, COUNTER)
    assert msg.blocks[0].tok == -1
    plain = Message("u2", "assistant", "response", [Block("text", "hi")], usage=Usage(output=900))
    size_thinking(plain, COUNTER)
    assert plain.blocks[0].tok == -1


def test_the_replay_counts_the_thinking_in_the_next_request(tmp_path: Path):
    def session(output: int) -> Path:
        b = TranscriptBuilder()
        b.prompt("look at the module and tell me what it does")
        b.assistant(
            [
                {"type": "thinking", "thinking": "", "signature": "c2ln"},
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/a.py"}},
            ],
            usage={
                "input_tokens": 3,
                "cache_read_input_tokens": 20_000,
                "cache_creation_input_tokens": 500,
                "output_tokens": output,
            },
        )
        b.tool_result("t1", "def f():\n    return 1\n")
        b.assistant([{"type": "text", "text": "it returns 1"}])
        return b.write(tmp_path / f"s{output}.jsonl")

    def raw(path: Path) -> list[int]:
        config = engine.get_preset("claude-code-2.1.88").replace(anchors_enabled=False)
        result = engine.replay(engine.load_session(str(path)), config, mode="recorded")
        return [r["raw_tokens"] for r in result.to_json()["requests"]]

    small, large = raw(session(40)), raw(session(3_040))
    assert small[0] == large[0]
    # the second request carries the first response: 3,000 more output, 3,000 more thinking
    assert large[1] - small[1] == 3_000
