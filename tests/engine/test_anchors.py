"""What a transcript does not show, anchored on its recorded usage (issue #9).

Every test builds a small transcript here: the conversation first, then its usage written from
the replay's own view sizes (``prefix + ratio * raw``) plus the phenomenon under test (history
from before the file, a restart's rebuilt system prompt, input no record shows), so the anchors
must find exactly what was put in. None needs the corpus.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.config.presets import ran_with_1m_window, thread_window
from contextlab.engine.config.resolve import resolve_config
from contextlab.engine.measures.anchors import ThreadAnchors
from contextlab.engine.measures.cost import load_pricing, request_cost
from tests.conftest import HAVE_CORPUS, corpus_files
from tests.engine.builders import TranscriptBuilder

PREFIX = 18_000
RATIO = 1.3
#: usage writer: (request index, raw tokens of its view, raw of the request before) → prompt
TotalFor = Callable[[int, int], int]


def conversation(
    turns: int,
    *,
    exit_after: int | None = None,
    new_version: str = "",
    mcp_reconnect_after: int | None = None,
    resume_after: int | None = None,
) -> TranscriptBuilder:
    b = TranscriptBuilder()
    for n in range(turns):
        if n == resume_after:
            # `claude --resume` in the same file, no /exit written: the SessionStart hook's
            # progress record, which the next prompt hangs from (2.1.52)
            b.add(
                b.envelope(
                    "progress",
                    b.last_uuid,
                    data={
                        "type": "hook_progress",
                        "hookEvent": "SessionStart",
                        "hookName": "SessionStart:resume",
                    },
                )
            )
        if n == mcp_reconnect_after:
            # /mcp as Claude Code 2.1.38 writes it: the command, then its output
            b.prompt("<command-name>/mcp</command-name>\n<command-message>mcp</command-message>")
            b.prompt("<local-command-stdout>Reconnected to tidewave.</local-command-stdout>")
        if exit_after is not None and n == exit_after:
            b.prompt(
                "<command-name>/exit</command-name>\n<command-message>exit</command-message>\n"
                "<command-args></command-args>"
            )
            if new_version:
                b.version = new_version
        b.prompt(f"step {n}: look at module {n} and tell me what it does")
        b.tool_call(
            "Read",
            {"file_path": f"/src/module{n}.py"},
            "".join(f"def function_{n}_{i}(value):\n    return value * {i}\n" for i in range(150)),
        )
        b.assistant([{"type": "text", "text": f"module {n} multiplies values " * 20}])
    return b


def plain_replay(path: Path) -> engine.ReplayResult:
    session = engine.load_session(str(path))
    config = engine.get_preset("claude-code-2.1.88").replace(anchors_enabled=False)
    return engine.replay(session, config, mode="recorded")


def with_usage(
    b: TranscriptBuilder, tmp_path: Path, total_for: TotalFor, *, cold_start: bool = False
) -> Path:
    """Rewrite every response's usage so its prompt is ``total_for(k, raw_k)``; the cache reads
    all but the last 403 tokens, from the first request on unless ``cold_start`` (the first
    request then finds nothing cached and writes its whole prompt)."""
    path = b.write(tmp_path / "draft.jsonl")
    rows = plain_replay(path).to_json()["requests"]
    totals = {r["message_id"]: total_for(r["thread_request"], r["raw_tokens"]) for r in rows}
    first = rows[0]["message_id"] if rows else None
    for rec in b.records:
        message = rec.get("message") or {}
        if rec["type"] == "assistant" and message.get("id") in totals:
            total = totals[message["id"]]
            read = 0 if cold_start and message["id"] == first else total - 403
            message["usage"] = {
                "input_tokens": 3,
                "cache_creation_input_tokens": total - 3 - read,
                "cache_read_input_tokens": read,
                "output_tokens": 40,
            }
    return b.write(tmp_path / "session.jsonl")


def replayed(path: Path, mode: str = "recorded") -> dict[str, Any]:
    session = engine.load_session(str(path))
    return engine.replay(session, engine.get_preset("claude-code-2.1.88"), mode=mode).to_json()


def anchors_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    return result["session"]["threads"][0]["anchors"]


def test_a_plain_session_needs_no_anchor(tmp_path):
    path = with_usage(conversation(8), tmp_path, lambda k, raw: round(PREFIX + RATIO * raw))
    result = replayed(path)
    assert anchors_of(result) == []
    assert all(r["unrecorded_tokens"] == 0 and r["segment"] == 0 for r in result["requests"])
    assert result["session"]["threads"][0]["segments"] == 1


def test_a_file_that_continues_another_carries_its_earlier_history(tmp_path):
    hidden = 120_000
    b = conversation(6)
    compact_at = len(b.records)
    b.compact("<summary>the earlier work, summarized</summary>", pre_tokens=170_000)
    for n in range(3):
        b.prompt(f"after the compaction {n}")
        b.assistant([{"type": "text", "text": f"continuing {n} " * 30}])
    b.records[0]["parentUuid"] = "aaaaaaaa-0000-4000-8000-000000000000"  # not in the file
    rows_before = {
        r["message_id"]
        for r in plain_replay(b.write(tmp_path / "probe.jsonl")).to_json()["requests"]
        if r["line"] <= compact_at
    }
    first_after = len(rows_before)

    def total(k: int, raw: int) -> int:
        return round(PREFIX + RATIO * raw + (hidden if k < first_after else 0))

    result = replayed(with_usage(b, tmp_path, total))
    session = engine.load_session(str(tmp_path / "session.jsonl"))
    assert session.main.starts_outside
    history = [a for a in anchors_of(result) if a["kind"] == "earlier_history"]
    assert len(history) == 1
    assert history[0]["point"] == "file_start"
    # sized from the usage minus the system/tools level, which the compaction measures
    assert abs(history[0]["tokens"] - hidden) < 0.02 * hidden
    rows = result["requests"]
    # the span is part of the view until the compaction removes it
    plain_rows = plain_replay(tmp_path / "session.jsonl").to_json()["requests"]
    assert rows[0]["raw_tokens"] > plain_rows[0]["raw_tokens"] + hidden / 2
    assert rows[first_after]["raw_tokens"] == plain_rows[first_after]["raw_tokens"]
    fid = engine.fidelity(engine.replay(session, engine.get_preset("claude-code-2.1.88")))
    assert fid["p90_rel_error"] is not None
    assert fid["p90_rel_error"] < 0.02
    event = next(e for e in rows[0]["events"] if e["step"] == "anchor")
    assert event["action"] == "earlier_history"
    # the explorer shows the span, sized from the usage, until the compaction removes it
    assert rows[0]["earlier_history_tokens"] == pytest.approx(hidden, rel=0.03)
    assert rows[first_after]["earlier_history_tokens"] == 0
    messages = engine.messages_json(session)["main"]
    first_view = engine.side_by_side(messages, result, rows[0]["index"])["rows"]
    assert first_view[0]["kind"] == "earlier_history"
    assert first_view[0]["badge"] == "anchored"
    assert first_view[0]["repl"] is None
    after_view = engine.side_by_side(messages, result, rows[first_after]["index"])["rows"]
    assert all(r["kind"] != "earlier_history" for r in after_view)


def test_a_restart_starts_a_segment_with_its_own_prefix(tmp_path):
    b = conversation(10, exit_after=5, new_version="2.1.40")
    probe = plain_replay(b.write(tmp_path / "probe.jsonl")).to_json()["requests"]
    restart = next(r["thread_request"] for r in probe if r["line"] > _exit_line(b))
    jump = 12_000

    def total(k: int, raw: int) -> int:
        return round(PREFIX + RATIO * raw + (jump if k >= restart else 0))

    result = replayed(with_usage(b, tmp_path, total))
    rows = result["requests"]
    assert [r["segment"] for r in rows] == [0] * restart + [1] * (len(rows) - restart)
    assert result["session"]["threads"][0]["segments"] == 2
    (anchor,) = anchors_of(result)
    assert (anchor["kind"], anchor["point"], anchor["request"]) == ("segment", "restart", restart)
    assert abs(anchor["tokens"] - jump) < 1_500
    assert "/exit" in anchor["reason"]
    # the rebuilt prefix is part of the view, not unrecorded input
    assert all(r["unrecorded_tokens"] == 0 for r in rows)
    fid = engine.fidelity(
        engine.replay(
            engine.load_session(str(tmp_path / "session.jsonl")),
            engine.get_preset("claude-code-2.1.88"),
        )
    )
    assert fid["p90_rel_error"] < 0.02


@pytest.mark.parametrize(
    ("hook", "record"),
    [
        ("SessionStart:resume", "progress"),
        ("SessionStart:resume", "attachment"),
        ("SessionStart:compact", "progress"),
    ],
)
def test_a_resume_hook_starts_a_segment_without_splitting_the_thread(tmp_path, hook, record):
    b = conversation(10, resume_after=5)
    for rec in b.records:
        if rec["type"] == "progress":
            rec["data"]["hookName"] = hook
            resume_line = b.records.index(rec) + 1
            if record == "attachment":  # as 2.1.143 writes it
                rec["type"] = "attachment"
                rec["attachment"] = {**rec.pop("data"), "type": "hook_success", "content": ""}
    probe = plain_replay(b.write(tmp_path / "probe.jsonl")).to_json()["requests"]
    restart = next(r["thread_request"] for r in probe if r["line"] > resume_line)
    jump = -12_000  # the resumed process sent a smaller prefix (2.1.52: 96.8k → 75.5k)

    def total(k: int, raw: int) -> int:
        return round(PREFIX + RATIO * raw + (jump if k >= restart else 0))

    result = replayed(with_usage(b, tmp_path, total))
    rows = result["requests"]
    assert [t["id"] for t in result["session"]["threads"]] == ["main"]
    anchors = anchors_of(result)
    if hook != "SessionStart:resume":  # no restart: nothing names the jump
        assert not [a for a in anchors if a["point"] == "restart"]
        return
    assert [r["segment"] for r in rows] == [0] * restart + [1] * (len(rows) - restart)
    (anchor,) = anchors
    assert (anchor["kind"], anchor["point"], anchor["request"]) == ("segment", "restart", restart)
    assert abs(anchor["tokens"] - jump) < 1_500
    assert "resumed" in anchor["reason"]
    fid = engine.fidelity(
        engine.replay(
            engine.load_session(str(tmp_path / "session.jsonl")),
            engine.get_preset("claude-code-2.1.88"),
        )
    )
    assert fid["p90_rel_error"] < 0.02


def test_an_mcp_reconnect_starts_a_segment_and_rewrites_the_cache_after_the_system_prompt(
    tmp_path,
):
    b = conversation(10, mcp_reconnect_after=5)
    probe = plain_replay(b.write(tmp_path / "probe.jsonl")).to_json()["requests"]
    after = next(r["thread_request"] for r in probe if r["line"] > _line_with(b, "Reconnected"))

    def total(k: int, raw: int) -> int:
        return round(PREFIX + RATIO * raw)

    # a cold start: a first request that read almost its whole prompt would say the static
    # system part is almost all of it (a warm read ends at the system breakpoint)
    result = replayed(with_usage(b, tmp_path, total, cold_start=True))
    rows = result["requests"]
    assert [r["segment"] for r in rows] == [0] * after + [1] * (len(rows) - after)
    # no jump, so no anchor: the segment is there for the cache
    assert anchors_of(result) == []
    reconnect = rows[after]["cache_estimate"]
    assert reconnect["reason"] == "prefix_changed"
    assert 0 < reconnect["read"] < rows[after - 1]["cache_estimate"]["read"] / 2
    assert rows[after + 1]["cache_estimate"]["reason"] == "hit"


def test_a_first_warm_read_inside_the_unseen_prefix_is_the_static_system_part(tmp_path):
    """Another session's entry ends at the system breakpoint: a first read shorter than the
    unseen prefix is where that breakpoint sits, whatever share the model would assume."""
    b = conversation(10, mcp_reconnect_after=5)
    path = b.write(tmp_path / "draft.jsonl")
    probe = plain_replay(path).to_json()["requests"]
    after = next(r["thread_request"] for r in probe if r["line"] > _line_with(b, "Reconnected"))
    static = 16_000  # 89 % of the 18k prefix: more than the modeled 70 % share
    first = probe[0]["message_id"]
    path = with_usage(b, tmp_path, lambda k, raw: round(PREFIX + RATIO * raw))
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for rec in records:
        message = rec.get("message") or {}
        if rec["type"] == "assistant" and message.get("id") == first:
            usage = message["usage"]
            total = usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"] + 3
            usage["cache_read_input_tokens"] = static
            usage["cache_creation_input_tokens"] = total - 3 - static
    path.write_text("".join(json.dumps(rec) + "\n" for rec in records))
    rows = replayed(path)["requests"]
    assert rows[0]["cache_estimate"]["read"] == static
    # the rebuilt tool list after /mcp: the static part stays cached, no more, no less
    assert rows[after]["cache_estimate"]["reason"] == "prefix_changed"
    assert rows[after]["cache_estimate"]["read"] == static


def _exit_line(b: TranscriptBuilder) -> int:
    return _line_with(b, "/exit")


def _line_with(b: TranscriptBuilder, text: str) -> int:
    for n, rec in enumerate(b.records, 1):
        content = (rec.get("message") or {}).get("content")
        if isinstance(content, str) and text in content:
            return n
    raise AssertionError(f"no {text!r} in the transcript")


def test_input_no_record_shows_is_anchored_at_turn_starts(tmp_path):
    b = conversation(8)
    probe = plain_replay(b.write(tmp_path / "probe.jsonl")).to_json()["requests"]
    turn_starts = [r["thread_request"] for r in probe if r["turn_start"]]
    hook_turns = set(turn_starts[2:4])  # two turns whose hooks added 14k each, unrecorded
    per_hook = 14_000

    def total(k: int, raw: int) -> int:
        added = sum(per_hook for t in hook_turns if k >= t)
        return round(PREFIX + RATIO * raw + added)

    result = replayed(with_usage(b, tmp_path, total))
    unrecorded = [a for a in anchors_of(result) if a["kind"] == "unrecorded"]
    assert sorted(a["request"] for a in unrecorded) == sorted(hook_turns)
    assert all(a["point"] == "turn_start" for a in unrecorded)
    rows = result["requests"]
    last = rows[-1]
    assert abs(last["unrecorded_tokens"] - 2 * per_hook) < 2_000
    assert rows[0]["unrecorded_tokens"] == 0
    # the display count holds it (the recorded prompt), the fit is taken without it
    assert abs(last["model_tokens"] - last["recorded_total"]) < 0.02 * last["recorded_total"]
    # it stays in a what-if replay: the agent sent it
    whatif = replayed(tmp_path / "session.jsonl", "whatif")
    assert whatif["requests"][-1]["unrecorded_tokens"] == last["unrecorded_tokens"]
    # anchors stay few: one per jump, none elsewhere
    assert len(anchors_of(result)) == len(hook_turns)


@pytest.mark.parametrize("selection", [True, False])
def test_a_jump_the_next_requests_take_back_is_no_anchor(tmp_path, selection):
    # one turn start shows a 6k jump that the requests after it do not keep: carrying it to
    # the end of the thread would make the line fit worse
    b = conversation(8)
    probe = plain_replay(b.write(tmp_path / "probe.jsonl")).to_json()["requests"]
    turn_starts = [r["thread_request"] for r in probe if r["turn_start"]]
    spike = turn_starts[4]

    def total(k: int, raw: int) -> int:
        return round(PREFIX + RATIO * raw + (6_000 if k == spike else 0))

    path = with_usage(b, tmp_path, total)
    config = engine.get_preset("claude-code-2.1.88").replace(anchor_selection=selection)
    result = engine.replay(engine.load_session(str(path)), config).to_json()
    found = [a["request"] for a in anchors_of(result)]
    if selection:
        assert found == []
    else:
        # every jump past the 1 % floor, the spike among them
        assert spike in found


def test_the_anchors_can_be_switched_off(tmp_path):
    b = conversation(6)
    path = with_usage(
        b, tmp_path, lambda k, raw: round(PREFIX + RATIO * raw + (20_000 if k >= 5 else 0))
    )
    session = engine.load_session(str(path))
    config = engine.get_preset("claude-code-2.1.88").replace(anchors_enabled=False)
    result = engine.replay(session, config).to_json()
    assert anchors_of(result) == []
    assert result["session"]["threads"][0]["calibration"]["source"] == "fit"


def test_cost_state_is_shown_beside_the_replay_cost(tmp_path):
    b = conversation(3)
    b.add({"type": "cost-state", "totalCostUSD": 0.4321, "sessionId": b.session_id}, link=False)
    b.add({"type": "cost-state", "totalCostUSD": 0.9876, "sessionId": b.session_id}, link=False)
    path = with_usage(b, tmp_path, lambda k, raw: round(PREFIX + RATIO * raw))
    summary = replayed(path)["summary"]
    assert summary["claude_code_cost"] == pytest.approx(0.9876)
    assert summary["session_cost_usd"] == pytest.approx(
        summary["cost_usd"] + summary["subagent_cost_usd"] + summary["compaction_cost_usd"]
    )


def test_a_cost_state_without_a_figure_is_reported_not_fatal(tmp_path):
    b = conversation(2)
    b.add({"type": "cost-state", "totalCostUSD": "lots"}, link=False)
    session = engine.load_session(str(b.write(tmp_path / "s.jsonl")))
    assert any(p.code == "bad_field" and "cost-state" in p.message for p in session.problems)
    assert (
        engine.replay(session, engine.get_preset("claude-code-2.1.88")).to_json()["summary"][
            "claude_code_cost"
        ]
        is None
    )


def test_one_hour_cache_writes_are_priced_at_their_rate(tmp_path):
    b = TranscriptBuilder()
    b.prompt("hello")
    usage = {
        "input_tokens": 5,
        "cache_creation_input_tokens": 30_000,
        "cache_read_input_tokens": 0,
        "output_tokens": 100,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 30_000},
    }
    b.assistant([{"type": "text", "text": "hi"}], usage=usage)
    row = replayed(b.write(tmp_path / "s.jsonl"))["requests"][0]
    pricing = load_pricing()
    price, _, _ = pricing.price_for(row["model"])
    assert price.cache_write_1h > price.cache_write_5m
    expected = request_cost(
        row["model"],
        uncached=5,
        cache_read=0,
        cache_write_5m=0,
        cache_write_1h=30_000,
        output=100,
        pricing=pricing,
    )
    assert row["recorded_cost_usd"] == pytest.approx(expected, rel=1e-6)
    assert row["recorded_cost_usd"] > request_cost(
        row["model"],
        uncached=5,
        cache_read=0,
        cache_write_5m=30_000,
        cache_write_1h=0,
        output=100,
        pricing=pricing,
    )
    assert row["ttl"] == "1h"


def test_rendered_attachment_text_is_model_input(tmp_path):
    b = conversation(1)
    reminder = "<system-reminder>the hook said: remember the style guide</system-reminder>"
    b.add(
        b.envelope(
            "attachment",
            b.last_uuid,
            attachment={
                "type": "hook_additional_context",
                "content": ["x"],
                "rendered": [reminder],
            },
        )
    )
    session = engine.load_session(str(b.write(tmp_path / "s.jsonl")))
    attachment = next(m for m in session.main.messages if m.kind == "attachment")
    assert attachment.blocks[0].text == reminder


def test_a_prompt_snapshot_is_not_a_conversation_message(tmp_path):
    b = conversation(1)
    b.add(
        b.envelope(
            "attachment",
            b.last_uuid,
            attachment={"type": "prompt_snapshot", "systemPrompt": "You are Claude Code. " * 500},
        )
    )
    session = engine.load_session(str(b.write(tmp_path / "s.jsonl")))
    snapshot = next(m for m in session.main.messages if m.kind == "attachment")
    assert snapshot.blocks[0].text == ""


def test_auto_stays_on_200k_when_the_session_compacted_automatically_below_it():
    assert ran_with_1m_window(250_000, None)
    assert ran_with_1m_window(250_000, [950_000])
    assert not ran_with_1m_window(250_000, [213_000, 167_000])
    assert not ran_with_1m_window(150_000, None)
    one_m, _ = resolve_config("auto", version="2.1.226", max_recorded_prompt=250_000)
    kept, _ = resolve_config(
        "auto",
        version="2.1.226",
        max_recorded_prompt=250_000,
        recorded_auto_compactions=[167_000],
    )
    assert one_m.context_window == 1_000_000
    assert kept.context_window == engine.PipelineConfig().context_window


def compaction_with_an_unwritten_tool_result() -> TranscriptBuilder:
    """Usage at 60k, then a tool call whose result Claude Code never wrote before it compacted
    at 68k (above the 67k threshold of a 100k window): only ``preTokens`` shows the count."""
    b = TranscriptBuilder()
    b.usage_total = 58_000
    b.prompt("start")
    b.assistant([{"type": "text", "text": "ready"}], grow=1_000)
    b.prompt("run the build")
    b.assistant(
        [{"type": "tool_use", "id": "toolu_lost", "name": "Bash", "input": {"command": "make"}}],
        grow=1_000,
    )
    b.compact("<summary>the build was started</summary>", pre_tokens=68_000)
    b.prompt("go on")
    b.assistant([{"type": "text", "text": "continuing"}], grow=1_000)
    return b


@pytest.mark.parametrize(("lean", "compacts"), [(True, True), (False, False)])
def test_what_if_counts_with_claude_codes_own_count_where_it_compacted(tmp_path, lean, compacts):
    path = compaction_with_an_unwritten_tool_result().write(tmp_path / "s.jsonl")
    session = engine.load_session(str(path))
    config = engine.get_preset("claude-code-2.1.88").replace(
        context_window=100_000, whatif_recorded_counts=lean
    )
    recorded = engine.replay(session, config, mode="recorded").to_json()["requests"]
    whatif = engine.replay(session, config, mode="whatif").to_json()["requests"]
    at = next(
        r["index"]
        for r in recorded
        if any(e["step"] == "autocompact" and e["action"] == "compacted" for e in r["events"])
    )
    predicted = any(
        e["step"] == "autocompact" and e["action"] == "compacted" for e in whatif[at]["events"]
    )
    assert predicted is compacts


def test_each_thread_keeps_the_window_its_own_records_show():
    assert thread_window(203_000, [], 200_000) == 1_000_000
    assert thread_window(203_000, [167_000], 1_000_000) == 200_000
    assert thread_window(150_000, [], 1_000_000) == 1_000_000
    assert thread_window(150_000, [], 200_000) == 200_000


def branch_above_200k_beside_a_main_that_compacted_below_it() -> TranscriptBuilder:
    """gmeligio/flutter-docker-image in small: the main conversation compacts automatically at
    167k (the 200k window), a branch of it (another process) grew to 211k without compacting."""
    b = TranscriptBuilder()
    b.usage_total = 150_000
    b.prompt("start")
    b.assistant([{"type": "text", "text": "ready"}], grow=1_000)
    fork, fork_total = b.last_uuid, b.usage_total
    b.prompt("explore the other approach")
    for n in range(3):
        b.assistant([{"type": "text", "text": f"branch step {n}"}], grow=20_000)
        b.prompt(f"go on {n}")
    b.assistant([{"type": "text", "text": "branch done"}], grow=500)
    b.last_uuid, b.usage_total = fork, fork_total
    b.prompt("the first approach then")
    for n in range(2):
        b.assistant([{"type": "text", "text": f"main step {n}"}], grow=8_000)
        b.prompt(f"next {n}")
    b.compact("<summary>main so far</summary>", pre_tokens=167_000)
    b.prompt("after the compaction")
    b.assistant([{"type": "text", "text": "main done"}], grow=1_000)
    return b


@pytest.mark.parametrize("from_records", [True, False])
def test_a_branch_above_200k_ran_with_the_1m_window(tmp_path, from_records):
    session = engine.load_session(
        str(branch_above_200k_beside_a_main_that_compacted_below_it().write(tmp_path / "s.jsonl"))
    )
    assert [t.kind for t in session.threads] == ["main", "branch"]
    config, _ = resolve_config(
        "auto",
        {} if from_records else {"window_from_records": False},
        version=session.version,
        max_recorded_prompt=session.max_recorded_prompt,
        recorded_auto_compactions=session.recorded_auto_compactions,
    )
    # the session as a whole shows the 200k window (main compacted at 167k)
    assert config.context_window == 200_000
    assert config.window_from_records is from_records
    whatif = engine.replay(session, config, mode="whatif")
    branch = next(tr for tr in whatif.threads if tr.thread.kind == "branch")
    compacted = [
        r["thread_request"]
        for r in branch.requests
        if any(e["step"] == "autocompact" and e["action"] == "compacted" for e in r["events"])
    ]
    # the recording never compacted the branch: with 200k, what-if would at ~167k
    assert (compacted == []) is from_records


def test_the_history_peak_is_the_largest_span_so_far_as_the_list_grows() -> None:
    """``ThreadAnchors.history_peak`` (read per request) is the maximum over the requests so
    far, also after a live replay appends requests."""
    anchors = ThreadAnchors.empty(0)
    anchors.history_raw = [0, 5, 3, 9, 2]
    assert [anchors.history_peak(k) for k in range(5)] == [0, 5, 5, 9, 9]
    anchors.history_raw.extend([0, 11, 4])
    assert [anchors.history_peak(k) for k in range(8)] == [
        max(anchors.history_raw[: k + 1]) for k in range(8)
    ]


def _named_points_reference(thread: Any, requests: Any) -> list[dict[str, str]]:
    """``named_points`` written plainly (each point its own look at the messages)."""
    from contextlab.engine.measures.anchors import restart_reason

    out: list[dict[str, str]] = []
    prev_end = 0
    for k, req in enumerate(requests):
        points: dict[str, str] = {}
        between = thread.messages[prev_end : req.position]
        if k == 0:
            points["file_start"] = "first request of the file"
        reason = restart_reason(thread, prev_end, req.position, requests[k - 1] if k else None)
        if reason and k:
            points["restart"] = reason
        if any(m.kind in ("compact_boundary", "summary") for m in between) and k:
            points["after_compaction"] = "first request after a compaction"
        if any(m.role == "user" and m.kind in ("prompt", "command") for m in between) and k:
            points["turn_start"] = "a user turn starts"
        out.append(points)
        prev_end = req.position
    return out


def test_named_points_are_the_plain_readings_of_every_fixture_and_corpus_thread():
    """The one-look ``named_points`` names the same points, in the same order, as reading the
    messages once per point: restarts (commands, resumes, versions), compactions, turns."""
    from contextlab.engine.input.session import thread_requests
    from contextlab.engine.input.sources.registry import load_session
    from contextlab.engine.measures.anchors import named_points

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"

    def named_in(files: list[Path]) -> int:
        named = 0
        for path in files:
            try:
                session = load_session(path)
            except Exception:  # a fixture made to be refused
                continue
            for thread in session.threads:
                requests = thread_requests(thread)
                points = named_points(thread, requests)
                assert points == _named_points_reference(thread, requests), path.name
                assert [list(p) for p in points] == [
                    list(p) for p in _named_points_reference(thread, requests)
                ]
                named += sum(len(p) for p in points)
        return named

    # the committed fixtures alone name some points (a clone without the corpus: 43); the
    # corpus, where there is one, many more
    assert (
        named_in(
            [*sorted(fixtures.glob("*.jsonl")), *sorted((fixtures / "codex").rglob("*.jsonl"))]
        )
        > 30
    )
    if HAVE_CORPUS:
        assert named_in(corpus_files()) > 100
