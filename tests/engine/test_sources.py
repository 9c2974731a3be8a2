"""Source adapters: the registry picks the adapter from an upload's content, never its name."""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.input.loading import Upload, open_upload, read_head
from contextlab.engine.input.model import TranscriptError
from contextlab.engine.input.session import Session, SideRecords, Thread
from contextlab.engine.input.sources import SourceAdapter
from contextlab.engine.input.sources.claude_code.adapter import ClaudeCodeAdapter
from contextlab.engine.input.sources.registry import (
    ADAPTERS,
    HEAD_LINES,
    detect_source,
    head_records,
)
from tests.engine.builders import TranscriptBuilder

CLAUDE_CODE = ClaudeCodeAdapter()


class OtherAgent:
    """A second agent's format, as a test stands it up: records of ``{"kind": "turn", ...}``."""

    name = "other_agent"
    label = "Other agent"

    def detect(self, head: Sequence[Any]) -> float:
        records = [r for r in head if isinstance(r, dict)]
        return sum(r.get("kind") == "turn" for r in records) / len(records) if records else 0.0

    def parse(self, upload: Upload) -> Session:
        return Session(upload.name, None, [Thread("main", "main", [])], [], SideRecords(), [])


def claude_code_file(path: Path) -> Path:
    b = TranscriptBuilder()
    b.prompt("hello")
    b.assistant([{"type": "text", "text": "hi"}])
    return b.write(path)


def other_agent_file(path: Path) -> Path:
    path.write_text("".join(json.dumps({"kind": "turn", "n": n}) + "\n" for n in range(3)))
    return path


def test_every_registered_adapter_implements_the_interface():
    assert ADAPTERS[0].name == "claude_code"  # the default: it reads what nobody recognises
    for adapter in ADAPTERS:
        assert isinstance(adapter.name, str)
        assert isinstance(adapter.label, str)
        assert callable(adapter.detect)
        assert callable(adapter.parse)
    assert len({adapter.name for adapter in ADAPTERS}) == len(ADAPTERS)


def test_claude_code_recognises_its_records_and_nothing_else():
    b = TranscriptBuilder()
    b.prompt("hello")
    b.assistant([{"type": "text", "text": "hi"}])
    assert CLAUDE_CODE.detect(b.records) == 1.0
    assert CLAUDE_CODE.detect([{"type": "summary", "summary": "t"}, *b.records]) == 1.0
    assert CLAUDE_CODE.detect([]) == 0.0
    assert CLAUDE_CODE.detect([1, "text", None]) == 0.0
    assert CLAUDE_CODE.detect([{"type": []}, {"type": {"user": 1}}, {"type": None}]) == 0.0
    assert CLAUDE_CODE.detect([{"kind": "turn"}, {"type": "user"}]) == 0.0  # a user without uuid
    assert CLAUDE_CODE.detect([{"type": "user", "uuid": "u"}, {"kind": "turn"}]) == 0.5


def test_the_adapter_is_chosen_by_content_whatever_the_file_is_called(tmp_path):
    adapters = (CLAUDE_CODE, OtherAgent())
    claude = claude_code_file(tmp_path / "rollout-2026-01-01.jsonl")
    other = other_agent_file(tmp_path / "agent-1234.jsonl")
    with open_upload(claude) as upload:
        assert detect_source(upload, adapters) is adapters[0]
    with open_upload(other) as upload:
        assert detect_source(upload, adapters) is adapters[1]
    with open_upload(other) as upload:  # no adapter of its agent: the default reads it
        assert detect_source(upload, (CLAUDE_CODE,)) is CLAUDE_CODE


def test_content_nobody_recognises_is_read_by_the_default_adapter_with_its_reasons(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_text('{"kind": "turn"}\nnot json\n')
    with open_upload(path) as upload:
        assert detect_source(upload) is ADAPTERS[0]
    with pytest.raises(TranscriptError) as info:
        engine.load_session(path)
    assert str(info.value).startswith("not a Claude Code transcript: none of the lines")


def test_the_head_is_read_quietly_within_its_bounds(tmp_path):
    path = tmp_path / "s.jsonl.gz"
    lines = ["not json", "", *(json.dumps({"type": "user", "n": n}) for n in range(HEAD_LINES + 5))]
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    with open_upload(path) as upload:
        assert upload.main is not None
        head = read_head(upload.main, HEAD_LINES)
        records = head_records(upload)
        assert upload.problems == []
    assert len(head) == HEAD_LINES  # blank lines are not lines of the head
    assert records == [{"type": "user", "n": n} for n in range(HEAD_LINES - 1)]


def test_an_upload_of_subagents_only_is_recognised_by_its_first_subagent(tmp_path):
    folder = tmp_path / "session" / "subagents"
    folder.mkdir(parents=True)
    claude_code_file(folder / "agent-a1.jsonl")
    with open_upload(tmp_path / "session") as upload:
        assert upload.main is None
        assert head_records(upload)
        assert detect_source(upload, (OtherAgent(), CLAUDE_CODE)) is CLAUDE_CODE


def test_the_protocol_is_what_adapters_satisfy():
    adapter: SourceAdapter = OtherAgent()  # type-checked against the interface
    assert adapter.detect([{"kind": "turn"}]) == 1.0
