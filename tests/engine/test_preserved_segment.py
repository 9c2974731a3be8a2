"""Compactions that keep a preserved segment (``compactMetadata.preservedSegment``).

Session-memory and partial compactions keep the recent messages from ``headUuid`` to
``tailUuid`` after the summary (facts §1.6, §6.3). The transcript leaves those messages where
they were, just before the boundary (2.1.2xx). Recorded mode must keep them in the view, and a
what-if compaction where the recorded one was must keep the same ones, so that a what-if with
the session's own settings reproduces the recording.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contextlab import engine
from tests.engine.builders import TranscriptBuilder

CONFIG = engine.get_preset("claude-code-2.1.88").replace(context_window=100_000)
THRESHOLD = 67_000  # 100k window − 20k summary output − 13k buffer
KEPT_RESULT = "kept line of the last tool result\n" * 120


def usage(total: int) -> dict[str, Any]:
    return {
        "input_tokens": 3,
        "cache_creation_input_tokens": 500,
        "cache_read_input_tokens": total - 513,
        "output_tokens": 10,
    }


def session_with_a_preserved_segment(
    *, keep: bool = True, restored_file: bool = False
) -> TranscriptBuilder:
    """A session compacted after a tool result, keeping the last response and that result."""
    b = TranscriptBuilder(version="2.1.226")
    b.prompt("migrate the build")
    for n in range(10):
        b.tool_call("Read", {"file_path": f"/src/f{n}.txt"}, "source line\n" * 300, grow=4_000)
    pre_tokens = 66_900
    response = b.assistant(
        [
            {"type": "text", "text": "Now the last file."},
            {"type": "tool_use", "id": "toolu_last", "name": "Read", "input": {"file_path": "/x"}},
        ],
        usage=usage(pre_tokens - 10),
    )
    result = b.tool_result("toolu_last", KEPT_RESULT, parent=response[-1]["uuid"])
    kept = [*response, result]
    boundary = b.envelope(
        "system",
        None,
        subtype="compact_boundary",
        content="Conversation compacted",
        logicalParentUuid=result["uuid"],
        compactMetadata={"trigger": "auto", "preTokens": pre_tokens},
    )
    summary = b.envelope(
        "user",
        boundary["uuid"],
        message={
            "role": "user",
            "content": "This session is being continued from a previous conversation. Summary: "
            "the build was migrated up to the last file.",
        },
        isCompactSummary=True,
        isVisibleInTranscriptOnly=True,
    )
    if keep:
        boundary["compactMetadata"]["preservedSegment"] = {
            "headUuid": kept[0]["uuid"],
            "anchorUuid": summary["uuid"],
            "tailUuid": kept[-1]["uuid"],
        }
    b.add(boundary)
    b.add(summary)
    if restored_file:
        # newer versions write the files they restored after the summary
        b.add(
            b.envelope(
                "attachment",
                summary["uuid"],
                attachment={"type": "file", "filename": "/src/f9.txt", "content": "source"},
            )
        )
    b.usage_total = 9_000
    b.assistant([{"type": "text", "text": "Done with the last file."}], grow=1_000)
    b.prompt("thanks, go on")
    b.assistant([{"type": "text", "text": "continuing"}], grow=1_000)
    return b


def replayed(tmp_path: Path, b: TranscriptBuilder) -> tuple[list[Any], list[Any], Any]:
    session = engine.load_session(str(b.write(tmp_path / "s.jsonl")))
    recorded = engine.replay(session, CONFIG, mode="recorded").to_json()["requests"]
    whatif = engine.replay(session, CONFIG, mode="whatif").to_json()["requests"]
    return recorded, whatif, session


def compacted_at(requests: list[dict[str, Any]]) -> list[int]:
    return [
        r["index"]
        for r in requests
        if any(e["step"] == "autocompact" and e["action"] == "compacted" for e in r["events"])
    ]


def test_recorded_view_keeps_the_preserved_messages_before_the_boundary(tmp_path):
    recorded, _, session = replayed(tmp_path, session_with_a_preserved_segment())
    (at,) = compacted_at(recorded)
    view = recorded[at]["view"]
    kept = session.main.messages[view["start"] : view["end"]]
    assert [m.kind for m in kept[:2]] == ["assistant", "tool_result"]
    assert kept[1].blocks[0].text == KEPT_RESULT
    # the summary leads the view from its head (its own place in the range is hidden)
    summary = next(m.index for m in kept if m.kind == "summary")
    assert view["head"][0] == f"m:{summary}"
    dropped, _, _ = replayed(tmp_path, session_with_a_preserved_segment(keep=False))
    assert recorded[at]["raw_tokens"] > dropped[at]["raw_tokens"] + 300  # the kept result


def test_whatif_keeps_the_recorded_segment_and_reproduces_the_recording(tmp_path):
    recorded, whatif, _ = replayed(tmp_path, session_with_a_preserved_segment())
    assert compacted_at(whatif) == compacted_at(recorded)
    (at,) = compacted_at(whatif)
    event = next(e for e in whatif[at]["events"] if e["step"] == "autocompact")
    assert event["variant"] == "preserved_segment"
    assert event["summary_reused"] is True
    assert event["kept_messages"] >= 2
    assert event["decision_tokens"] >= THRESHOLD
    assert [r["raw_tokens"] for r in whatif] == [r["raw_tokens"] for r in recorded]


def test_whatif_full_compaction_keeps_nothing_without_a_preserved_segment(tmp_path):
    _, whatif, _ = replayed(tmp_path, session_with_a_preserved_segment(keep=False))
    (at,) = compacted_at(whatif)
    event = next(e for e in whatif[at]["events"] if e["step"] == "autocompact")
    assert event["variant"] == "full"
    assert event["kept_messages"] == 0


def autocompact_event(requests: list[dict[str, Any]], at: int) -> dict[str, Any]:
    return next(e for e in requests[at]["events"] if e["step"] == "autocompact")


def test_recorded_restored_files_replace_the_modeled_restoration(tmp_path):
    modeled, _, _ = replayed(tmp_path, session_with_a_preserved_segment())
    (at,) = compacted_at(modeled)
    assert autocompact_event(modeled, at)["restored_files"]  # the Read files, modeled
    recorded, whatif, _ = replayed(tmp_path, session_with_a_preserved_segment(restored_file=True))
    assert autocompact_event(recorded, at)["restored_files"] == []
    event = autocompact_event(whatif, at)
    assert event["restored_files"] == []
    assert event["modeled_restoration"] is False
    assert [r["raw_tokens"] for r in whatif] == [r["raw_tokens"] for r in recorded]
