"""A session whose recording never touched the prompt cache is replayed without one.

``DISABLE_PROMPT_CACHING`` (or a provider without prompt caching) sends no cache markers: every
response's usage reads and writes nothing. The cache model must not invent cache hits there,
which would price the session at a tenth of what it cost.
"""

from __future__ import annotations

from pathlib import Path

from contextlab import engine
from tests.engine.builders import TranscriptBuilder


def uncached_session(tmp_path: Path, responses: int) -> Path:
    b = TranscriptBuilder()
    total = 20_000
    for n in range(responses):
        b.prompt(f"question {n} about the parser")
        total += 900
        b.assistant(
            [{"type": "text", "text": f"answer {n}: the parser reads one record a line " * 8}],
            usage={
                "input_tokens": total,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
                "output_tokens": 60,
            },
        )
    return b.write(tmp_path / f"uncached-{responses}.jsonl")


def test_a_recording_without_cache_reads_or_writes_is_replayed_uncached(tmp_path: Path):
    session = engine.load_session(str(uncached_session(tmp_path, 6)))
    config = engine.get_preset("claude-code-2.1.88")
    for mode in ("recorded", "whatif"):
        result = engine.replay(session, config, mode=mode).to_json()
        rows = result["requests"]
        assert {r["cache"]["reason"] for r in rows} == {"caching_off"}
        assert all(r["cache"]["read"] == r["cache"]["write"] == 0 for r in rows)
        assert all(r["cache"]["uncached"] == r["model_tokens"] for r in rows)
        assert not [e for r in rows for e in r["events"] if e["step"] == "cache_miss"]
    recorded = engine.replay(session, config, mode="recorded").to_json()["summary"]
    # the estimate (``cost_usd`` of a recorded replay is the recorded usage itself)
    assert (
        abs(recorded["estimate"]["cost_usd"] - recorded["recorded_cost_usd"])
        < 0.02 * recorded["recorded_cost_usd"]
    )
    assert recorded["cost_usd"] == recorded["recorded_cost_usd"]


def test_two_uncached_requests_are_not_enough_to_say_caching_was_off(tmp_path: Path):
    # a short session that simply never reached the minimum cacheable length looks the same
    session = engine.load_session(str(uncached_session(tmp_path, 2)))
    rows = engine.replay(session, engine.get_preset("claude-code-2.1.88")).to_json()["requests"]
    assert "caching_off" not in {r["cache"]["reason"] for r in rows}
