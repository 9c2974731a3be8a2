"""Cache misses the recording shows and nothing in the transcript explains (issue #9, cost).

Claude Code's own break detector calls a drop in the cache read with no client-side change
"likely server-side". The replay takes such a drop from the recorded usage (the cache model
cannot predict the server evicting an entry), prices the request as it was billed, keeps the
model's own estimate beside it for the accuracy figures, and meets the same miss at the same
request in a what-if replay. Each test writes the usage of a small synthetic transcript: every
request reads what the one before it left and writes the rest, except where the test says.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.measures.cost import load_pricing, request_cost
from contextlab.engine.results.evaluation import cache_accuracy
from tests.engine.builders import TranscriptBuilder
from tests.engine.test_anchors import PREFIX, RATIO, conversation, plain_replay

#: the part before the system breakpoint: what a server-side miss still reads
SYSTEM = 12_000


def with_cache_usage(
    tmp_path: Path,
    *,
    drop_at: int | None,
    drop_to: int = SYSTEM,
    builder: TranscriptBuilder | None = None,
    first_read: int = SYSTEM,
    reads: dict[int, int] | None = None,
    ttl: str = "1h",
) -> Path:
    """Usage where request ``drop_at`` reads only ``drop_to`` tokens (None: no drop), the
    first request ``first_read`` and request k ``reads[k]``; every write with ``ttl``."""
    b = builder or conversation(10)
    path = b.write(tmp_path / "draft.jsonl")
    rows = plain_replay(path).to_json()["requests"]
    totals = {r["message_id"]: round(PREFIX + RATIO * r["raw_tokens"]) for r in rows}
    order = [r["message_id"] for r in rows]
    fixed = {**(reads or {}), **({} if drop_at is None else {drop_at: drop_to})}
    previous = first_read
    for rec in b.records:
        message = rec.get("message") or {}
        if rec["type"] != "assistant" or message.get("id") not in totals:
            continue
        k = order.index(message["id"])
        total = totals[message["id"]]
        read = fixed.get(k, min(previous, total - 3))
        written = total - 3 - read
        message["usage"] = {
            "input_tokens": 3,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written if ttl == "5m" else 0,
                "ephemeral_1h_input_tokens": 0 if ttl == "5m" else written,
            },
            "output_tokens": 40,
        }
        previous = total - 3
    return b.write(tmp_path / "session.jsonl")


def replayed(
    path: Path, mode: str = "recorded", **overrides: Any
) -> tuple[engine.ReplayResult, dict[str, Any]]:
    session = engine.load_session(str(path))
    config = engine.get_preset("claude-code-2.1.88").replace(**overrides)
    result = engine.replay(session, config, mode=mode)
    return result, result.to_json()


def billed(row: dict[str, Any]) -> float:
    rec = row["recorded"]
    return request_cost(
        row["model"],
        uncached=rec["input"],
        cache_read=rec["cache_read"],
        cache_write_5m=0,
        cache_write_1h=rec["cache_write"],
        output=rec["output"],
        pricing=load_pricing(),
    )


def test_a_drop_with_nothing_changed_is_a_server_side_miss_priced_as_billed(tmp_path):
    result, data = replayed(with_cache_usage(tmp_path, drop_at=6))
    rows = data["requests"]
    miss = rows[6]["cache_estimate"]
    assert miss["reason"] == "server_miss"
    assert miss["read"] == SYSTEM
    # the model expected the whole previous prompt: what it would have read is kept
    assert miss["server_miss_tokens"] > 10_000
    assert miss["read"] + miss["server_miss_tokens"] > rows[5]["cache_estimate"]["read"]
    assert "server" in miss["detail"]
    assert rows[6]["cost_estimate_usd"] == pytest.approx(billed(rows[6]), abs=1e-4)
    # the requests around it are plain hits, untouched
    assert all(r["cache_estimate"]["server_miss_tokens"] == 0 for k, r in enumerate(rows) if k != 6)
    assert rows[7]["cache_estimate"]["reason"] == "hit"
    # the accuracy figures judge the model's own estimate: it predicted a hit there
    accuracy = cache_accuracy(result)
    recorded_misses, predicted_misses, found = accuracy["counts"]
    assert recorded_misses == 1
    assert predicted_misses == found == 0


def test_without_a_drop_nothing_is_taken_from_the_recording(tmp_path):
    _, data = replayed(with_cache_usage(tmp_path, drop_at=None))
    assert all(r["cache_estimate"]["reason"] != "server_miss" for r in data["requests"])
    assert all(r["cache_estimate"]["server_miss_tokens"] == 0 for r in data["requests"])


def test_a_drop_under_the_break_threshold_is_not_a_miss(tmp_path):
    # a read 1,000 tokens short of the previous one: under Claude Code's 2,000-token minimum
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    path = with_cache_usage(tmp_path / "a", drop_at=None)
    _, plain = replayed(path)
    small = plain["requests"][6]["recorded"]["cache_read"] - 1_000
    _, data = replayed(with_cache_usage(tmp_path / "b", drop_at=6, drop_to=small))
    assert data["requests"][6]["cache_estimate"]["reason"] == "hit"
    assert data["requests"][6]["cache_estimate"]["server_miss_tokens"] == 0


def test_the_setting_off_leaves_the_cache_model_alone(tmp_path):
    path = with_cache_usage(tmp_path, drop_at=6)
    _, on = replayed(path)
    _, off = replayed(path, cache_recorded_server_misses=False)
    row = off["requests"][6]
    assert row["cache_estimate"]["reason"] == "hit"
    assert row["cache_estimate"]["server_miss_tokens"] == 0
    assert row["cache_estimate"]["read"] == (
        on["requests"][6]["cache_estimate"]["read"]
        + on["requests"][6]["cache_estimate"]["server_miss_tokens"]
    )
    # the miss costs: writing the prompt again is dearer than reading it
    assert row["cost_estimate_usd"] < on["requests"][6]["cost_estimate_usd"]


def test_a_whatif_replay_meets_the_same_miss_at_the_same_request(tmp_path):
    path = with_cache_usage(tmp_path, drop_at=6)
    _, recorded = replayed(path)
    _, whatif = replayed(path, "whatif")
    rec_row, wi_row = recorded["requests"][6], whatif["requests"][6]
    assert wi_row["cache_estimate"]["reason"] == "server_miss"
    assert wi_row["cache_estimate"]["read"] == rec_row["cache_estimate"]["read"]
    assert [r["cost_estimate_usd"] for r in whatif["requests"]] == [
        r["cost_estimate_usd"] for r in recorded["requests"]
    ]


def test_a_drop_after_the_cache_expired_is_the_ttl_not_the_server(tmp_path):
    # two hours between requests 5 and 6: the entry had expired, the model knows why
    b = conversation(10)
    path = b.write(tmp_path / "draft.jsonl")
    rows = plain_replay(path).to_json()["requests"]
    moved = rows[6]["line"]
    for i, rec in enumerate(b.records):
        if i + 1 >= moved - 2 and rec.get("timestamp"):
            stamp = datetime.fromisoformat(rec["timestamp"].replace("Z", "+00:00"))
            rec["timestamp"] = (stamp + timedelta(hours=2)).isoformat().replace("+00:00", "Z")
    _, data = replayed(with_cache_usage(tmp_path, drop_at=6, builder=b))
    assert data["requests"][6]["cache_estimate"]["reason"] == "ttl_expired"
    assert data["requests"][6]["cache_estimate"]["server_miss_tokens"] == 0
