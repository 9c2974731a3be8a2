"""What a parsed session costs to hold and to pickle (issue #25: a 2 GB session's upload check
and replay within a 1.5 GB worker): one copy of the strings every record repeats, record uuids
in 16 bytes each, and a pickle whose memo holds no state object per block or message."""

from __future__ import annotations

import copy
import pickle
import pickletools
import uuid as uuids

import pytest

from contextlab import engine
from contextlab.engine.input.model import Block, Message, Usage
from contextlab.engine.input.uuid_set import UuidSet
from tests.engine.builders import TranscriptBuilder


def _memoized(data: bytes) -> int:
    return sum(1 for op, _, _ in pickletools.genops(data) if op.name == "MEMOIZE")


def _message(blocks: list[Block]) -> Message:
    return Message(
        "u1",
        "assistant",
        "assistant",
        blocks,
        message_id="msg_1",
        usage=Usage(input=3, cache_read=100, output=7, cache_write_5m=0),
        metadata={"first_record_blocks": 1},
        uuids=["u1", "u2"],
    )


def test_blocks_messages_and_usage_round_trip_sharing_what_they_shared():
    shared = Block("tool_use", 'Read{"file_path":"/a"}', "t1", "Read", data={"file_path": "/a"})
    first, second = _message([shared, Block("text", "done")]), _message([shared])
    again = pickle.loads(pickle.dumps([first, second], protocol=pickle.HIGHEST_PROTOCOL))
    assert again == [first, second]
    assert again[0].blocks[0] is again[1].blocks[0]
    assert again[0].usage == Usage(input=3, cache_read=100, output=7, cache_write_5m=0)


def test_blocks_messages_and_usage_copy_as_they_did():
    message = _message([Block("text", "done")])
    shallow, deep = copy.copy(message), copy.deepcopy(message)
    assert shallow == message
    assert shallow.blocks is message.blocks
    assert deep == message
    assert deep.blocks[0] is not message.blocks[0]
    assert deep.usage is not message.usage
    assert copy.copy(message.blocks[0]) == message.blocks[0]


def test_the_pickler_keeps_no_state_object_per_block_message_or_usage():
    # the memo holds every object pickled until the end: a state tuple or slots dict per
    # block and message would be held for the whole session (hundreds of MB at 2 GB)
    text = "the same text"
    blocks = [Block("text", text) for _ in range(200)]
    data = pickle.dumps(blocks, protocol=pickle.HIGHEST_PROTOCOL)
    assert "BUILD" not in {op.name for op, _, _ in pickletools.genops(data)}
    # the list, the blocks, the class and its module's names, the type and the text
    assert _memoized(data) <= len(blocks) + 8
    messages = [_message([]) for _ in range(100)]
    data = pickle.dumps(messages, protocol=pickle.HIGHEST_PROTOCOL)
    # a message, its usage, blocks, uuids and metadata: five objects each, no state beside
    per_message = 5
    assert _memoized(data) <= per_message * len(messages) + 40


def test_the_strings_records_repeat_are_held_once(tmp_path):
    b = TranscriptBuilder()
    for n in range(5):
        b.prompt(f"prompt {n}")
        b.tool_call("Read", {"file_path": f"/src/{n}.py"}, f"contents {n}")
        b.assistant([{"type": "text", "text": f"done {n}"}])
    session = engine.load_session(str(b.write(tmp_path / "s.jsonl")))
    messages = session.main.messages
    for name in ("cwd", "version"):
        assert len({id(getattr(m, name)) for m in messages}) == 1, name
    assert len({id(m.model) for m in messages if m.role == "assistant"}) == 1
    names = [b.tool_name for m in messages for b in m.blocks if b.type == "tool_use"]
    assert len(names) == 5
    assert len({id(name) for name in names}) == 1


CANONICAL = [str(uuids.UUID(int=n * 7919 + 1)) for n in range(300)]
OTHERS = ["ABCDEF01-2345-4678-9abc-def012345678", "not-a-uuid", "", "msg_01abc"]


def test_a_uuid_set_is_a_set_of_its_strings():
    found = UuidSet([*CANONICAL, *OTHERS, CANONICAL[5]])
    assert len(found) == len(CANONICAL) + len(OTHERS)
    assert found == frozenset(CANONICAL + OTHERS)
    assert frozenset(CANONICAL + OTHERS) == found
    assert sorted(found) == sorted(CANONICAL + OTHERS)
    for each in [*CANONICAL, *OTHERS]:
        assert each in found
    upper = next(c.upper() for c in CANONICAL if c != c.upper())
    for absent in (str(uuids.UUID(int=2)), upper, OTHERS[0].lower(), "x", 5):
        assert absent not in found
    assert UuidSet() == frozenset()
    assert "" not in UuidSet()
    assert pickle.loads(pickle.dumps(found)) == found


@pytest.mark.parametrize("count", [1, 2, 1000])
def test_a_uuid_set_finds_each_of_its_uuids_and_none_between(count):
    values = sorted(str(uuids.uuid4()) for _ in range(count))
    found = UuidSet(reversed(values))
    assert all(v in found for v in values)
    between = [f"{v[:-1]}{'0' if v[-1] != '0' else '1'}" for v in values]
    assert sum(v in found for v in between) == len(set(between) & set(values))


def test_a_session_keeps_its_record_uuids_in_16_bytes_each(tmp_path):
    b = TranscriptBuilder()
    for n in range(200):
        b.prompt(f"prompt {n}")
        b.assistant([{"type": "text", "text": f"answer {n}"}])
    session = engine.load_session(str(b.write(tmp_path / "s.jsonl")))
    assert session.record_uuids == frozenset(r["uuid"] for r in b.records)
    pickled = pickle.dumps(session.record_uuids, protocol=pickle.HIGHEST_PROTOCOL)
    assert len(pickled) < 17 * len(b.records) + 200


def test_a_record_s_parent_is_its_parent_s_uuid_string(tmp_path):
    from contextlab.engine.input.loading import TranscriptFile
    from contextlab.engine.input.model import ProblemList
    from contextlab.engine.input.session import SideRecords
    from contextlab.engine.input.sources.claude_code.records import RecordParser

    b = TranscriptBuilder()
    for n in range(5):
        b.prompt(f"prompt {n}")
        b.tool_call("Read", {"file_path": f"/src/{n}.py"}, f"contents {n}")
    path = b.write(tmp_path / "s.jsonl")
    parser = RecordParser(
        TranscriptFile(path.name, lambda: path.open("rb")), ProblemList(), SideRecords()
    )
    parser.parse()
    by_uuid = {r.uuid: r for r in parser.records}
    linked = [r for r in parser.records if r.parent is not None]
    assert len(linked) == len(parser.records) - 1
    assert all(r.parent is by_uuid[r.parent].uuid for r in linked)
    assert all(r.message is None or r.message.uuid is r.uuid for r in parser.records)
    assert parser.shared == {}  # let go once the file is read


@pytest.mark.parametrize("known", [0, 1, 7, 300])
def test_a_uuid_set_with_added_uuids_is_the_set_of_all_of_them(known):
    """``with_added`` merges uuids into the sorted rows: the same rows as a set made of all of
    them at once (known ones and repeats once, other strings kept apart), the set added to
    unchanged."""
    values = [str(uuids.uuid4()) for _ in range(known + 40)]
    earlier = UuidSet([*values[:known], "agent-x"])
    added = [*values[known:], values[0], values[-1], "agent-y", str(uuids.UUID(int=0))]
    grown = earlier.with_added(added)
    whole = UuidSet([*values[:known], "agent-x", *added])
    assert grown._rows == whole._rows
    assert grown._others == whole._others
    assert grown == whole
    assert all(v in grown for v in [*values, "agent-y", str(uuids.UUID(int=0))])
    assert earlier == frozenset([*values[:known], "agent-x"])
    assert earlier.with_added([]) == earlier
