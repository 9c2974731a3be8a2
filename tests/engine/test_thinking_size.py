"""Thinking is counted at the size the response's output records, not at the text the file holds.

Claude 4 models return summarized thinking and newer Claude Code versions write none (only a
signature); the next request of the turn sends the whole thinking back, so the recorded prompt
grows by the response's ``output_tokens``. On the corpus, the next request's growth minus the
new tool results matched the output count to a median of -35..+145 tokens per session, and the
thinking text's own count to +51..+623 (tokens p90 3.40 % → 2.90 %, anchors 22 → 13).
"""

from __future__ import annotations

import pickle
from pathlib import Path

from contextlab import engine
from contextlab.engine.input.model import Block, Message, Usage
from contextlab.engine.measures import tokens
from contextlab.engine.measures.tokens import TiktokenCounter, size_thinking
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


def _snapshot_turns(turns: int) -> TranscriptBuilder:
    """Turns of a tool loop whose first response thinks, each response written with a streaming
    snapshot of its output (8 tokens) instead of the final count, as Entire checkpoints do."""
    b = TranscriptBuilder()
    snapshot = {"input_tokens": 3, "cache_read_input_tokens": 0, "output_tokens": 8}
    for n in range(turns):
        b.prompt(f"step {n}: read module {n} and fix what is wrong")
        # thinking and tool output of unrelated sizes, as in a real session
        thought = f"module {n} probably mishandles the empty case; read it first. " * (
            4 + 9 * (n % 3)
        )
        recs = b.assistant(
            [
                {"type": "thinking", "thinking": thought, "signature": "c2ln"},
                {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"file_path": "/m"}},
            ],
            usage=snapshot,
        )
        lines = 10 + 40 * ((n * 7) % 5)
        b.tool_result(f"t{n}", f"def f{n}(x):\n    return x[0]\n" * lines, parent=recs[-1]["uuid"])
        for step in range(3):
            recs = b.assistant(
                [{"type": "tool_use", "id": f"g{n}{step}", "name": "Grep", "input": {"q": "x"}}],
                usage=snapshot,
            )
            found = f"src/m{step}.py:{n}: x[0]\n" * (5 + 30 * ((n + step) % 4))
            b.tool_result(f"g{n}{step}", found, parent=recs[-1]["uuid"])
        b.assistant([{"type": "text", "text": f"module {n} fails on an empty list " * 5}])
    return b


def _with_sent_back_thinking(b: TranscriptBuilder, tmp_path: Path, factor: float) -> Path:
    """Usage written so that thinking was sent back at ``factor`` times its text."""
    probe_path = b.write(tmp_path / "probe.jsonl")
    config = engine.get_preset("claude-code-2.1.88").replace(anchors_enabled=False)
    session = engine.load_session(str(probe_path))
    rows = engine.replay(session, config, mode="recorded").to_json()["requests"]
    thinking_before = []
    seen = 0
    by_id = {m.message_id: m for m in session.main.messages if m.role == "assistant"}
    for row in rows:
        thinking_before.append(seen)
        message = by_id[row["message_id"]]
        seen += sum(COUNTER.count(blk.text) for blk in message.blocks if blk.type == "thinking")
    totals = {
        row["message_id"]: round(18_000 + 1.3 * (row["raw_tokens"] + (factor - 1) * before))
        for row, before in zip(rows, thinking_before, strict=True)
    }
    for rec in b.records:
        message = rec.get("message") or {}
        if rec["type"] == "assistant" and message.get("id") in totals:
            usage = dict(message["usage"])
            usage["cache_read_input_tokens"] = totals[message["id"]] - 3
            usage["cache_creation_input_tokens"] = 0
            message["usage"] = usage
    return b.write(tmp_path / f"sent-back-{factor}.jsonl")


def _snapshot_thinking_tokens(path: Path) -> tuple[list[int], list[int], float]:
    session = engine.load_session(str(path))
    result = engine.replay(session, engine.get_preset("claude-code-2.1.88"), mode="recorded")
    sized, texts = [], []
    for message in session.main.messages:
        for blk in message.blocks:
            if blk.type == "thinking":
                sized.append(blk.tok)
                texts.append(COUNTER.count(blk.text))
    return sized, texts, engine.fidelity(result)["p90_rel_error"]


def test_snapshot_thinking_is_sized_by_what_the_turns_growth_says_it_cost(tmp_path: Path):
    path = _with_sent_back_thinking(_snapshot_turns(8), tmp_path, factor=3.0)
    sized, texts, p90 = _snapshot_thinking_tokens(path)
    # the calibration's ratio takes up part of the thinking, so the factor errs low, but it
    # moves the count most of the way from the text towards what was sent back
    factors = [s / t for s, t in zip(sized, texts, strict=True)]
    assert all(1.8 <= f <= 3.0 for f in factors), factors
    assert max(factors) - min(factors) < 0.02  # one factor for the thread (tokens rounded)
    unscaled = _with_sent_back_thinking(_snapshot_turns(8), tmp_path, factor=3.0)
    config = engine.get_preset("claude-code-2.1.88")
    session = engine.load_session(str(unscaled))
    for message in session.main.messages:
        message.metadata["thinking_scaled_by"] = "someone else"  # keeps the text size
    text_p90 = engine.fidelity(engine.replay(session, config, mode="recorded"))["p90_rel_error"]
    assert p90 < 0.6 * text_p90


def test_snapshot_thinking_that_the_growth_shows_at_its_text_size_stays_so(tmp_path: Path):
    path = _with_sent_back_thinking(_snapshot_turns(8), tmp_path, factor=1.0)
    sized, texts, _ = _snapshot_thinking_tokens(path)
    assert sized == texts


def test_too_few_turns_measure_nothing(tmp_path: Path):
    # four snapshot responses are fewer than the thread needs to measure a factor
    path = _with_sent_back_thinking(_snapshot_turns(4), tmp_path, factor=3.0)
    sized, texts, _ = _snapshot_thinking_tokens(path)
    assert sized == texts


def test_the_thinking_factor_does_not_depend_on_which_config_ran_first(tmp_path: Path):
    path = _with_sent_back_thinking(_snapshot_turns(8), tmp_path, factor=3.0)
    other = engine.get_preset("claude-code-2.1.88").replace(autocompact_buffer_tokens=20_000)

    def thinking(session: engine.Session) -> list[int]:
        return [b.tok for m in session.main.messages for b in m.blocks if b.type == "thinking"]

    shared = engine.load_session(str(path))
    engine.replay(shared, engine.get_preset("claude-code-2.1.88"), mode="recorded")
    after_first = engine.replay(shared, other, mode="recorded").to_json()["requests"]
    fresh = engine.load_session(str(path))
    alone = engine.replay(fresh, other, mode="recorded").to_json()["requests"]
    assert thinking(shared) == thinking(fresh)
    assert [r["model_tokens"] for r in after_first] == [r["model_tokens"] for r in alone]


class _CountingCounter(TiktokenCounter):
    """A ``TiktokenCounter`` that notes each text it counts."""

    def __init__(self) -> None:
        super().__init__()
        self.counted: list[str] = []

    def count(self, text: str) -> int:
        self.counted.append(text)
        return super().count(text)


def test_a_thinking_text_is_counted_once_per_counter():
    """Sizing a response, the calibration's growth factor and scaling unsized thinking each
    read the thinking text's count: the counter counts it once (by the block's cache key),
    with the same count as counting it again."""
    text = "weighing which module to change first " * 20
    counter = _CountingCounter()
    first, twin = Block("thinking", text), Block("thinking", text)
    other = Block("thinking", "a different thought " * 5)
    for block in (first, twin, other):
        tokens.block_key(block)
    assert tokens.thinking_text_tokens(first, counter) == COUNTER.count(text)
    assert tokens.thinking_text_tokens(twin, counter) == COUNTER.count(text)  # the same text
    assert tokens.thinking_text_tokens(other, counter) == COUNTER.count(other.text)
    assert tokens.thinking_text_tokens(first, counter) == COUNTER.count(text)
    assert counter.counted == [text, other.text]
    # another counter (another replay) counts again; a block without a key is always counted
    again = _CountingCounter()
    tokens.thinking_text_tokens(first, again)
    keyless = Block("thinking", text)
    tokens.thinking_text_tokens(keyless, again)
    tokens.thinking_text_tokens(keyless, again)
    assert again.counted == [text, text, text]
    # what a checkpoint pickles holds none of them
    assert pickle.loads(pickle.dumps(counter)).block_counts == {}


def test_scaling_unsized_thinking_reads_the_count_sizing_made():
    text = "reasoning about the module layout " * 40
    msg = response([text], "done", output=8)
    tokens.block_key(msg.blocks[0])
    counter = _CountingCounter()
    size_thinking(msg, counter)
    assert msg.metadata.get("thinking_unsized")
    assert tokens.scale_unsized_thinking([msg], 1.5, counter, "main") == 1
    assert msg.blocks[0].tok == round(COUNTER.count(text) * 1.5)
    assert counter.counted.count(text) == 1
