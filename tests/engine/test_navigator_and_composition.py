"""The explorer's engine side: navigator events and sentences, and the prompt composition,
checked against the replay's own figures (a what-if replay with an early autocompact)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.measures.content_kinds import KIND_LABELS
from contextlab.engine.results import navigator

FIXTURE = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl"
)


@cache
def _replay() -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    session = engine.load_session(str(FIXTURE))
    config, preset = engine.resolve_config(
        "auto", {"autocompact_pct_override": 20}, version=session.version
    )
    result = engine.replay(
        session, config, mode="whatif", preset_name=preset, summarizer=engine.ExtractiveSummarizer()
    ).to_json()
    return result, engine.expand_messages(engine.messages_json(session))


def test_every_compaction_and_cache_miss_is_an_event_in_request_order():
    result, _ = _replay()
    requests = result["requests"]
    events = engine.request_events(requests)
    assert [e["request"] for e in events] == sorted(e["request"] for e in events)
    compactions = {e["request"] for e in events if e["kind"] == "compaction"}
    assert compactions == set(result["summary"]["compaction_requests"])
    misses = {e["request"] for e in events if e["kind"] == "cache_miss"}
    assert misses == {
        i for i, r in enumerate(requests) if r["cache"]["reason"] in navigator.MISS_REASONS
    }
    counts = {k["kind"]: k["count"] for k in engine.event_counts(events)}
    assert counts["compaction"] == len(compactions)
    assert list(counts) == [k for k in engine.EVENT_KINDS if k in counts]
    # sentences, not reprs
    assert all("{" not in e["text"] and "'" not in e["text"][:1] for e in events)


def test_a_miss_after_a_compaction_is_priced_and_explained():
    result, _ = _replay()
    requests = result["requests"]
    i = next(i for i, r in enumerate(requests) if i and r["cache"]["reason"] == "prefix_changed")
    cost = navigator.miss_cost(requests[i], requests[i - 1])
    assert cost > 0
    sentence = engine.cache_sentence(requests[i], requests[i - 1])
    # no usage recorded there: the miss is the cache model's, and labelled an estimate
    assert requests[i]["cache"]["source"] == "estimate"
    assert sentence.startswith(
        f"Cache miss (estimated), ${cost:.2f}: the start of the prompt changed"
    )


def test_an_expired_entry_names_the_pause():
    row = {
        "cache": {"reason": "ttl_expired", "read": 0, "write": 5000, "uncached": 0},
        "ttl": "5m",
        "model": "claude-sonnet-4-5",
    }
    before = {"cache": {"reason": "hit", "read": 4000, "write": 500, "uncached": 0}}
    text = engine.cache_sentence(row, before, 423.0)
    assert "7 min 3 s since the previous request" in text
    assert "(5 minutes)" in text
    # 4,500 tokens could have been read: written at the 5-minute write rate instead
    price, _, _ = engine.load_pricing().price_for("claude-sonnet-4-5")
    expected = 4500 * (price.cache_write_5m - price.cache_read) / 1e6
    assert navigator.miss_cost(row, before) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("seconds", "text"), [(45, "45 s"), (423, "7 min 3 s"), (7500, "2 h 5 min"), (3 * 86400, "3 d")]
)
def test_durations_read_as_units(seconds, text):
    assert engine.format_duration(seconds) == text


def test_gaps_are_per_thread():
    rows = [
        {"thread": "main", "timestamp": "2026-01-01T00:00:00Z"},
        {"thread": "main", "timestamp": "2026-01-01T00:01:30Z"},
        {"thread": "agent", "timestamp": "2026-01-01T00:02:00Z"},
    ]
    assert engine.gaps(rows) == [None, 90.0, None]


def _composition(i: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    result, messages = _replay()
    req = result["requests"][i]
    view = engine.side_by_side(messages["main"], result, req["index"])
    cal = result["session"]["calibration"]
    previous = result["requests"][i - 1] if i else None
    compacted = i in result["summary"]["compaction_requests"]
    comp = engine.compose(
        view["rows"],
        messages["main"],
        model_tokens=req["model_tokens"],
        prefix_tokens=cal["prefix_tokens"],
        ratio=cal["ratio"],
        replaced_from=previous["view"]["start"] if compacted and previous else None,
    )
    return req, view, comp


@pytest.mark.parametrize("i", [0, 1, 5, 20, 65])
def test_the_parts_add_up_to_what_the_model_saw(i):
    req, view, comp = _composition(i)
    result, _ = _replay()
    assert abs(comp["total"] - req["model_tokens"]) <= len(comp["parts"])
    system = comp["parts"][0]
    assert system["kind"] == "system + tools (estimated)"
    assert system["estimated"]
    assert system["tokens"] == min(
        result["session"]["calibration"]["prefix_tokens"], req["model_tokens"]
    )
    assert len(comp["row_tokens"]) == len(view["rows"])
    # every row the model saw has a count; rows it did not see have none on the model side
    for row, tokens in zip(view["rows"], comp["row_tokens"], strict=True):
        assert (tokens["model"] is None) == (row["model"] is None)
    assert [h["tokens"] for h in comp["heaviest"]] == sorted(
        (h["tokens"] for h in comp["heaviest"]), reverse=True
    )


def test_a_compaction_says_what_it_removed_by_kind():
    result, _ = _replay()
    i = result["summary"]["compaction_requests"][1]
    _, _, comp = _composition(i)
    assert comp["removed_total"] > 0
    assert comp["removed_total"] == pytest.approx(
        sum(r["tokens"] for r in comp["removed"]), abs=len(comp["removed"])
    )
    assert {"summarized"} <= {layer["badge"] for layer in comp["layers"]}
    assert any(
        r["kind"].startswith("tool results") or r["kind"] == "assistant text"
        for r in comp["removed"]
    )
    assert any(p["kind"] == "summaries" for p in comp["parts"])


@pytest.mark.parametrize("i", [1, 20, 65])
def test_the_content_kinds_add_up_to_the_messages_the_model_saw(i):
    _, view, comp = _composition(i)
    content = comp["content"]
    assert content, "a request with messages holds some kind of content"
    messages = sum(p["tokens"] for p in comp["parts"] if not p["estimated"])
    assert abs(sum(c["tokens"] for c in content) - messages) <= len(content) + len(comp["parts"])
    assert sum(c["share"] for c in content) == pytest.approx(1.0)
    assert [c["tokens"] for c in content] == sorted((c["tokens"] for c in content), reverse=True)
    kinds = {c["kind"] for c in content}
    assert kinds <= set(KIND_LABELS)
    # the tool calls the model saw are JSON ("Name{...}"), and they are in the view
    if any(r["model"] and r["model"].get("type") == "tool_use" for r in view["rows"]):
        assert "json" in kinds
    assert all(c["label"] == KIND_LABELS[c["kind"]] for c in content)
