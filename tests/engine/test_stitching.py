"""A file that continues another, uploaded with it, is stitched to it (issue #9, item 1).

A resumed or continued session writes a new file whose first record hangs from a record of
the older one (``parentUuid``). Alone, the newer file carries an "earlier history not in this
file" span sized from its usage; in one archive with the older file, the two are read as one
conversation and that history is the real one.
"""

from __future__ import annotations

import itertools
import zipfile
from pathlib import Path

import pytest

from contextlab import engine
from contextlab.engine.input import session_cache
from tests.engine.builders import TranscriptBuilder


def older_and_newer() -> tuple[TranscriptBuilder, TranscriptBuilder]:
    older = TranscriptBuilder()
    for n in range(3):
        older.prompt(f"first session, step {n}")
        older.assistant([{"type": "text", "text": f"done with step {n} " * 30}])
    newer = TranscriptBuilder(
        session_id="99999999-2222-3333-4444-555555555555",
        _ids=itertools.count(10_000),
        last_uuid=older.last_uuid,
        clock=older.clock,
    )
    for n in range(2):
        newer.prompt(f"resumed, step {n}")
        newer.assistant(
            [{"type": "text", "text": f"resumed step {n} " * 30}], message_id=f"msg_resumed_{n}"
        )
    return older, newer


def archive(tmp_path: Path, files: dict[str, TranscriptBuilder]) -> Path:
    path = tmp_path / "project.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for name, builder in files.items():
            zf.writestr(f"project/{name}", builder.text())
    return path


def prompts(session: engine.Session) -> list[str]:
    main = session.threads[0]
    return [
        "".join(b.text for b in m.blocks)
        for m in main.messages
        if m.role == "user" and m.kind == "prompt"
    ]


def test_the_newer_file_alone_starts_outside(tmp_path):
    _, newer = older_and_newer()
    session = engine.load_session(str(newer.write(tmp_path / "newer.jsonl")))
    assert session.threads[0].starts_outside
    assert prompts(session) == ["resumed, step 0", "resumed, step 1"]


def test_both_files_in_one_archive_read_as_one_conversation(tmp_path):
    older, newer = older_and_newer()
    # the older file is the larger one: the archive's pick of the session file must not matter
    assert len(older.text()) > len(newer.text())
    session = engine.load_session(str(archive(tmp_path, {"a.jsonl": older, "b.jsonl": newer})))
    main = session.threads[0]
    assert not main.starts_outside
    assert prompts(session) == [
        "first session, step 0",
        "first session, step 1",
        "first session, step 2",
        "resumed, step 0",
        "resumed, step 1",
    ]
    # every message keeps the file and line it came from
    assert {m.file for m in main.messages} == {"project/a.jsonl", "project/b.jsonl"}
    notes = [p for p in session.problems if p.code == "stitched_files"]
    assert len(notes) == 1
    assert notes[0].message.index("a.jsonl") < notes[0].message.index("b.jsonl")
    # and the replay sees the real history: no earlier-history span is needed
    result = engine.replay(session, engine.get_preset("claude-code-2.1.88")).to_json()
    assert all(r["earlier_history_tokens"] == 0 for r in result["requests"])
    assert len(result["requests"]) == 5


def test_a_file_copied_into_the_newer_one_is_read_once(tmp_path):
    older, newer = older_and_newer()
    # some versions copy the last records of the older file into the new one
    newer.records[:0] = [dict(r) for r in older.records[-2:]]
    newer.records[2]["parentUuid"] = older.records[-1]["uuid"]
    session = engine.load_session(str(archive(tmp_path, {"a.jsonl": older, "b.jsonl": newer})))
    assert prompts(session).count("first session, step 2") == 1
    assert len(prompts(session)) == 5


def test_an_unrelated_file_is_reported_and_left_out(tmp_path):
    older, newer = older_and_newer()
    other = TranscriptBuilder(session_id="77777777-2222-3333-4444-555555555555")
    other.prompt("something else entirely")
    other.assistant([{"type": "text", "text": "ok"}])
    files = {"a.jsonl": older, "b.jsonl": newer, "c.jsonl": other}
    session = engine.load_session(str(archive(tmp_path, files)))
    assert "something else entirely" not in prompts(session)
    left_out = [p for p in session.problems if p.code == "extra_transcript"]
    assert [p.message.split(":")[0] for p in left_out] == ["project/c.jsonl"]
    assert left_out[0].severity == "info"


# --- files uploaded separately (open_upload_chain, load_session(earlier=...)) ---------------


def test_the_newer_file_alone_names_the_record_it_continues(tmp_path):
    older, newer = older_and_newer()
    session = engine.load_session(str(newer.write(tmp_path / "newer.jsonl")))
    assert session.continues_uuid == older.last_uuid
    assert older.last_uuid not in session.record_uuids
    assert {r["uuid"] for r in newer.records} == session.record_uuids
    whole = engine.load_session(str(older.write(tmp_path / "older.jsonl")))
    assert whole.continues_uuid is None
    assert older.last_uuid in whole.record_uuids


def test_a_subagent_file_alone_continues_no_session(tmp_path):
    _, newer = older_and_newer()
    for record in newer.records:
        record["isSidechain"] = True
    session = engine.load_session(str(newer.write(tmp_path / "agent-a1.jsonl")))
    # it hangs from the main conversation (its earlier history is elsewhere) but is not a
    # resumed session: nothing should link it as one
    assert session.threads[0].starts_outside
    assert session.continues_uuid is None


def test_an_earlier_upload_given_apart_is_stitched_like_one_archive(tmp_path):
    older, newer = older_and_newer()
    older_path = older.write(tmp_path / "stored-digest-1.jsonl")
    session = engine.load_session(
        str(newer.write(tmp_path / "newer.jsonl")),
        earlier=[engine.EarlierUpload(older_path, name="older.jsonl")],
    )
    main = session.threads[0]
    assert not main.starts_outside
    assert session.continues_uuid is None
    assert prompts(session)[0] == "first session, step 0"
    assert len(prompts(session)) == 5
    # the earlier file is shown by its name, not by the path it is stored under
    assert {m.file for m in main.messages} == {"older.jsonl", "newer.jsonl"}
    result = engine.replay(session, engine.get_preset("claude-code-2.1.88")).to_json()
    assert all(r["earlier_history_tokens"] == 0 for r in result["requests"])
    assert len(result["requests"]) == 5
    session.close()


def test_a_gzipped_earlier_upload_and_plain_paths_work(tmp_path):
    import gzip

    older, newer = older_and_newer()
    gz = tmp_path / "older.jsonl.gz"
    gz.write_bytes(gzip.compress(older.text().encode()))
    session = engine.load_session(str(newer.write(tmp_path / "newer.jsonl")), earlier=[gz])
    assert not session.threads[0].starts_outside
    assert len(prompts(session)) == 5


def test_an_earlier_upload_that_is_gone_is_reported_and_left_out(tmp_path):
    _, newer = older_and_newer()
    session = engine.load_session(
        str(newer.write(tmp_path / "newer.jsonl")), earlier=[tmp_path / "gone.jsonl"]
    )
    assert session.threads[0].starts_outside
    assert [p.code for p in session.problems if p.file == "gone.jsonl"] == [
        "earlier_upload_unreadable"
    ]


def test_open_upload_chain_closes_every_upload(tmp_path):
    older, newer = older_and_newer()
    older_zip = archive(tmp_path, {"a.jsonl": older})
    closed: list[str] = []
    upload = engine.open_upload_chain(newer.write(tmp_path / "newer.jsonl"), [older_zip])
    assert [f.name for f in upload.siblings] == ["project/a.jsonl"]
    upload._closers.append(lambda: closed.append("done"))
    upload.close()
    assert closed == ["done"]
    # the zip's own close ran too: its member can no longer be opened
    with pytest.raises(ValueError, match="closed"):
        upload.siblings[0].opener()


def test_the_session_cache_keys_a_stitched_session_by_every_file(tmp_path):
    older, newer = older_and_newer()
    older_path = older.write(tmp_path / "older.jsonl")
    newer_path = newer.write(tmp_path / "newer.jsonl")
    cache = tmp_path / "cache"
    alone = engine.load_session_cached(newer_path, cache_dir=cache)
    stitched = engine.load_session_cached(newer_path, cache_dir=cache, earlier=[older_path])
    assert alone.threads[0].starts_outside
    assert not stitched.threads[0].starts_outside
    assert len(list(cache.glob("*.pickle"))) == 2
    # and each comes back as it was, from memory or from disk
    session_cache._RECENT.clear()
    again = engine.load_session_cached(newer_path, cache_dir=cache, earlier=[older_path])
    assert len(prompts(again)) == 5
    assert len(prompts(engine.load_session_cached(newer_path, cache_dir=cache))) == 2
    for each in (alone, stitched, again):
        each.close()
