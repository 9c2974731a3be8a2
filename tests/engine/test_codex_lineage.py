"""Forked and subagent Codex rollouts copy their parent's history: it is context, never counted
again; and a model switch mid-rollout is priced per request. Fixtures written for ContextLab
(tests/fixtures/codex/, figures invented, shapes as docs/codex-provenance.md lists)."""

from __future__ import annotations

import itertools
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.input.loading import TranscriptFile, Upload
from contextlab.engine.input.sources.codex.lineage import Parent, parent_of
from contextlab.engine.input.sources.registry import build_session
from contextlab.engine.measures.cost import load_pricing

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex" / "lineage"
FORK = FIXTURES / "v0_98_fork_model_switch.jsonl"
PARENT = FIXTURES / "v0_98_fork_parent.jsonl"
SUBAGENT = FIXTURES / "v0_128_subagent.jsonl"
KEYS = ("input_tokens", "cached_input_tokens", "output_tokens")


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def counts(path: Path) -> list[dict[str, Any]]:
    """The ``token_count`` infos of a rollout with a call's figures (not repeats), in order."""
    out = []
    for record in records(path):
        payload = record["payload"]
        if record["type"] == "event_msg" and payload.get("type") == "token_count":
            info = payload.get("info")
            if info and info.get("last_token_usage"):
                out.append(info)
    return out


def own_calls(session: Any) -> list[Any]:
    return [m for m in session.main.messages if m.role == "assistant" and m.usage]


def parent_records(path: Path) -> int:
    """How many records after ``session_meta`` the parent's history is: written in the burst
    at the fork (this reads the fixture's times, independently of the adapter)."""
    times = [r["timestamp"] for r in records(path)]
    seconds = [datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in times]
    n = 0
    for before, now in itertools.pairwise(seconds):
        if now - before > 0.3:
            break
        n += 1
    return n


def test_parent_of_reads_forks_and_subagents_and_ignores_odd_fields():
    assert parent_of({"forked_from_id": "p1"}) == Parent("fork", "p1")
    assert parent_of({"forked_from": {"id": "p2"}}) == Parent("fork", "p2")
    spawn = {"subagent": {"thread_spawn": {"parent_thread_id": "root", "depth": 1}}}
    assert parent_of({"source": spawn}) == Parent("subagent", "root")
    assert parent_of({"source": {"subagent": "review"}}) == Parent("subagent", None)
    assert parent_of({"thread_source": "subagent"}) == Parent("subagent", None)
    for ordinary in ({}, {"source": "cli"}, {"forked_from_id": 7}, {"source": ["subagent"]}):
        assert parent_of(ordinary) is None


@pytest.mark.parametrize("path", [FORK, SUBAGENT], ids=lambda p: p.name)
def test_a_childs_copied_history_is_context_and_its_counts_are_not_calls(path):
    session = engine.load_session(path)
    all_counts = counts(path)
    copied = parent_records(path)
    copied_counts = sum(
        1
        for r in records(path)[1 : copied + 1]
        if r["payload"].get("type") == "token_count" and r["payload"]["info"]["last_token_usage"]
    )
    assert copied_counts >= 2
    calls = own_calls(session)
    # one call per count after the copy, with that count's own figures
    assert len(calls) == len(all_counts) - copied_counts
    for call, info in zip(calls, all_counts[copied_counts:], strict=True):
        last = info["last_token_usage"]
        assert call.usage.prompt_total == last["input_tokens"]
        assert call.usage.cache_read == last["cached_input_tokens"]
        assert call.usage.output == last["output_tokens"]
    # the copied items are in the context the calls were sent, marked, as history
    history = [m for m in session.main.messages if "copied_from_parent" in m.metadata]
    assert history
    assert all(m.role == "user" and m.kind == "meta" for m in history)
    assert all(b.type not in ("tool_use", "tool_result") for m in history for b in m.blocks)
    first_call = session.main.messages.index(calls[0])
    assert all(session.main.messages.index(m) < first_call for m in history)
    [note] = [p for p in session.problems if p.code == "copied_parent_history"]
    assert f"{copied_counts} token count(s)" in note.message


@pytest.mark.parametrize("path", [FORK, SUBAGENT], ids=lambda p: p.name)
def test_a_childs_totals_leave_out_what_its_cumulative_figures_carried_from_the_parent(path):
    session = engine.load_session(path)
    final = counts(path)[-1]["total_token_usage"]
    calls = own_calls(session)
    summed = {
        "input_tokens": sum(c.usage.prompt_total for c in calls),
        "cached_input_tokens": sum(c.usage.cache_read for c in calls),
        "output_tokens": sum(c.usage.output for c in calls),
    }
    totals, carried = session.side.recorded_totals, session.side.recorded_carried
    assert totals is not None
    assert carried is not None
    for key in KEYS:
        assert totals[key] == summed[key]
        assert totals[key] + carried[key] == final[key]
        assert carried[key] > 0  # the parent's usage is in the file's cumulative figures
    assert not [p for p in session.problems if p.code == "usage_gap"]


def test_without_its_parent_named_the_copy_would_be_counted_twice(tmp_path):
    """The same file with the fork's mark taken out of ``session_meta``: its copied counts
    become calls and its totals the file's (what the detection prevents)."""
    lines = FORK.read_text().splitlines()
    meta = json.loads(lines[0])
    del meta["payload"]["forked_from_id"]
    plain = tmp_path / "rollout-plain.jsonl"
    plain.write_text("\n".join([json.dumps(meta), *lines[1:]]) + "\n")
    forked, unmarked = engine.load_session(FORK), engine.load_session(plain)
    assert len(own_calls(unmarked)) == len(own_calls(forked)) + 2
    assert unmarked.side.recorded_totals == counts(FORK)[-1]["total_token_usage"]
    assert any(p.code == "totals_carried_in" for p in unmarked.problems)


def test_with_the_parent_in_the_upload_the_copy_is_the_items_they_share(tmp_path):
    """The child's copied records spread over seconds (no burst to go by): the parent rollout
    in the same upload says where the copy ends."""
    lines = FORK.read_text().splitlines()
    copied = parent_records(FORK)
    slow = []
    for n, line in enumerate(lines):
        record = json.loads(line)
        if 1 <= n <= copied:
            record["timestamp"] = f"2026-03-02T10:00:{n:02d}.000Z"
        slow.append(json.dumps(record))
    child = tmp_path / "child.jsonl"
    child.write_text("\n".join(slow) + "\n")

    def upload(siblings: list[Path]) -> Upload:
        return Upload(
            name="child.jsonl",
            main=TranscriptFile(name="child.jsonl", opener=lambda: open(child, "rb")),
            siblings=[
                TranscriptFile(name=p.name, opener=lambda p=p: open(p, "rb")) for p in siblings
            ],
        )

    with_parent = build_session(upload([PARENT]))
    alone = build_session(upload([]))
    assert len(own_calls(with_parent)) == len(own_calls(engine.load_session(FORK)))
    assert len(own_calls(alone)) > len(own_calls(with_parent))  # no burst, no parent: counted
    note = next(p for p in with_parent.problems if p.code == "copied_parent_history")
    assert "shares with the parent rollout" in note.message


def test_a_model_switch_mid_rollout_is_priced_per_request():
    session = engine.load_session(FORK)
    models = [m.model for m in own_calls(session)]
    assert models == ["gpt-5.1-codex", "gpt-5.1-codex", "gpt-5.1-codex-mini"]
    pricing = load_pricing()
    big, _, big_fallback = pricing.price_for(models[0])
    small, _, small_fallback = pricing.price_for(models[-1])
    assert not big_fallback
    assert not small_fallback
    assert small.input < big.input
    assert small.output < big.output
    config, preset = engine.resolve_config("auto", recorded_window=session.context_window)
    rows = engine.replay(session, config, mode="recorded", preset_name=preset).to_json()["requests"]
    assert [r["model"] for r in rows] == models
    for row, call in zip(rows, own_calls(session), strict=True):
        price, _, _ = pricing.price_for(call.model)
        u = call.usage
        expected = price.cost(
            uncached=u.input,
            cache_read=u.cache_read,
            cache_write_5m=0,
            cache_write_1h=0,
            output=u.output,
        )
        assert row["recorded_cost_usd"] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    ("model", "rates"),
    [
        ("gpt-5-codex", (1.25, 0.125, 10.0)),
        ("gpt-5.1", (1.25, 0.125, 10.0)),
        ("gpt-5-mini", (0.25, 0.025, 2.0)),
        ("gpt-5-codex-mini", (0.25, 0.025, 2.0)),
        ("gpt-5-nano", (0.05, 0.005, 0.40)),
        ("codex-mini-latest", (1.50, 0.375, 6.0)),
        ("gpt-5.2-codex", (1.75, 0.175, 14.0)),
        ("gpt-5.4", (2.50, 0.25, 15.0)),
        ("gpt-5.4-mini", (0.75, 0.075, 4.50)),
        ("gpt-5.4-nano", (0.20, 0.02, 1.25)),
        ("gpt-5.5", (5.0, 0.50, 30.0)),
    ],
)
def test_gpt5_family_models_get_their_own_rates_with_a_source(model, rates):
    price, _, fallback = load_pricing().price_for(model)
    assert not fallback
    assert (price.input, price.cache_read, price.output) == rates
    assert "verified" in price.source
    assert "https://" in price.source


def test_the_parents_session_meta_copied_into_a_fork_changes_nothing(tmp_path):
    """A fork writes its parent's ``session_meta`` again among the records it copies (as other
    projects' tests of later versions show): the first one stays the rollout's, its version
    and its parent included."""
    lines = FORK.read_text().splitlines()
    parent_meta = json.loads(PARENT.read_text().splitlines()[0])
    parent_meta["timestamp"] = "2026-03-02T10:00:00.001Z"
    parent_meta["payload"]["cli_version"] = "0.94.0"
    parent_meta["payload"]["forked_from_id"] = "0199a0d0-grandparent-7000-8000-000000000001"
    copied = tmp_path / "rollout-fork-with-parent-meta.jsonl"
    copied.write_text("\n".join([lines[0], json.dumps(parent_meta), *lines[1:]]) + "\n")
    forked, again = engine.load_session(FORK), engine.load_session(copied)
    assert again.version == forked.version == "0.98.0"
    assert again.session_id == forked.session_id
    assert again.side.recorded_totals == forked.side.recorded_totals
    assert [m.usage for m in own_calls(again)] == [m.usage for m in own_calls(forked)]
    notes = [p.message for p in again.problems if "forked from" in p.message]
    assert notes
    assert "0199a0e0-parent" in notes[0]
