"""The session's own system-prompt entry, as long as the recording showed it (issue #20).

Claude Code marks the system prompt at one or two cache breakpoints; a request whose messages
changed (a compaction) while the thread's entries were alive reads back up to the last of them.
The cache model does not know where that breakpoint sits in the unseen prefix, but a recorded
read that broke off inside the prefix shows it, and later requests read that much back. Each
test writes a small session: a warm start reading ``WARM`` tokens, a recorded break to
``LEVEL`` tokens at request 4, then a compaction or a long pause before request 12.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contextlab import engine
from tests.engine.builders import TranscriptBuilder
from tests.engine.test_anchors import PREFIX
from tests.engine.test_server_misses import with_cache_usage

#: what the first request found warm (other sessions' entry), and the session's own level
WARM = 12_000
LEVEL = 16_000
#: the requests of the recorded break and of the change after it
BREAK_AT = 4
CHANGED_AT = 12


def turn(b: TranscriptBuilder, n: int, *, seconds: float = 30.0) -> None:
    b.prompt(f"step {n}: look at module {n} and tell me what it does", seconds=seconds)
    b.tool_call(
        "Read",
        {"file_path": f"/src/module{n}.py"},
        "".join(f"def function_{n}_{i}(value):\n    return value * {i}\n" for i in range(150)),
    )
    b.assistant([{"type": "text", "text": f"module {n} multiplies values " * 20}])


def session(tmp_path: Path, *, change: str, break_to: int | None = LEVEL, ttl: str = "1h") -> Path:
    """Eight turns (two requests each) with ``change`` ("compaction" or "pause") before the
    seventh; request ``BREAK_AT`` reads only ``break_to`` (None: no break)."""
    b = TranscriptBuilder()
    for n in range(8):
        if n == 6 and change == "compaction":
            b.compact("Summary: modules 0-5 multiply values.", pre_tokens=40_000, trigger="manual")
        turn(b, n, seconds=20 * 60 if n == 6 and change == "pause" else 30.0)
    return with_cache_usage(
        tmp_path,
        drop_at=None if break_to is None else BREAK_AT,
        drop_to=break_to or 0,
        builder=b,
        first_read=WARM,
        reads={CHANGED_AT: LEVEL if change == "compaction" else WARM},
        ttl=ttl,
    )


def estimates(path: Path, mode: str = "recorded") -> list[dict[str, Any]]:
    config = engine.get_preset("claude-code-2.1.88")
    result = engine.replay(engine.load_session(str(path)), config, mode=mode)
    return [r["cache_estimate"] for r in result.to_json()["requests"]]


def test_after_a_compaction_the_session_level_a_break_showed_is_read_back(tmp_path):
    rows = estimates(session(tmp_path, change="compaction"))
    assert rows[BREAK_AT]["reason"] == "server_miss"
    after = rows[CHANGED_AT]
    assert after["reason"] == "prefix_changed"
    assert after["read"] == LEVEL
    assert after["write"] > 0
    assert "system-prompt entry" in after["detail"]


def test_without_a_recorded_break_the_modeled_level_stays(tmp_path):
    after = estimates(session(tmp_path, change="compaction", break_to=None))[CHANGED_AT]
    assert after["reason"] == "prefix_changed"
    # the first request's warm read bounds the modeled system part
    assert 0 < after["read"] <= WARM


def test_a_break_into_the_messages_is_no_system_level(tmp_path):
    # a read that stops past the unseen prefix ended at an earlier message's entry
    rows = estimates(session(tmp_path, change="compaction", break_to=PREFIX + 4_000))
    assert rows[CHANGED_AT]["read"] <= WARM


def test_after_a_ttl_expiry_only_what_other_sessions_keep_warm_is_read(tmp_path):
    after = estimates(session(tmp_path, change="pause", ttl="5m"))[CHANGED_AT]
    assert after["reason"] == "ttl_expired"
    assert 0 < after["read"] <= WARM


def test_a_what_if_replay_reads_the_same_level(tmp_path):
    path = session(tmp_path, change="compaction")
    assert estimates(path, "whatif")[CHANGED_AT]["read"] == LEVEL
