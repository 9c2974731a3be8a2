"""One test per pipeline rule, on tiny hand-written transcripts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.input.jsutil import format_file_size, js_round
from contextlab.engine.pipeline.budget import select_replacements
from contextlab.engine.pipeline.microcompact import CLEARED_PLACEHOLDER
from contextlab.engine.pipeline.persistence import (
    build_wrapper,
    generate_preview,
    persistence_threshold,
)
from tests.engine.builders import TranscriptBuilder

BASE = engine.get_preset("claude-code-2.1.88")


def run(
    tmp_path: Path, b: TranscriptBuilder, mode: str = "recorded", **changes: Any
) -> dict[str, Any]:
    session = engine.load_session(str(b.write(tmp_path / "t.jsonl")))
    config = BASE.replace(**changes) if changes else BASE
    return engine.replay(session, config, mode=mode, preset_name="test").to_json()


def events(result: dict[str, Any], step: str) -> list[tuple[int, dict[str, Any]]]:
    return [(r["index"], e) for r in result["requests"] for e in r["events"] if e["step"] == step]


# ------------------------------------------------------------------ persistence (spec §4.1, §4.2.6)


def test_preview_cuts_at_last_newline_only_past_half():
    late = "a" * 1500 + "\n" + "b" * 1000
    assert generate_preview(late) == ("a" * 1500, True)
    early = "a" * 900 + "\n" + "b" * 2000
    preview, more = generate_preview(early)
    assert more
    assert len(preview) == 2000
    assert preview.startswith("a" * 900 + "\n")


def test_preview_of_short_content_is_whole_and_has_no_ellipsis():
    assert generate_preview("short") == ("short", False)
    wrapper = build_wrapper("x" * 10, "/p/tool-results/t.txt")
    assert wrapper.endswith("xxxxxxxxxx\n</persisted-output>")


def test_wrapper_text_is_exact():
    content = "line\n" * 1000
    wrapper = build_wrapper(content, "/home/u/.claude/projects/p/s/tool-results/toolu_1.txt")
    preview, _ = generate_preview(content)
    assert wrapper == (
        "<persisted-output>\nOutput too large (4.9KB). Full output saved to: "
        "/home/u/.claude/projects/p/s/tool-results/toolu_1.txt\n\n"
        f"Preview (first 2KB):\n{preview}\n...\n</persisted-output>"
    )


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (812, "812 bytes"),
        (1024, "1KB"),
        (2000, "2KB"),
        (1280, "1.3KB"),
        (50000, "48.8KB"),
        (1258291, "1.2MB"),
    ],
)
def test_format_file_size_matches_javascript(size, text):
    assert format_file_size(size) == text


def test_per_tool_thresholds():
    assert persistence_threshold("Bash", BASE) == 30_000
    assert persistence_threshold("Grep", BASE) == 20_000
    assert persistence_threshold("Read", BASE) == float("inf")
    assert persistence_threshold("WebFetch", BASE) == 50_000
    assert persistence_threshold("mcp__x__y", BASE) == 50_000
    overridden = BASE.replace(per_tool_threshold_overrides={"Bash": 80_000})
    assert persistence_threshold("Bash", overridden) == 80_000


def bash_session(size: int) -> TranscriptBuilder:
    b = TranscriptBuilder()
    b.prompt("run it")
    b.tool_call("Bash", {"command": "make"}, "y" * size)
    b.assistant([{"type": "text", "text": "done"}])
    return b


def test_whatif_persists_bash_output_strictly_above_threshold(tmp_path):
    over = run(tmp_path, bash_session(30_001), "whatif")
    assert [e["tool"] for _, e in events(over, "persistence")] == ["Bash"]
    at = run(tmp_path, bash_session(30_000), "whatif")
    assert events(at, "persistence") == []


def test_persisted_view_is_smaller_than_the_original(tmp_path):
    result = run(tmp_path, bash_session(100_000), "whatif")
    last = result["requests"][-1]
    assert last["raw_tokens"] < 2_000
    transform = next(t for t in result["views"]["transforms"] if t["kind"] == "persisted")
    assert transform["text"].startswith("<persisted-output>\nOutput too large (97.7KB)")


# ------------------------------------------------------------------ budget (spec §4.2)


def test_budget_selects_largest_fresh_until_under_limit():
    from contextlab.engine.pipeline.budget import Candidate

    cands = [Candidate(0, i, f"t{i}", "Bash", size, "") for i, size in enumerate([90, 150, 60])]
    chosen = select_replacements(cands, frozen_size=0, limit=200)
    assert [c.size for c in chosen] == [150]


def test_budget_accepts_frozen_overage():
    from contextlab.engine.pipeline.budget import Candidate

    cands = [Candidate(0, 0, "t", "Bash", 10, "")]
    assert [c.size for c in select_replacements(cands, frozen_size=500, limit=200)] == [10]


def parallel_results(b: TranscriptBuilder, sizes: list[int], tool: str = "Grep") -> None:
    blocks = [
        {"type": "tool_use", "id": f"toolu_{n}_{len(b.records)}", "name": tool, "input": {"n": n}}
        for n in range(len(sizes))
    ]
    recs = b.assistant(blocks)
    for block, rec, size in zip(blocks, recs, sizes, strict=True):
        b.tool_result(block["id"], "z" * size, parent=rec["uuid"])


def test_budget_replaces_fresh_results_of_one_message_and_freezes_the_rest(tmp_path):
    b = TranscriptBuilder()
    b.prompt("search")
    parallel_results(b, [15_000, 14_000, 13_000])
    b.assistant([{"type": "text", "text": "ok"}])
    result = run(
        tmp_path, b, "whatif", per_message_budget_enabled=True, per_message_budget_chars=30_000
    )
    replaced = [e["original_chars"] for _, e in events(result, "budget")]
    assert replaced == [15_000]  # 42k → 27k after replacing the largest


def test_budget_decisions_are_sticky_across_turns(tmp_path):
    b = TranscriptBuilder()
    b.prompt("search")
    parallel_results(b, [15_000, 14_000, 13_000])
    b.assistant([{"type": "text", "text": "ok"}])
    b.prompt("again")
    b.assistant([{"type": "text", "text": "fine"}])
    result = run(
        tmp_path, b, "whatif", per_message_budget_enabled=True, per_message_budget_chars=30_000
    )
    budget = [t for t in result["views"]["transforms"] if t["step"] == "budget"]
    assert len(budget) == 1
    assert budget[0]["last"] is None  # re-applied on every later request


def test_budget_off_by_default(tmp_path):
    b = TranscriptBuilder()
    b.prompt("search")
    parallel_results(b, [150_000, 140_000])
    b.assistant([{"type": "text", "text": "ok"}])
    assert events(run(tmp_path, b, "whatif"), "budget") == []


def test_recorded_content_replacements_are_applied_verbatim(tmp_path):
    b = TranscriptBuilder()
    b.prompt("go")
    tid = b.tool_call("Grep", {"pattern": "x"}, "q" * 5000)
    b.assistant([{"type": "text", "text": "ok"}])
    b.records.append(
        {
            "type": "content-replacement",
            "sessionId": b.session_id,
            "replacements": [
                {
                    "kind": "tool-result",
                    "toolUseId": tid,
                    "replacement": "<persisted-output>\nshort\n</persisted-output>",
                }
            ],
        }
    )
    result = run(tmp_path, b, "recorded")
    transform = next(t for t in result["views"]["transforms"] if t["step"] == "budget")
    assert transform["text"] == "<persisted-output>\nshort\n</persisted-output>"


# ------------------------------------------------------------------ microcompact (spec §4.4)


def tool_heavy_turns(gap_seconds: float, results: int = 8) -> TranscriptBuilder:
    b = TranscriptBuilder()
    b.prompt("read things")
    for n in range(results):
        b.tool_call("Read", {"file_path": f"/f{n}"}, f"content {n} " * 200)
    b.assistant([{"type": "text", "text": "read all"}])
    b.prompt("next question", seconds=gap_seconds)
    b.assistant([{"type": "text", "text": "answer"}])
    b.prompt("third", seconds=5)
    b.assistant([{"type": "text", "text": "answer 3"}])
    return b


def test_time_based_microcompact_clears_all_but_the_last_five_after_an_hour(tmp_path):
    result = run(tmp_path, tool_heavy_turns(3600), "whatif", time_based_mc_enabled=True)
    ((_index, event),) = events(result, "microcompact")
    assert event["cleared"] == 3
    assert event["kept"] == 5
    cleared = [t for t in result["views"]["transforms"] if t["kind"] == "cleared"]
    assert all(t["text"] == CLEARED_PLACEHOLDER for t in cleared)


def test_time_based_microcompact_does_not_fire_below_the_gap(tmp_path):
    result = run(tmp_path, tool_heavy_turns(59 * 60), "whatif", time_based_mc_enabled=True)
    assert events(result, "microcompact") == []


def test_time_based_clearing_vanishes_at_the_next_user_prompt(tmp_path):
    result = run(tmp_path, tool_heavy_turns(3600), "whatif", time_based_mc_enabled=True)
    ((index, _event),) = events(result, "microcompact")
    cleared = [t for t in result["views"]["transforms"] if t["kind"] == "cleared"]
    assert {t["last"] for t in cleared} == {index}  # gone from the next query on
    assert result["requests"][index + 1]["raw_tokens"] > result["requests"][index]["raw_tokens"]


def test_keep_recent_is_never_below_one(tmp_path):
    result = run(
        tmp_path,
        tool_heavy_turns(7200),
        "whatif",
        time_based_mc_enabled=True,
        time_based_mc_keep_recent=0,
    )
    ((_, event),) = events(result, "microcompact")
    assert event["kept"] == 1
    assert event["cleared"] == 7


def test_recorded_microcompact_boundary_clears_listed_results(tmp_path):
    b = TranscriptBuilder(version="2.1.20")
    b.prompt("read")
    ids = [b.tool_call("Read", {"file_path": f"/f{n}"}, "body " * 500) for n in range(3)]
    b.system(
        "microcompact_boundary",
        content="Context microcompacted",
        microcompactMetadata={
            "trigger": "auto",
            "preTokens": 50000,
            "tokensSaved": 1200,
            "compactedToolIds": ids[:2],
            "clearedAttachmentUUIDs": [],
        },
    )
    b.assistant([{"type": "text", "text": "continuing"}])
    result = run(tmp_path, b, "recorded")
    ((_, event),) = events(result, "microcompact")
    assert event["recorded"] is True
    assert event["cleared"] == 2


# ------------------------------------------------------------------ autocompact (spec §4.6)


def long_session(turns: int, result_chars: int = 12000) -> TranscriptBuilder:
    b = TranscriptBuilder()
    for n in range(turns):
        b.prompt(f"step {n}")
        b.tool_call(
            "Read",
            {"file_path": f"/src/file{n}.py"},
            "code line\n" * (result_chars // 10),
            grow=result_chars // 3,
        )
        b.assistant([{"type": "text", "text": f"done {n}"}], grow=50)
    return b


SMALL_WINDOW = {"context_window": 100_000}  # effective 80,000; autocompact at 67,000


def test_decision_count_is_last_usage_plus_rough_estimate_of_later_messages(tmp_path):
    b = TranscriptBuilder()
    b.prompt("hi")
    b.assistant(
        [{"type": "text", "text": "hello"}],
        usage={
            "input_tokens": 10,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 1000,
            "output_tokens": 5,
        },
    )
    b.prompt("x" * 4002)
    b.assistant([{"type": "text", "text": "ok"}])
    result = run(tmp_path, b)
    assert result["requests"][1]["decision_tokens"] == 1115 + js_round(4002 / 4)


def test_whatif_autocompact_fires_at_the_threshold_and_replaces_history(tmp_path):
    result = run(tmp_path, long_session(30), "whatif", **SMALL_WINDOW)
    compactions = events(result, "autocompact")
    assert compactions, "expected at least one compaction"
    index, event = compactions[0]
    assert event["action"] == "compacted"
    assert event["decision_tokens"] >= event["threshold"] == 67_000
    before = result["requests"][index - 1]
    after = result["requests"][index]
    assert before["decision_tokens"] < 67_000
    assert after["raw_tokens"] < before["raw_tokens"]
    assert after["view"]["start"] == after["view"]["end"]  # nothing kept: a full compaction
    summary = next(s for s in result["views"]["synthetic"] if s["id"] == event["summary"])
    assert summary["backend"] == "extractive"
    assert summary["text"].startswith("This session is being continued")


def test_pct_override_lowers_the_compaction_point(tmp_path):
    default = events(run(tmp_path, long_session(30), "whatif", **SMALL_WINDOW), "autocompact")
    lowered = events(
        run(tmp_path, long_session(30), "whatif", autocompact_pct_override=40, **SMALL_WINDOW),
        "autocompact",
    )
    assert lowered[0][0] < default[0][0]


def test_autocompact_disabled_leads_to_blocking(tmp_path):
    result = run(tmp_path, long_session(40), "whatif", autocompact_enabled=False, **SMALL_WINDOW)
    assert events(result, "autocompact") == []
    blocked = events(result, "blocking")
    assert blocked
    assert blocked[0][1]["limit"] == 77_000


class FailingSummarizer:
    name = "failing"

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, request: engine.SummaryRequest) -> engine.SummaryResult:
        self.calls += 1
        raise RuntimeError("backend unavailable")


def test_circuit_breaker_stops_after_three_failures_in_one_turn(tmp_path):
    b = TranscriptBuilder()
    b.prompt("big task")
    for n in range(30):
        b.tool_call("Read", {"file_path": f"/f{n}"}, "data line\n" * 1200, grow=4000)
    session = engine.load_session(str(b.write(tmp_path / "cb.jsonl")))
    failing = FailingSummarizer()
    result = engine.replay(
        session, BASE.replace(**SMALL_WINDOW), mode="whatif", summarizer=failing
    ).to_json()
    failures = [e for _, e in events(result, "autocompact") if e["action"] == "failed"]
    assert failing.calls == 3
    assert [e["failures"] for e in failures] == [1, 2, 3]


def test_recorded_summary_is_reused_when_compaction_lands_on_it(tmp_path):
    b = long_session(12)
    b.compact(
        "This session is being continued from a previous conversation. Summary: recorded one",
        pre_tokens=30000,
    )
    b.prompt("after")
    b.assistant([{"type": "text", "text": "ok"}])
    session = engine.load_session(str(b.write(tmp_path / "r.jsonl")))
    recorded = engine.replay(session, BASE.replace(**SMALL_WINDOW), mode="recorded").to_json()
    ((_index, rec_event),) = events(recorded, "autocompact")
    assert rec_event["recorded"] is True
    assert rec_event["pre_tokens"] == 30000


def test_session_memory_compaction_keeps_a_tail_with_tool_pairs(tmp_path):
    result = run(tmp_path, long_session(30), "whatif", sm_compact_enabled=True, **SMALL_WINDOW)
    event = next(e for _, e in events(result, "autocompact") if e["action"] == "compacted")
    assert event["variant"] == "session_memory"
    assert event["kept_messages"] > 0
    request = next(
        r
        for r in result["requests"]
        if (r["events"] and r["events"][0] is event) or event in r["events"]
    )
    start = request["view"]["start"]
    session = engine.load_session(str(tmp_path / "t.jsonl"))
    kept = session.main.messages[start : request["view"]["end"]]
    uses = {blk.tool_use_id for m in kept for blk in m.blocks if blk.type == "tool_use"}
    results = {blk.tool_use_id for m in kept for blk in m.blocks if blk.type == "tool_result"}
    assert results <= uses  # no tool_result without its tool_use


# ------------------------------------------------------------------ modeled steps


def test_snip_is_modeled_and_off_by_default(tmp_path):
    assert events(run(tmp_path, long_session(30), "whatif", **SMALL_WINDOW), "snip") == []
    result = run(tmp_path, long_session(30), "whatif", snip_enabled=True, **SMALL_WINDOW)
    snips = events(result, "snip")
    assert snips
    assert all(e["modeled"] for _, e in snips)
    assert "snip" in result["session"]["modeled_steps"]


def test_collapse_is_modeled_and_suppresses_autocompact(tmp_path):
    result = run(tmp_path, long_session(30), "whatif", collapse_enabled=True, **SMALL_WINDOW)
    assert events(result, "autocompact") == []
    collapses = events(result, "collapse")
    assert collapses
    assert all(e["modeled"] for _, e in collapses)
    placeholder = next(
        t for t in result["views"]["transforms"] if t["kind"] == "collapsed" and "text" in t
    )
    assert placeholder["text"].startswith('<collapsed id="')


# ------------------------------------------------------------------ results, cache, views


REQUIRED = {
    "index",
    "message_id",
    "timestamp",
    "model",
    "raw_tokens",
    "model_tokens",
    "repl_tokens",
    "decision_tokens",
    "recorded",
    "cache",
    "cache_estimate",
    "cache_read_gap",
    "cache_disagrees",
    "cost_usd",
    "cost_estimate_usd",
    "events",
}


def test_request_json_has_the_documented_fields_and_cache_adds_up(tmp_path):
    result = run(tmp_path, long_session(5))
    for request in result["requests"]:
        assert request.keys() >= REQUIRED
        # the estimate splits the replayed prompt; the recorded cache is the recorded prompt
        cache = request["cache_estimate"]
        assert cache["read"] + cache["write"] + cache["uncached"] == request["model_tokens"]
        assert cache["write_5m"] + cache["write_1h"] == cache["write"]
        assert set(request["recorded"]) >= {"input", "cache_read", "cache_write", "output"}
        recorded = request["cache"]
        assert recorded["source"] == "recorded"
        assert recorded.keys() == cache.keys()
        assert (
            recorded["read"] + recorded["write"] + recorded["uncached"]
            == (request["recorded_total"])
        )


def test_steady_growth_reads_the_previous_prompt(tmp_path):
    result = run(tmp_path, long_session(5))
    later = result["requests"][3]
    assert later["cache"]["reason"] == "hit"
    assert later["cache"]["read"] >= result["requests"][2]["model_tokens"] * 0.9


def test_side_by_side_rebuilds_a_compacted_view_without_replaying(tmp_path):
    b = long_session(12)
    session = engine.load_session(str(b.write(tmp_path / "v.jsonl")))
    result = engine.replay(session, BASE.replace(**SMALL_WINDOW), mode="whatif").to_json()
    messages = engine.messages_json(session)["main"]
    index, _ = events(result, "autocompact")[0]
    view = engine.side_by_side(messages, result, index + 2)  # two requests after the compaction
    badges = {row["badge"] for row in view["rows"]}
    assert "summarized" in badges
    assert "intact" in badges
    summary_rows = [r for r in view["rows"] if r.get("synthetic", {}).get("kind") == "summary"]
    assert len(summary_rows) == 1
    dropped = [r for r in view["rows"] if r["badge"] == "summarized" and r["model"] is None]
    assert dropped
    assert all(r["repl"] is not None for r in dropped)


def test_replay_is_deterministic(tmp_path):
    first = run(tmp_path, long_session(8), "whatif", **SMALL_WINDOW)
    second = run(tmp_path, long_session(8), "whatif", **SMALL_WINDOW)
    assert first == second


def test_side_by_side_marks_each_sent_block_read_or_written(tmp_path):
    session = engine.load_session(str(long_session(5).write(tmp_path / "c.jsonl")))
    result = engine.replay(session, BASE).to_json()
    messages = engine.messages_json(session)["main"]
    later = result["requests"][3]
    rows = [r for r in engine.side_by_side(messages, result, 3)["rows"] if r["model"] is not None]
    statuses = [r["cache"] for r in rows]
    hit = later["cache"]["hit_blocks"] - 2
    assert statuses[:hit] == ["read"] * hit
    assert set(statuses[hit:]) == {"write"}


class _GrowLastPrompt:
    """A step after the blocking check that makes the view's last prompt longer."""

    name = "grow"
    modeled = False

    def apply(self, ctx: Any) -> None:
        view = ctx.view
        i = ctx.request.position - 1
        if view.messages[i].role == "user" and (i, 0) not in view.overrides:
            text = "y" * 8000
            view.set_override(i, 0, view.make_override("test", self.name, text, ctx.k))


def test_a_rows_decision_count_is_the_blocking_checks_only_when_no_step_applied_after_it(
    tmp_path,
):
    b = TranscriptBuilder()
    b.prompt("hi")
    b.assistant(
        [{"type": "text", "text": "hello"}],
        usage={"input_tokens": 10, "cache_read_input_tokens": 1000, "output_tokens": 5},
    )
    b.prompt("x" * 4002)
    b.assistant([{"type": "text", "text": "ok"}])
    session = engine.load_session(str(b.write(tmp_path / "t.jsonl")))
    plain = engine.replay(session, BASE, preset_name="test").to_json()
    assert plain["requests"][1]["decision_tokens"] == 1015 + js_round(4002 / 4)
    session = engine.load_session(str(b.write(tmp_path / "t.jsonl")))
    steps = (*engine.pipeline.DEFAULT_STEPS, _GrowLastPrompt())
    grown = engine.replay(session, BASE, preset_name="test", steps=steps).to_json()
    # the last step changed the view after the blocking check counted it: counted again
    assert grown["requests"][1]["decision_tokens"] == 1015 + js_round(8000 / 4)
