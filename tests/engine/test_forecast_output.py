"""The forecast's output model (``replay.forecast._OutputModel``) on written sessions.

A later response's output is ``overhead + ratio × visible + rate × signature``, fitted on the
session's read responses; its thinking is sized for the view as recorded mode would size it.
Each rule is checked on a transcript whose read responses record outputs that follow it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextlab import engine
from contextlab.engine.input.model import SIGNATURE_CHARS, Message
from contextlab.engine.input.session import Session
from contextlab.engine.measures.tokens import TiktokenCounter, block_tokens
from contextlab.engine.replay.forecast import ESTIMATED_OUTPUT, forecast_session
from tests.engine.builders import TranscriptBuilder

#: (content blocks of one response, its recorded output from (visible tokens, signature chars))
Response = tuple[list[dict[str, Any]], Callable[[int, int], int]]


def _text(n: int) -> dict[str, Any]:
    return {"type": "text", "text": " ".join(f"word{i}" for i in range(n))}


def _thinking(signature: int, text: str = "") -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": "S" * signature}


def _write(path: Path, responses: list[Response], outputs: list[int]) -> Path:
    b = TranscriptBuilder()
    b.prompt("start")
    for n, ((blocks, _), output) in enumerate(zip(responses, outputs, strict=True)):
        b.usage_total += 500
        b.assistant(
            blocks,
            usage={
                "input_tokens": 3,
                "cache_creation_input_tokens": 500,
                "cache_read_input_tokens": b.usage_total - 503,
                "output_tokens": output,
            },
        )
        b.prompt(f"next {n}")
    return b.write(path)


def _responses(session: Session) -> list[Message]:
    return [m for m in session.main.messages if m.role == "assistant"]


def _visible(message: Message, counter: TiktokenCounter) -> int:
    return sum(block_tokens(b, counter) for b in message.blocks if b.type != "thinking")


def _signature(message: Message) -> int:
    return sum(b.data[SIGNATURE_CHARS] for b in message.blocks if b.type == "thinking" and b.data)


def _session(tmp_path: Path, responses: list[Response]) -> Session:
    """The session with every response recording what its rule says of its content (the
    visible count is measured on a first copy, as the engine measures it)."""
    counter = TiktokenCounter()
    draft = engine.load_session(
        str(_write(tmp_path / "draft.jsonl", responses, [1] * len(responses)))
    )
    outputs = [
        rule(_visible(m, counter), _signature(m))
        for (_, rule), m in zip(responses, _responses(draft), strict=True)
    ]
    return engine.load_session(str(_write(tmp_path / "session.jsonl", responses, outputs)))


def _later(session: Session, share: float, **constants: Any) -> list[Message]:
    copy = forecast_session(session, share, TiktokenCounter(), **constants)
    return [m for m in _responses(copy) if ESTIMATED_OUTPUT in m.metadata]


def test_the_parser_keeps_a_thinking_blocks_signature_length(tmp_path):
    session = _session(
        tmp_path, [([_thinking(432), _text(5)], lambda v, s: 9), ([_text(5)], lambda v, s: 9)]
    )
    first, second = _responses(session)
    thinking = [b for b in first.blocks if b.type == "thinking"]
    assert [b.data for b in thinking] == [{SIGNATURE_CHARS: 432}]
    assert all(b.data is None for b in second.blocks)


def test_a_later_output_is_the_overhead_plus_the_read_ratio_of_its_visible_tokens(tmp_path):
    # every read response recorded 50 + 2 × its visible tokens: so is every later estimate
    sizes = [10, 40, 25, 80, 15, 60, 30, 120, 5, 45]
    session = _session(tmp_path, [([_text(n)], lambda v, s: 50 + 2 * v) for n in sizes])
    counter = TiktokenCounter()
    later = _later(session, 0.5, response_overhead=50)
    assert len(later) == 5
    for message in later:
        assert message.metadata[ESTIMATED_OUTPUT] == 50 + 2 * _visible(message, counter)
    # the overhead is part of the model: without it the same reads give other estimates
    without = _later(session, 0.5, response_overhead=0)
    assert [m.metadata[ESTIMATED_OUTPUT] for m in without] != [
        m.metadata[ESTIMATED_OUTPUT] for m in later
    ]


def test_a_later_thinking_output_is_sized_from_its_signature(tmp_path):
    # thinking without text (newer versions write only the signature): the read responses
    # recorded 50 + their visible tokens + 0.25 × their signature length
    def rule(v: int, s: int) -> int:
        return 50 + v + s // 4

    responses: list[Response] = [([_text(20)], rule), ([_text(30)], rule)]
    responses += [([_thinking(n), _text(10)], rule) for n in (400, 800, 1200, 2000)]
    responses += [([_thinking(4000), _text(10)], rule), ([_thinking(8000), _text(10)], rule)]
    session = _session(tmp_path, responses)
    counter = TiktokenCounter()
    later = _later(session, 0.75, response_overhead=50)
    assert [_signature(m) for m in later] == [4000, 8000]
    for message in later:
        expected = 50 + _visible(message, counter) + _signature(message) // 4
        assert abs(message.metadata[ESTIMATED_OUTPUT] - expected) <= 1
        # and sent back in the view at that size: the output beyond the visible blocks
        (thinking,) = [b for b in message.blocks if b.type == "thinking"]
        assert thinking.tok == message.metadata[ESTIMATED_OUTPUT] - _visible(message, counter)


def test_the_signature_rate_is_capped(tmp_path):
    # read responses that recorded 3 tokens a signature character (a streaming snapshot's
    # accident): the signature cannot stand for more thinking than the cap
    def rule(v: int, s: int) -> int:
        return 50 + v + 3 * s

    responses: list[Response] = [([_text(20)], rule)]
    responses += [([_thinking(n), _text(10)], rule) for n in (400, 800, 1200, 2000, 3000)]
    session = _session(tmp_path, responses)
    counter = TiktokenCounter()
    (message,) = _later(session, 0.8, response_overhead=50, signature_rate_max=0.35)
    expected = 50 + _visible(message, counter) + 0.35 * 3000
    assert abs(message.metadata[ESTIMATED_OUTPUT] - expected) <= 1
    (uncapped,) = _later(session, 0.8, response_overhead=50, signature_rate_max=10.0)
    assert uncapped.metadata[ESTIMATED_OUTPUT] > 2 * expected


def test_thinking_text_after_read_snapshots_is_left_to_the_growth_factor(tmp_path):
    # the read responses recorded streaming snapshots (1 token) of responses whose thinking
    # text the file keeps: a later one's thinking is its text, marked for the calibration's
    # growth factor as recorded mode marks a snapshot, not sized from the estimated output
    text = "Let me think about the parser and the tests. " * 30
    responses: list[Response] = [([_thinking(2000, text), _text(30)], lambda v, s: 1)] * 6
    session = _session(tmp_path, responses)
    counter = TiktokenCounter()
    later = _later(session, 0.5)
    assert later
    for message in later:
        assert message.metadata.get("thinking_unsized") is True
        (thinking,) = [b for b in message.blocks if b.type == "thinking"]
        assert thinking.tok == counter.count(text)


def test_thinking_text_after_read_final_counts_is_sized_from_the_estimate(tmp_path):
    # the same responses recording final counts (more than the visible blocks and the text):
    # a later one's thinking is what its estimated output holds beyond the visible blocks
    text = "Let me think about the parser and the tests. " * 30

    def rule(v: int, s: int) -> int:
        return 50 + v + s // 2

    responses: list[Response] = [([_thinking(2000, text), _text(30)], rule)] * 6
    session = _session(tmp_path, responses)
    counter = TiktokenCounter()
    later = _later(session, 0.5, signature_rate_max=1.0)
    assert later
    for message in later:
        assert "thinking_unsized" not in message.metadata
        (thinking,) = [b for b in message.blocks if b.type == "thinking"]
        visible = _visible(message, counter)
        assert thinking.tok == message.metadata[ESTIMATED_OUTPUT] - visible
        assert thinking.tok > counter.count(text)


def test_thinking_after_read_final_counts_is_sent_back_at_their_signature_rate(tmp_path):
    # enough read responses whose final count sized their thinking: a later one's thinking is
    # sent back at their median thinking per signature character, whatever its visible part
    rates = {400: 0.2, 800: 0.25, 1200: 0.3, 1600: 0.25, 2000: 0.2, 2400: 0.25}

    def rule(v: int, s: int) -> int:
        return v + round(rates.get(s, 0.25) * s)

    responses: list[Response] = [([_thinking(n), _text(10)], rule) for n in rates]
    responses += [([_thinking(3000), _text(200)], rule)]
    session = _session(tmp_path, responses)
    (message,) = _later(session, 0.85)
    (thinking,) = [b for b in message.blocks if b.type == "thinking"]
    assert thinking.tok == round(0.25 * 3000)
    # the output a recording would say is the model's, not the view's size
    assert message.metadata[ESTIMATED_OUTPUT] != thinking.tok + _visible(message, TiktokenCounter())
