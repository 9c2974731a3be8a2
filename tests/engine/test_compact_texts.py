"""Blocks hold their texts compact, and the explorer's messages are written one at a time:
the memory a replay of a session of gigabytes needs (issue #25), with results unchanged."""

from __future__ import annotations

import io
import json
import pickle
import random
import string
import sys

import pytest

from contextlab import engine
from contextlab.engine.input import session_cache
from contextlab.engine.input.model import Block, Message, compact_text, expand_text
from tests.engine.builders import TranscriptBuilder
from tests.engine.test_pipeline import long_session

READ_RESULT = "".join(f"{n:6}→line {n} of the file\n" for n in range(1, 400))
TEXTS = [
    "",
    "plain ASCII",
    READ_RESULT,
    'emoji 🎉 and a tab\t and a backslash \\ and a quote "',
    "日本語のテキスト" * 50,
    "a lone surrogate \ud800 from a JSON escape →",
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_block_gives_back_exactly_its_text_and_pickles(text):
    block = Block("tool_result", text, tool_use_id="t1", tok=5)
    assert block.text == text
    assert expand_text(compact_text(text)) == text
    again = pickle.loads(pickle.dumps(block, protocol=pickle.HIGHEST_PROTOCOL))
    assert again == block
    assert (again.text, again.tok, again.tool_use_id) == (text, 5, "t1")
    assert block.copy(tok=-1) == Block("tool_result", text, tool_use_id="t1")


def test_a_read_result_is_held_in_about_half_the_memory_and_cjk_not_in_more():
    block = Block("tool_result", READ_RESULT)
    assert isinstance(block._text, bytes)
    assert sys.getsizeof(block._text) < 0.55 * sys.getsizeof(READ_RESULT)
    cjk = TEXTS[4]  # three UTF-8 bytes a character: the str's two are smaller
    assert Block("text", cjk)._text is cjk
    assert Block("text", "ascii")._text == "ascii"
    latin = "café crème " * 100  # one byte a character as a str: UTF-8 would be bigger
    assert Block("text", latin)._text is latin


def test_a_message_holds_its_original_output_compact():
    message = Message("u", "user", "tool_result", [])
    message.original_output = READ_RESULT
    assert isinstance(message.compact_original_output, bytes)
    assert pickle.loads(pickle.dumps(message)).original_output == READ_RESULT
    message.original_output = None
    assert message.compact_original_output is None


#: ``Block("text", "h→i", tok=3)`` pickled when Block was a slotted dataclass: checkpoints
#: and live sessions' reading states written before compact texts hold blocks so
OLD_BLOCK_PICKLE = (
    b"\x80\x05\x95\xb3\x00\x00\x00\x00\x00\x00\x00\x8c\x1dcontextlab.engine.input.model\x94"
    b"\x8c\x05Block\x94\x93\x94)\x81\x94N}\x94(\x8c\x04type\x94\x8c\x04text\x94h\x06\x8c\x05h"
    b"\xe2\x86\x92i\x94\x8c\x0btool_use_id\x94N\x8c\ttool_name\x94N\x8c\x08is_error\x94\x89"
    b"\x8c\x04data\x94N\x8c\x05media\x94K\x00\x8c\x07is_list\x94\x89\x8c\x03tok\x94K\x03\x8c"
    b"\x05rough\x94J\xff\xff\xff\xff\x8c\x03key\x94J\xff\xff\xff\xffu\x86\x94b."
)


def test_a_block_pickled_in_the_former_format_loads():
    assert pickle.loads(OLD_BLOCK_PICKLE) == Block("text", "h→i", tok=3)


def test_a_truncated_cache_file_is_parsed_again_not_crashed_on(tmp_path):
    session_cache._RECENT.clear()  # another test's copy of the same file
    path = long_session(3).write(tmp_path / "s.jsonl")
    cache = tmp_path / "cache"
    first = engine.load_session_cached(path, cache_dir=cache)
    (target,) = cache.glob("*.pickle")
    whole = target.read_bytes()
    target.write_bytes(whole[: len(whole) // 2])
    session_cache._RECENT.clear()
    again = engine.load_session_cached(path, cache_dir=cache)
    assert [b.text for m in again.main.messages for b in m.blocks] == [
        b.text for m in first.main.messages for b in m.blocks
    ]
    assert target.read_bytes() == whole  # rewritten whole


def test_a_cache_file_of_an_older_version_is_not_read(tmp_path):
    session_cache._RECENT.clear()  # another test's copy of the same file
    path = long_session(3).write(tmp_path / "s.jsonl")
    cache = tmp_path / "cache"
    engine.load_session_cached(path, cache_dir=cache)
    (target,) = cache.glob("*.pickle")
    older = target.with_name(target.name.replace(f"-v{session_cache.CACHE_VERSION}", "-v11.x"))
    target.rename(older)
    older.write_bytes(b"a session pickled by an older engine")
    session_cache._RECENT.clear()
    session = engine.load_session_cached(path, cache_dir=cache)
    assert session.main.messages
    assert target.exists()
    assert older.read_bytes() == b"a session pickled by an older engine"


def _tricky_session(tmp_path):
    b = TranscriptBuilder()
    for text in TEXTS[1:-1]:  # (a lone surrogate cannot be written to a file)
        b.prompt(text)
        b.tool_call("Read", {"file_path": "/src/a.py"}, text + READ_RESULT)
        b.assistant([{"type": "text", "text": f"done: {text[:20]}"}])
    return engine.load_session(str(b.write(tmp_path / "tricky.jsonl")))


def test_written_messages_are_the_same_text_as_dumped_ones(tmp_path):
    session = _tricky_session(tmp_path)
    out = io.StringIO()
    engine.write_messages_json(session, out)
    assert out.getvalue() == json.dumps(engine.messages_json(session))


def test_written_messages_keep_the_shared_prefixes_of_branches(tmp_path):
    from contextlab.engine.input.session import Thread

    session = _tricky_session(tmp_path)
    main = session.main
    branch_own = Message("b1", "user", "prompt", [Block("text", "a branch →")])
    branch = Thread("branch-1", "branch", [*main.messages[:3], branch_own], fork_index=3)
    session.threads.append(branch)
    assert engine.messages_json(session)["_shared_prefixes"] == {
        "branch-1": {"thread": main.id, "length": 3}
    }
    out = io.StringIO()
    engine.write_messages_json(session, out)
    assert out.getvalue() == json.dumps(engine.messages_json(session))


@pytest.mark.parametrize("max_chars", [1, 3000, 10**9])
def test_messages_in_parts_join_back_to_the_messages(tmp_path, max_chars):
    from contextlab.engine.input.session import Thread

    session = _tricky_session(tmp_path)
    main = session.main
    branch_own = Message("b1", "user", "prompt", [Block("text", "a branch →")])
    session.threads.append(
        Thread("branch-1", "branch", [*main.messages[:3], branch_own], fork_index=3)
    )
    session.threads.append(Thread("empty", "subagent", []))
    texts = list(engine.messages_json_parts(session, max_chars))
    parts = [json.loads(text) for text in texts]
    for part in parts:
        rows = json.dumps(part["rows"])
        # a part longer than the limit holds one row
        assert len(rows) <= max_chars + 2 or len(part["rows"]) == 1
    threads = [part["thread"] for part in parts]
    assert threads == sorted(threads, key=[t.id for t in session.threads].index)
    if max_chars == 1:  # a part per row
        stored = engine.messages_json(session).values()
        rows = sum(len(each) for each in stored if isinstance(each, list))
        assert len(parts) == rows + 1  # and the empty thread's part
    elif max_chars == 3000:
        assert len(parts) > len(session.threads)
    else:
        assert len(parts) == len(session.threads)
    assert engine.messages_json_head(session) == {
        "_shared_prefixes": {"branch-1": {"thread": main.id, "length": 3}}
    }
    joined = engine.join_messages_parts(engine.messages_json_head(session), parts)
    assert joined == engine.messages_json(session)
    assert json.dumps(joined) == json.dumps(engine.messages_json(session))  # the same order


def test_messages_without_texts_differ_only_by_the_texts(tmp_path):
    session = _tricky_session(tmp_path)
    whole = engine.messages_json(session)
    bare = engine.messages_json(session, include_texts=False)
    for block in (b for rows in whole.values() for row in rows for b in row["blocks"]):
        del block["text"]
    assert bare == whole


@pytest.mark.parametrize("mode", ["recorded", "whatif"])
def test_the_tool_breakdown_needs_no_texts(mode):
    from tests.conftest import corpus_file

    session = engine.load_session(str(corpus_file("marot__spotter__tool_heavy.jsonl")))
    data = engine.replay(session, engine.get_preset("claude-code-2.1.88"), mode=mode).to_json()
    whole = engine.expand_messages(engine.messages_json(session))
    bare = engine.expand_messages(engine.messages_json(session, include_texts=False))
    breakdown = engine.tool_breakdown(data, whole)
    assert breakdown["tools"]
    assert engine.tool_breakdown(data, bare) == breakdown


def test_long_texts_are_deflated_only_while_deflating():
    from contextlab.engine.input.model import Deflated, deflating

    long_read = READ_RESULT * 4
    assert not isinstance(Block("tool_result", long_read)._text, Deflated)
    with deflating():
        block = Block("tool_result", long_read, tok=7)
        short = Block("text", "a short → text")
        rng = random.Random(1)
        noise = Block("text", "".join(rng.choice(string.printable) for _ in range(8000)))
    assert isinstance(block._text, Deflated)
    assert len(block._text.data) < len(long_read) / 4
    assert block.text == long_read
    assert not isinstance(short._text, Deflated)
    assert not isinstance(noise._text, Deflated)  # deflates by less than a quarter
    again = pickle.loads(pickle.dumps(block, protocol=pickle.HIGHEST_PROTOCOL))
    assert again == block
    assert isinstance(again._text, Deflated)
    assert again.text == long_read


def test_a_large_session_parsed_deflated_replays_identically(tmp_path, monkeypatch):
    from contextlab.engine.input.model import Deflated
    from contextlab.engine.input.sources import registry

    path = long_session(6, result_chars=20000).write(tmp_path / "s.jsonl")
    config = engine.get_preset("claude-code-2.1.88")
    plain = engine.load_session(str(path))
    monkeypatch.setattr(registry, "DEFLATE_FROM_BYTES", 0)  # as if the file were large
    deflated = engine.load_session(str(path))
    held = [b._text for m in deflated.main.messages for b in m.blocks]
    assert any(isinstance(t, Deflated) for t in held)
    for mode in ("recorded", "whatif"):
        assert (
            engine.replay(deflated, config, mode=mode).to_json()
            == engine.replay(plain, config, mode=mode).to_json()
        )
    assert json.dumps(engine.messages_json(deflated)) == json.dumps(engine.messages_json(plain))
