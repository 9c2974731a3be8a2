"""The Codex adapter on rollouts in the shapes Codex wrote across versions (fixtures written for
ContextLab in tests/fixtures/codex/, shapes as seen in public rollouts: docs/codex-provenance.md)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextlab import engine
from contextlab.engine.input.loading import open_upload
from contextlab.engine.input.sources.claude_code.adapter import ClaudeCodeAdapter
from contextlab.engine.input.sources.codex.adapter import CodexAdapter, window_for_version
from contextlab.engine.input.sources.registry import detect_source, head_records
from contextlab.engine.pipeline.truncation import truncate
from tests.engine.builders import TranscriptBuilder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
ROLLOUTS = sorted(FIXTURES.glob("*.jsonl"))
CODEX = CodexAdapter()


def raw_records(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def recorded_calls(path: Path) -> tuple[list[dict[str, int]], dict[str, int] | None]:
    """The de-duplicated ``token_count`` figures of a rollout, read independently of the
    adapter: each event whose cumulative total differs from the previous one, less the
    context-size markers (no input, no output); and the final cumulative total."""
    calls, previous = [], None
    for record in raw_records(path):
        payload = record.get("payload") or {}
        if record.get("type") != "event_msg" or payload.get("type") != "token_count":
            continue
        info = payload.get("info")
        if not info:
            continue
        total = info["total_token_usage"]
        if total == previous:
            continue
        previous = total
        last = info["last_token_usage"]
        if last["input_tokens"] or last["output_tokens"]:
            calls.append(last)
    return calls, previous


def calls_of(session: Any) -> list[Any]:
    """Every recorded call of a session in file order: the main thread's and the compaction
    forks' own (a fork starts with the main conversation up to its ``fork_index``)."""
    own = [*session.main.messages]
    for fork in session.threads[1:]:
        own += fork.messages[fork.fork_index :]
    return sorted((m for m in own if m.role == "assistant" and m.usage), key=lambda m: m.line)


def test_codex_recognises_rollouts_of_every_shape_and_nothing_else(tmp_path):
    for path in ROLLOUTS:
        head = head_records(open_upload(path))
        assert CODEX.detect(head) > 0.9, path.name
        assert ClaudeCodeAdapter().detect(head) == 0, path.name
    b = TranscriptBuilder()
    b.prompt("hello")
    b.assistant([{"type": "text", "text": "hi"}])
    claude = b.write(tmp_path / "claude.jsonl")
    assert CODEX.detect(head_records(open_upload(claude))) == 0
    hostile = [{"type": ["session_meta"]}, {"type": "session_meta", "payload": [1]}, 3, None]
    assert CODEX.detect(hostile) == 0


@pytest.mark.parametrize("name", ["session.jsonl", "notes.txt", "rollout.jsonl.gz"])
def test_the_registry_picks_codex_by_content_whatever_the_file_is_called(tmp_path, name):
    source = FIXTURES / "v0_58_calls.jsonl"
    target = tmp_path / name
    if name.endswith(".gz"):
        target.write_bytes(gzip.compress(source.read_bytes()))
    else:
        shutil.copy(source, target)
    assert detect_source(open_upload(target)).name == "codex"
    session = engine.load_session(target)
    assert session.agent == "codex"
    assert session.versions == ["0.58.0"]


@pytest.mark.parametrize("path", ROLLOUTS, ids=lambda p: p.name)
def test_per_call_figures_and_totals_are_the_recorded_ones(path):
    session = engine.load_session(path)
    calls = calls_of(session)
    expected, final = recorded_calls(path)
    assert len(calls) == len(expected)
    for message, last in zip(calls, expected, strict=True):
        usage = message.usage
        assert usage is not None
        assert usage.prompt_total == last["input_tokens"]  # input includes the cached part
        assert usage.cache_read == last["cached_input_tokens"]
        assert usage.output == last["output_tokens"]  # reasoning is part of output
        assert message.metadata["reasoning_output_tokens"] == last["reasoning_output_tokens"]
    assert session.side.recorded_totals == final
    if final is not None:
        assert sum(m.usage.prompt_total for m in calls if m.usage) == final["input_tokens"]
        assert sum(m.usage.cache_read for m in calls if m.usage) == final["cached_input_tokens"]
        assert sum(m.usage.output for m in calls if m.usage) == final["output_tokens"]
    assert not [p for p in session.problems if p.code == "usage_gap"]


def test_repeated_counts_and_the_first_null_count_make_no_calls():
    path = FIXTURES / "v0_58_calls.jsonl"
    events = [r for r in raw_records(path) if r.get("payload", {}).get("type") == "token_count"]
    session = engine.load_session(path)
    calls = [m for m in session.main.messages if m.role == "assistant"]
    assert events[0]["payload"]["info"] is None
    assert len(events) > len(calls) == 4
    # the counts come before their output items in this version: each call holds its own
    assert [m.blocks[0].type for m in calls] == ["thinking", "thinking", "text", "text"]


def test_a_model_switch_in_turn_context_is_the_next_calls_model():
    session = engine.load_session(FIXTURES / "v0_58_calls.jsonl")
    models = [m.model for m in session.main.messages if m.role == "assistant"]
    assert models == ["gpt-5-codex", "gpt-5-codex", "gpt-5-codex", "gpt-5"]


def test_a_cut_last_line_is_reported_and_the_rest_kept():
    path = FIXTURES / "v0_46_local_compaction_cut.jsonl"
    assert not path.read_text().endswith("\n")
    session = engine.load_session(path)
    cut = [p for p in session.problems if p.code == "truncated_line"]
    assert len(cut) == 1
    assert cut[0].line == len(path.read_text().splitlines())
    assert len(calls_of(session)) == 4


def test_a_local_compaction_is_a_boundary_with_its_readable_summary():
    session = engine.load_session(FIXTURES / "v0_46_local_compaction_cut.jsonl")
    messages = session.main.messages
    (at,) = [m.index for m in messages if m.kind == "compact_boundary"]
    boundary, summary = messages[at], messages[at + 1]
    assert boundary.metadata["codex_compaction"] == "local"
    assert boundary.metadata["trigger"] == "auto"
    assert boundary.metadata["trigger_inferred"]
    assert boundary.metadata["trigger_reason"].startswith("inferred:")
    assert summary.kind == "summary"
    assert "ported to Rust" in summary.blocks[0].text
    # the summarising call (an ordinary count, no items of its own) is a compaction fork: the
    # main conversation up to the boundary, then the call, whose reply is the summary
    assert messages[at - 1].kind == "tool_result"
    (fork,) = session.threads[1:]
    assert fork.compaction_fork
    assert fork.fork_index == at
    assert fork.messages[:at] == messages[:at]
    summarizer = fork.messages[-1]
    assert summarizer.role == "assistant"
    assert summarizer.metadata["no_output_items"]
    assert "ported to Rust" in summarizer.blocks[0].text
    assert [m.index for m in fork.messages] == list(range(len(fork.messages)))
    assert boundary.metadata["preTokens"] == summarizer.usage.prompt_total + summarizer.usage.output


def test_a_remote_compaction_keeps_its_history_and_an_opaque_summary_sized_from_the_next_count():
    session = engine.load_session(FIXTURES / "v0_64_remote_compaction.jsonl")
    messages = session.main.messages
    (at,) = [m.index for m in messages if m.kind == "compact_boundary"]
    boundary, summary = messages[at], messages[at + 1]
    assert boundary.metadata["codex_compaction"] == "remote"
    assert boundary.metadata["postTokens"] == 15200
    assert boundary.metadata["kept_items"] == 2
    block = summary.blocks[0]
    assert block.data["opaque"]
    assert block.data["encrypted_bytes"] > 9000
    assert block.data["sized_from"] == 15200
    assert 0 < block.tok < 15200
    kept = [m.blocks[0].text for m in messages[at + 2 : at + 4]]
    assert kept[1] == "Refactor the storage layer."


def test_a_remote_compactions_context_count_is_its_own_whether_written_before_or_after_it():
    # Codex Desktop 0.104 writes the count just before its ``compacted`` record (and again after
    # the turn_context that follows), 0.64 just after: each count is its own compaction's, the
    # second compaction's never the first's
    path = FIXTURES / "v0_104_two_remote_compactions.jsonl"
    session = engine.load_session(path)
    messages = session.main.messages
    boundaries = [m for m in messages if m.kind == "compact_boundary"]
    assert [b.metadata["postTokens"] for b in boundaries] == [940_499, 612_004]
    # above the window (Codex's estimate counts the kept images by their bytes): recorded as
    # such, and the opaque summary is sized from the next call instead
    assert all(b.metadata["postTokens_over_window"] for b in boundaries)
    summaries = [messages[b.index + 1] for b in boundaries]
    assert [s.blocks[0].data["sized_from"] for s in summaries] == [48_300, 36_100]
    assert [b.metadata["trigger"] for b in boundaries] == ["auto", "auto"]  # mid-turn
    expected, final = recorded_calls(path)
    assert [m.usage.prompt_total for m in calls_of(session) if m.usage] == [
        last["input_tokens"] for last in expected
    ]
    assert session.side.recorded_totals == final
    # a count under the window still sizes the summary (0.64's order)
    remote = engine.load_session(FIXTURES / "v0_64_remote_compaction.jsonl")
    (boundary,) = [m for m in remote.main.messages if m.kind == "compact_boundary"]
    assert "postTokens_over_window" not in boundary.metadata


def test_a_token_budget_new_window_is_a_compaction_without_a_summary():
    # Codex's token_budget feature (off by default) starts a new context window instead of
    # summarising: an empty message, no encrypted item, the initial context kept, and the
    # window's ids; lines carry an ``ordinal``. Fixture written by ContextLab in that shape.
    path = FIXTURES / "token_budget_new_window.jsonl"
    session = engine.load_session(path)
    assert not session.problems
    (boundary,) = [m for m in session.main.messages if m.kind == "compact_boundary"]
    assert boundary.metadata["codex_compaction"] == "new_window"
    assert boundary.metadata["trigger"] == "manual"  # the model called new_context
    assert "new context window" in boundary.metadata["label"]
    assert "asked for by the model" in boundary.metadata["label"].lower()
    summary = session.main.messages[boundary.index + 1]
    assert summary.kind == "summary"
    assert [b.text for b in summary.blocks] == [""]
    assert not summary.metadata["opaque"]
    kept = [m for m in session.main.messages if m.metadata.get("compaction_kept")]
    assert [m.blocks[0].text.split(">")[0] for m in kept] == [
        "<permissions instructions",
        "<environment_context",
        "<context_window",
    ]
    config, preset = engine.resolve_session_config(session)
    data = engine.replay(session, config, mode="recorded", preset_name=preset).to_json()
    after = data["requests"][2]
    # the new window holds no message of the old one
    assert after["view"]["start"] > boundary.index
    assert after["raw_tokens"] < data["requests"][1]["raw_tokens"] / 4


def test_a_new_window_without_the_models_call_is_automatic(tmp_path):
    lines = (FIXTURES / "token_budget_new_window.jsonl").read_text().splitlines()
    kept = [line for line in lines if '"call_id":"call_nw002"' not in line]
    path = tmp_path / "auto.jsonl"
    path.write_text("\n".join(kept) + "\n")
    session = engine.load_session(path)
    (boundary,) = [m for m in session.main.messages if m.kind == "compact_boundary"]
    assert boundary.metadata["codex_compaction"] == "new_window"
    assert boundary.metadata["trigger"] == "auto"
    assert "Automatic: inferred" in boundary.metadata["label"]


def test_a_whatif_reusing_a_remote_compactions_summary_gives_it_its_recorded_size():
    # the encrypted summary's text is a placeholder: the what-if that compacts where the
    # recording did reuses the summary at the size the next recorded count gave it, and the
    # session's limit is counted as its own decisions are (the last usage and what came after)
    session = engine.load_session(FIXTURES / "v0_104_two_remote_compactions.jsonl")
    boundaries = [m for m in session.main.messages if m.kind == "compact_boundary"]
    for boundary in boundaries:
        assert boundary.metadata["preTokens"] > boundary.metadata["pre_recorded"]
        assert boundary.metadata["preTokens"] - boundary.metadata["pre_recorded"] < 100
    sized = [session.main.messages[b.index + 1].blocks[0].tok for b in boundaries]
    config, preset = engine.resolve_session_config(session)
    whatif = engine.replay(session, config, mode="whatif", preset_name=preset).to_json()
    events = [e for r in whatif["requests"] for e in r["events"] if e["step"] == "autocompact"]
    assert [e["summary_reused"] for e in events] == [True, True]
    assert [e["summary_tokens"] for e in events] == sized
    assert min(sized) > 20_000


def test_the_older_bare_item_form_loads_without_counts():
    session = engine.load_session(FIXTURES / "v0_2x_bare_items.jsonl")
    kinds = [m.kind for m in session.main.messages]
    assert kinds == ["prompt", "assistant", "tool_result", "assistant"]
    assert session.session_id == "6b0a2b9e-1111-4222-8333-444455556666"
    assert [p.code for p in session.problems] == ["no_token_counts"]


def test_unknown_shapes_are_warnings_never_failures(tmp_path):
    lines = (FIXTURES / "v0_58_calls.jsonl").read_text().splitlines()
    lines.insert(3, json.dumps({"type": "future_record", "payload": {"x": 1}}))
    lines.insert(4, json.dumps({"type": "response_item", "payload": {"type": "hologram"}}))
    lines.insert(
        5,
        json.dumps(
            {
                "type": "event_msg",
                "payload": {
                    "type": "token_count",
                    "info": {"total_token_usage": "lots", "last_token_usage": [1]},
                },
            }
        ),
    )
    lines.insert(
        6,
        json.dumps(
            {
                "type": "compacted",
                "payload": {"message": 5, "replacement_history": [7, {"type": ["x"]}]},
            }
        ),
    )
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join(lines) + "\n")
    session = engine.load_session(path)
    shapes = [p for p in session.problems if p.code == "unknown_codex_shape"]
    assert shapes
    assert all(p.severity == "warning" for p in shapes)
    assert any("hologram" in p.message for p in shapes)
    assert sum(1 for m in session.main.messages if m.usage) == 4


def test_a_file_of_no_codex_content_fails_with_its_reasons(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"type": "session_meta", "payload": {"id": "a"}}) + "\nnot json\n")
    with pytest.raises(engine.TranscriptError) as err:
        engine.load_session(path)
    assert "no conversation items" in str(err.value)


@pytest.mark.parametrize("path", ROLLOUTS, ids=lambda p: p.name)
def test_recorded_replay_has_one_request_per_call_and_the_compactions_at_their_request(path):
    session = engine.load_session(path)
    config, preset = engine.resolve_config("auto", version=session.version)
    data = engine.replay(session, config, mode="recorded", preset_name=preset).to_json()
    # a rollback's branch holds calls too: the requests are the main thread's and the
    # branches', in time order
    branched = [
        m for t in session.threads if t.kind == "branch" for m in t.messages[t.fork_index :]
    ]
    calls = sorted(
        (m for m in [*session.main.messages, *branched] if m.role == "assistant"),
        key=lambda m: m.timestamp,
    )
    assert len(data["requests"]) == len(calls)
    assert [r["message_id"] for r in data["requests"]] == [m.message_id for m in calls]
    boundaries = [m.index for m in session.main.messages if m.kind == "compact_boundary"]
    expected = [next(i for i, c in enumerate(calls) if c.index > b) for b in boundaries]
    assert data["summary"]["compaction_requests"] == expected


def test_the_window_is_the_recorded_one_else_the_versions():
    assert engine.load_session(FIXTURES / "v0_64_remote_compaction.jsonl").context_window == 258_400
    assert (
        engine.load_session(FIXTURES / "v0_46_local_compaction_cut.jsonl").context_window == 272_000
    )
    assert window_for_version("0.46.0") == 272_000
    assert window_for_version("0.58.0") == 258_400
    assert window_for_version("1.2") is None
    assert window_for_version(None) is None
    session = engine.load_session(FIXTURES / "v0_58_calls.jsonl")
    config, _ = engine.resolve_config(
        "auto", version=session.version, recorded_window=session.context_window
    )
    assert config.context_window == 258_400
    overridden, _ = engine.resolve_config(
        "auto", {"context_window": 300_000}, recorded_window=session.context_window
    )
    assert overridden.context_window == 300_000


def test_codex_calls_are_priced_at_the_gpt5_prices():
    session = engine.load_session(FIXTURES / "v0_58_calls.jsonl")
    config, preset = engine.resolve_config("auto", recorded_window=session.context_window)
    data = engine.replay(session, config, mode="recorded", preset_name=preset).to_json()
    expected = 0.0
    for message in session.main.messages:
        if message.usage is not None:
            u = message.usage
            assert message.model is not None
            assert message.model.startswith("gpt-5")
            expected += (u.input * 1.25 + u.cache_read * 0.125 + u.output * 10.0) / 1e6
    assert data["summary"]["recorded_cost_usd"] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("path", ROLLOUTS, ids=lambda p: p.name)
def test_a_whatif_with_the_sessions_own_limit_puts_automatic_compactions_on_their_request(path):
    session = engine.load_session(path)
    config, preset = engine.resolve_config(
        "auto",
        version=session.version,
        recorded_window=session.context_window,
        recorded_auto_compactions=session.recorded_auto_compactions,
        agent=session.agent,
    )
    assert preset == "codex"
    recorded = engine.replay(session, config, mode="recorded", preset_name=preset).to_json()
    whatif = engine.replay(session, config, mode="whatif", preset_name=preset).to_json()
    boundaries = [m for m in session.main.messages if m.kind == "compact_boundary"]
    automatic = [
        request
        for request, b in zip(recorded["summary"]["compaction_requests"], boundaries, strict=True)
        if b.metadata["trigger"] == "auto"
    ]
    predicted = whatif["summary"]["compaction_requests"]
    for request in automatic:
        assert request in predicted or request + 1 in predicted, (automatic, predicted)


def test_the_codex_preset_compacts_at_90_percent_of_the_window_without_a_reserve():
    config, preset = engine.resolve_config("auto", agent="codex", recorded_window=258_400)
    thresholds = engine.compute_thresholds(config, "gpt-5.1-codex")
    assert preset == "codex"
    assert thresholds.effective_window == 258_399
    assert thresholds.autocompact_threshold == 232_559
    # a Claude Code session's auto is unchanged by the agent argument
    assert engine.resolve_config("auto", version="2.1.88", agent="claude_code")[1] == (
        "claude-code-2.1.88"
    )
    # a compaction well under the window (a /compact taken for automatic) sets no limit
    low, _ = engine.resolve_config(
        "auto", agent="codex", recorded_window=258_400, recorded_auto_compactions=[16_000]
    )
    assert low.autocompact_pct_override == 90.0
    # a threshold the user sets wins over the session's own compactions
    own, _ = engine.resolve_config(
        "auto",
        {"autocompact_pct_override": 50.0},
        agent="codex",
        recorded_window=258_400,
        recorded_auto_compactions=[200_000],
    )
    assert own.autocompact_pct_override == 50.0


def test_truncation_keeps_the_head_and_tail_around_a_marker():
    text = "".join(f"line {n}\n" for n in range(1000))
    cut = truncate(text, 200)
    assert cut.startswith(text[:100])
    assert cut.endswith(text[-100:])
    assert f"…{len(text) - 200} characters truncated…" in cut
    assert truncate("short", 200) == "short"


def test_a_whatif_tool_output_limit_cuts_the_outputs_the_model_sees():
    session = engine.load_session(FIXTURES / "v0_64_remote_compaction.jsonl")

    def run(mode: str, limit: int | None) -> dict[str, Any]:
        config, preset = engine.resolve_config(
            "auto",
            {"tool_output_limit_chars": limit} if limit else None,
            agent=session.agent,
            recorded_window=session.context_window,
        )
        return engine.replay(session, config, mode=mode, preset_name=preset).to_json()

    full, cut = run("whatif", None), run("whatif", 2_000)
    # the second call sees the first call's 6 KB output: cut to 2,000 characters
    assert cut["requests"][1]["raw_tokens"] < full["requests"][1]["raw_tokens"] - 500
    assert full["requests"][0]["raw_tokens"] == cut["requests"][0]["raw_tokens"]
    # the recorded replay shows what was sent, whatever the limit says
    assert (
        run("recorded", 2_000)["requests"][1]["raw_tokens"]
        == (run("recorded", None)["requests"][1]["raw_tokens"])
    )
    with pytest.raises(engine.FieldError):  # a limit is at least 100 characters
        engine.resolve_config("auto", {"tool_output_limit_chars": 10}, agent="codex")


#: Real rollouts gathered for measuring (docs/codex-provenance.md), never committed:
#: ``$CONTEXTLAB_CODEX_ROLLOUTS``, else ``../data/codex`` beside the checkout.
REAL = Path(
    os.environ.get("CONTEXTLAB_CODEX_ROLLOUTS")
    or Path(__file__).resolve().parents[2].parent / "data" / "codex"
)
REAL_ROLLOUTS = sorted(REAL.glob("*.jsonl")) if REAL.is_dir() else []


@pytest.mark.skipif(not REAL_ROLLOUTS, reason=f"no real Codex rollouts at {REAL}")
@pytest.mark.parametrize("path", REAL_ROLLOUTS, ids=lambda p: p.name[:40])
def test_real_rollouts_load_with_their_recorded_totals_and_replay_within_target(path):
    session = engine.load_session(path)
    expected, final = recorded_calls(path)
    calls = calls_of(session)
    assert len(calls) == len(expected)
    assert session.side.recorded_totals == final
    config, preset = engine.resolve_config(
        "auto",
        agent=session.agent,
        recorded_window=session.context_window,
        recorded_auto_compactions=session.recorded_auto_compactions,
    )
    result = engine.replay(session, config, mode="recorded", preset_name=preset)
    fid = engine.evaluation.fidelity(result)
    assert fid["median_rel_error"] is not None
    assert fid["median_rel_error"] <= 0.03
    assert fid["p90_rel_error"] <= 0.08


#: Real but sanitized rollouts (every text a ``[REDACTED_TEXT len=N sha=H]`` placeholder, token
#: counts, order and times kept): ``redacted/`` under the real rollouts' folder.
REDACTED_ROLLOUTS = sorted((REAL / "redacted").glob("*.jsonl")) if REAL.is_dir() else []


@pytest.mark.skipif(not REDACTED_ROLLOUTS, reason=f"no sanitized Codex rollouts at {REAL}/redacted")
@pytest.mark.parametrize("path", REDACTED_ROLLOUTS, ids=lambda p: p.name[:40])
def test_sanitized_real_rollouts_keep_their_totals_and_fit_on_their_recorded_sizes(path, tmp_path):
    """Totals as recorded; the fit on a copy whose placeholders are filler of their recorded
    lengths (bench/codex_truth.py --expand-redacted): the sizes are real, the text is not."""
    from bench.codex_truth import expand_redacted

    session = engine.load_session(path)
    expected, final = recorded_calls(path)
    assert len(calls_of(session)) == len(expected)
    assert session.side.recorded_totals == final
    expanded = engine.load_session(expand_redacted(path, tmp_path))
    config, preset = engine.resolve_config("auto", recorded_window=expanded.context_window)
    fid = engine.evaluation.fidelity(
        engine.replay(expanded, config, mode="recorded", preset_name=preset)
    )
    if len(expected) >= 3:  # a fit needs a few calls
        assert fid["median_rel_error"] <= 0.03
        assert fid["p90_rel_error"] <= 0.08


@pytest.mark.skipif(not REDACTED_ROLLOUTS, reason=f"no sanitized Codex rollouts at {REAL}/redacted")
@pytest.mark.parametrize("path", REDACTED_ROLLOUTS, ids=lambda p: p.name[:40])
def test_a_real_rollout_cut_mid_line_loads_what_it_holds_and_says_so(path, tmp_path):
    """The file cut in the middle of a line two thirds in (as a crash or a copy in progress
    leaves it): the cut line reported, every call before it kept with its figures."""
    data = path.read_bytes()
    cut_at = data.index(b"\n", len(data) * 2 // 3) + 40  # 40 bytes into the next line
    cut = tmp_path / path.name
    cut.write_bytes(data[:cut_at])
    whole_lines = data[:cut_at].count(b"\n")
    session = engine.load_session(cut)
    [problem] = [p for p in session.problems if p.code == "truncated_line"]
    assert problem.line == whole_lines + 1
    kept = tmp_path / "kept.jsonl"
    kept.write_bytes(data[: data.rindex(b"\n", 0, cut_at) + 1])
    expected, final = recorded_calls(kept)
    assert len(calls_of(session)) == len(expected)
    assert session.side.recorded_totals == final


class RecordingSummarizer:
    """Writes a fixed summary and keeps the requests it got (no network: the prompt is what is
    checked here; summarizers are tested in test_llm.py)."""

    name = "recording"

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def summarize(self, request: Any) -> Any:
        from contextlab.engine.summarizing import SummaryResult

        self.requests.append(request)
        return SummaryResult(text="<summary>where things stand</summary>", backend=self.name)


def whatif_compacting_early() -> tuple[Any, dict[str, Any], RecordingSummarizer]:
    """The 0.58 fixture replayed what-if with compaction at 4 % of the window: the session,
    the result and the summarizer that saw the requests."""
    session = engine.load_session(FIXTURES / "v0_58_calls.jsonl")
    config, preset = engine.resolve_config(
        "auto",
        {"autocompact_pct_override": 4.0},
        agent=session.agent,
        recorded_window=session.context_window,
    )
    summarizer = RecordingSummarizer()
    data = engine.replay(
        session, config, mode="whatif", preset_name=preset, summarizer=summarizer
    ).to_json()
    return session, data, summarizer


def test_a_whatif_compaction_of_a_codex_session_asks_for_a_codex_style_hand_off():
    _, data, summarizer = whatif_compacting_early()
    assert data["summary"]["compactions"] >= 1
    compactions = [r for r in summarizer.requests if r.kind == "codex_compact"]
    assert compactions
    assert "hand-off note" in compactions[0].prompt
    assert "Primary Request and Intent" not in compactions[0].prompt  # Claude Code's sections


def test_a_whatif_sets_aside_the_history_a_recorded_compaction_sent_again():
    # Codex's compaction sends the kept user prompts again after its summary: copies of
    # earlier history. A what-if has the originals, so the copies are hidden with the summary
    def last_raw(session: Any) -> int:
        config, preset = engine.resolve_config(
            "auto",
            {"autocompact_enabled": False},
            agent=session.agent,
            recorded_window=session.context_window,
        )
        data = engine.replay(session, config, mode="whatif", preset_name=preset).to_json()
        return int(data["requests"][-1]["raw_tokens"])

    session = engine.load_session(FIXTURES / "v0_46_local_compaction_cut.jsonl")
    copies = [m for m in session.main.messages if m.metadata.get("compaction_kept")]
    assert [m.kind for m in copies] == ["prompt"]
    originals = [m for m in session.main.messages[: copies[0].index] if m.kind == "prompt"]
    assert [m.blocks[0].text for m in originals] == [m.blocks[0].text for m in copies]
    counted_twice = engine.load_session(FIXTURES / "v0_46_local_compaction_cut.jsonl")
    for message in counted_twice.main.messages:
        message.metadata.pop("compaction_kept", None)
    copy_tokens = engine.TiktokenCounter().count(copies[0].blocks[0].text)
    assert 0 < copy_tokens <= last_raw(counted_twice) - last_raw(session) <= copy_tokens + 8


def test_a_whatif_reusing_a_local_compaction_keeps_what_the_recording_kept():
    # compacting where the recording did, the what-if's context is the recorded one: the
    # summary, the prompts Codex kept, then what came after them
    session = engine.load_session(FIXTURES / "v0_46_local_compaction_cut.jsonl")
    config, preset = engine.resolve_session_config(session)
    recorded = engine.replay(session, config, mode="recorded", preset_name=preset).to_json()
    whatif = engine.replay(session, config, mode="whatif", preset_name=preset).to_json()
    events = [e for r in whatif["requests"] for e in r["events"] if e["step"] == "autocompact"]
    assert [e["summary_reused"] for e in events] == [True]
    for mine, theirs in zip(whatif["requests"], recorded["requests"], strict=True):
        assert mine["raw_tokens"] == theirs["raw_tokens"]
        assert mine["model_tokens"] == theirs["model_tokens"]


def test_a_new_whatif_compaction_of_a_codex_session_keeps_its_newest_prompts_and_no_file():
    session, data, _ = whatif_compacting_early()
    events = [
        e
        for r in data["requests"]
        for e in r["events"]
        if e["step"] == "autocompact" and e["action"] == "compacted"
    ]
    assert events
    prompts = {f"m:{m.index}" for m in session.main.messages if m.kind == "prompt"}
    for request in data["requests"]:
        head = request["view"]["head"]
        if head and head[0].startswith("s:"):
            assert set(head[1:]) <= prompts  # the summary, then kept prompts only
            assert head[1:], "a Codex compaction keeps the newest user prompts"
    assert all(e["restored_files"] == [] and not e["modeled_restoration"] for e in events)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_FIELDS = st.sampled_from(
    [
        "type",
        "message",
        "replacement_history",
        "info",
        "content",
        "role",
        "call_id",
        "output",
        "encrypted_content",
        "summary",
        "model",
        "cli_version",
        "total_token_usage",
        "last_token_usage",
        "input_tokens",
        "model_context_window",
        "name",
        "arguments",
    ]
)
_PAYLOAD = st.dictionaries(
    _FIELDS,
    _JSON
    | st.sampled_from(
        [
            "message",
            "reasoning",
            "function_call",
            "function_call_output",
            "token_count",
            "compaction",
            "user",
            "assistant",
            "developer",
        ]
    ),
    max_size=6,
)
_RECORD = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["session_meta", "turn_context", "response_item", "event_msg", "compacted"]
        ),
        "payload": _PAYLOAD,
    }
)


@pytest.mark.slow
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(records=st.lists(_RECORD, min_size=1, max_size=12))
def test_any_rollout_shaped_input_loads_or_says_why(tmp_path, records):
    path = tmp_path / "fuzz.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    try:
        session = engine.load_session(path)
    except engine.TranscriptError:
        return
    assert session.agent == "codex"
    config, preset = engine.resolve_config("auto", agent="codex")
    engine.replay(session, config, mode="recorded", preset_name=preset)


def test_the_adapter_hands_message_and_call_fields_over_in_their_order():
    """The Codex adapter makes its ``Message``, ``Item``, ``Block``, ``CallFigures`` and
    ``Usage`` objects with positional arguments (keywords cost a third to half of each call,
    made per item): their fields must stay in the order those calls hand them over."""
    import inspect
    from dataclasses import fields

    from contextlab.engine.input.model import Block, Message, Usage
    from contextlab.engine.input.sources.codex.calls import CallFigures
    from contextlab.engine.input.sources.codex.items import Item

    assert [f.name for f in fields(Item)] == [
        "side",
        "blocks",
        "injected",
        "opaque_bytes",
        "unknown_parts",
    ]
    assert [f.name for f in fields(Usage)][:4] == ["input", "cache_write", "cache_read", "output"]
    assert list(inspect.signature(Block).parameters)[:4] == [
        "type",
        "text",
        "tool_use_id",
        "tool_name",
    ]

    assert Message._FIELDS[:14] == (
        "uuid",
        "role",
        "kind",
        "blocks",
        "timestamp",
        "line",
        "file",
        "message_id",
        "request_id",
        "model",
        "usage",
        "version",
        "cwd",
        "is_meta",
    )
    assert [f.name for f in fields(CallFigures)] == [
        "line",
        "timestamp",
        "input",
        "cached",
        "output",
        "reasoning",
        "total",
        "window",
        "cumulative",
        "jump",
    ]
