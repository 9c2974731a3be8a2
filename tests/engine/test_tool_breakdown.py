"""The tools breakdown and the diff of two requests' model views, checked against the
explorer's own row-by-row view of each request (an independent path through the result)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.results.tools import tool_names
from tests.conftest import corpus_file
from tests.engine.invariants import auto_config

SESSIONS = ["marot__spotter__tool_heavy.jsonl", "marot__spotter__short.jsonl"]


def _replayed(path: Path, mode: str = "recorded") -> tuple[dict[str, Any], dict[str, Any]]:
    session = engine.load_session(str(path))
    config, preset = auto_config(session)
    data = engine.replay(session, config, mode=mode, preset_name=preset).to_json()
    return data, engine.expand_messages(engine.messages_json(session))


def _rows(data: dict[str, Any], messages: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """The explorer's rows of a request, each with its display tokens."""
    req = data["requests"][index]
    thread = messages[req["thread"]]
    view = engine.side_by_side(thread, data, index)
    fit = data["session"]["calibration"]
    parts = engine.compose(
        view["rows"],
        thread,
        model_tokens=req["model_tokens"],
        prefix_tokens=fit["prefix_tokens"],
        ratio=fit["ratio"],
    )
    for row, tokens in zip(view["rows"], parts["row_tokens"], strict=True):
        row["tokens"] = tokens
    return view["rows"]


@pytest.mark.parametrize("name", SESSIONS)
def test_calls_errors_and_history_match_the_transcript(name: str) -> None:
    data, messages = _replayed(corpus_file(name))
    breakdown = engine.tool_breakdown(data, messages)
    blocks = [b for m in messages["main"] for b in m["blocks"]]
    names = tool_names(messages["main"])
    calls = Counter(n for b, n in zip(blocks, names, strict=True) if b["type"] == "tool_use")
    errors = Counter(
        n
        for b, n in zip(blocks, names, strict=True)
        if b["type"] == "tool_result" and b.get("is_error")
    )
    assert calls, "the session calls tools"
    by_tool = {t["tool"]: t for t in breakdown["tools"]}
    assert {t: r["calls"] for t, r in by_tool.items() if r["calls"]} == dict(calls)
    assert {t: r["errors"] for t, r in by_tool.items() if r["errors"]} == dict(errors)
    # every result belongs to a call the session made
    assert all(
        n is not None for b, n in zip(blocks, names, strict=True) if b["type"] == "tool_result"
    )
    assert breakdown["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in data["requests"]))
    attributed = sum(t["cost_usd"] for t in breakdown["tools"])
    assert attributed <= breakdown["cost_usd"]
    # a share of the cost exactly when a tool's blocks were sent
    assert (attributed > 0) == any(t["sent_tokens"] for t in breakdown["tools"])
    assert "estimate" in breakdown["attribution"]


@pytest.mark.parametrize("name", SESSIONS)
def test_what_the_model_saw_matches_the_explorer_rows(name: str) -> None:
    data, messages = _replayed(corpus_file(name))
    breakdown = engine.tool_breakdown(data, messages)
    last = len(data["requests"]) - 1
    rows = _rows(data, messages, last)
    names = dict(
        zip(
            [(m["index"], j) for m in messages["main"] for j in range(len(m["blocks"]))],
            tool_names(messages["main"]),
            strict=True,
        )
    )
    seen: Counter[str] = Counter()
    for row in rows:
        tool = names.get((row["message"], row["block"])) if row["message"] is not None else None
        if tool and row["model"] is not None:
            seen[tool] += row["tokens"]["model"]
    for tool in breakdown["tools"]:
        # rounding: one display token per block at most
        assert abs(tool["seen_tokens"] - seen[tool["tool"]]) <= tool["calls"] * 2 + 1, tool
    # requests that call a tool: their response holds a call of it
    for tool in breakdown["tools"]:
        for index in tool["requests"]:
            req = data["requests"][index]
            response = messages["main"][req["message"]]
            assert response["role"] == "assistant"


def test_a_persisted_result_is_seen_as_its_preview() -> None:
    data, messages = _replayed(
        Path(__file__).parent.parent / "fixtures" / "persisted_preview.jsonl"
    )
    breakdown = engine.tool_breakdown(data, messages)
    assert any(t["sent_tokens"] for t in breakdown["tools"])
    for tool in breakdown["tools"]:
        assert tool["seen_tokens"] <= tool["history_tokens"] or tool["calls"] == 0


def test_view_diff_of_a_request_with_itself_and_with_the_next() -> None:
    data, messages = _replayed(corpus_file("marot__spotter__tool_heavy.jsonl"))
    first, second = _rows(data, messages, 0), _rows(data, messages, 1)
    same = engine.view_diff(first, first)
    assert same["added"]["count"] == same["removed"]["count"] == same["changed"]["count"] == 0
    assert same["delta"] == 0
    diff = engine.view_diff(first, second)
    assert diff["added"]["count"] > 0
    sent_a = sum(r["tokens"]["model"] or 0 for r in first if r["model"] is not None)
    sent_b = sum(r["tokens"]["model"] or 0 for r in second if r["model"] is not None)
    assert diff["delta"] == sent_b - sent_a
    back = engine.view_diff(second, first)
    assert back["removed"]["count"] == diff["added"]["count"]
    assert back["delta"] == -diff["delta"]


def _cleared_replay() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A real session replayed as recorded, and as a what-if whose microcompact clears every
    old tool result at once (no idle gap needed, one result kept)."""
    path = Path(__file__).parent.parent / "fixtures" / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl"
    session = engine.load_session(str(path))
    config, preset = auto_config(session)
    recorded = engine.replay(session, config, mode="recorded", preset_name=preset).to_json()
    clearing = config.replace(
        time_based_mc_enabled=True,
        time_based_mc_gap_threshold_minutes=0,
        time_based_mc_keep_recent=1,
    )
    whatif = engine.replay(session, clearing, mode="whatif", preset_name=preset).to_json()
    return recorded, whatif, engine.expand_messages(engine.messages_json(session))


def test_cleared_results_count_as_cleared_and_show_as_changed() -> None:
    recorded, whatif, messages = _cleared_replay()
    cleared = [t for t in whatif["views"]["transforms"] if t["kind"] == "cleared"]
    assert cleared, "the what-if clears tool results"
    before = {t["tool"]: t for t in engine.tool_breakdown(recorded, messages)["tools"]}
    after = {t["tool"]: t for t in engine.tool_breakdown(whatif, messages)["tools"]}
    # the same calls, errors and history; less of it sent once cleared
    assert {k: (v["calls"], v["errors"]) for k, v in before.items()} == {
        k: (v["calls"], v["errors"]) for k, v in after.items()
    }
    assert sum(t["sent_tokens"] for t in after.values()) < sum(
        t["sent_tokens"] for t in before.values()
    )
    # the request where a block was first cleared against the one before it: that block is
    # "changed", from sent whole to cleared, and its tokens go down
    first = min(cleared, key=lambda t: t["first"])
    index = next(
        r["index"]
        for r in whatif["requests"]
        if r["thread"] == first["thread"] and r["thread_request"] == first["first"]
    )
    diff = engine.view_diff(_rows(whatif, messages, index - 1), _rows(whatif, messages, index))
    changed = [i for i in diff["changed"]["items"] if i["after"] == "cleared"]
    assert changed, diff["changed"]
    assert all(i["before"] == "intact" and i["delta"] < 0 for i in changed)
    assert all(i["label"].startswith("tool result") for i in changed)


CODEX = Path(__file__).parent.parent / "fixtures" / "codex"


@pytest.mark.parametrize("name", sorted(p.name for p in CODEX.glob("*.jsonl")))
def test_codex_function_calls_are_tools(name: str) -> None:
    """A Codex rollout's function calls count as tool calls, their outputs as their results
    (named through the call id), whatever the rollout's version."""
    path = CODEX / name
    data, messages = _replayed(path)
    breakdown = engine.tool_breakdown(data, messages)
    # function calls, the custom tool calls (apply_patch) of later versions, and the calls of
    # tools Codex or the server runs (shell, web and tool search, image generation)
    kinds = (
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "tool_search_call",
        "image_generation_call",
    )
    recorded_calls = sum(
        1
        for line in path.read_text().splitlines()
        for kind in kinds
        if f'"type":"{kind}"' in line.replace(" ", "")
    )
    assert sum(t["calls"] for t in breakdown["tools"]) == recorded_calls > 0
    names = tool_names(messages["main"])
    blocks = [b for m in messages["main"] for b in m["blocks"]]
    assert all(n for b, n in zip(blocks, names, strict=True) if b["type"] == "tool_result")
    assert all(t["history_tokens"] > 0 for t in breakdown["tools"])


def test_a_codex_output_its_compaction_replaced_is_not_seen_at_the_end() -> None:
    """A long shell output the rollout's compaction replaced: the history holds it whole, the
    model saw only what came after the compaction at the last request."""
    data, messages = _replayed(CODEX / "v0_46_local_compaction_cut.jsonl")
    shell = next(t for t in engine.tool_breakdown(data, messages)["tools"] if t["tool"] == "shell")
    assert data["summary"]["compactions"] >= 1
    assert 0 < shell["seen_tokens"] < shell["history_tokens"]
    assert shell["sent_tokens"] < shell["history_tokens"]
