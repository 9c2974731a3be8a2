"""Checks every real transcript must pass, whatever the engine's accuracy: used on the whole
corpus (``test_corpus.py``) and on the committed fixtures (``test_fixtures_golden.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextlab import engine


def auto_config(session: engine.Session) -> tuple[engine.PipelineConfig, str]:
    """``auto`` with the session's own evidence (version, largest prompt, recorded automatic
    compactions), as a run of the web app resolves it."""
    return engine.resolve_config(
        "auto",
        version=session.version,
        max_recorded_prompt=session.max_recorded_prompt,
        recorded_auto_compactions=session.recorded_auto_compactions,
    )


def replay_json(path: Path, mode: str) -> dict[str, Any]:
    """A fresh parse and replay under the ``auto`` preset, as the web app's first run does."""
    session = engine.load_session(str(path))
    config, preset = auto_config(session)
    return engine.replay(session, config, mode=mode, preset_name=preset).to_json()


def stored(data: Any) -> Any:
    """What the database gives back: strict JSON (no NaN or infinity), decoded again."""
    return json.loads(json.dumps(data, allow_nan=False))


def assert_replay_invariants(
    path: Path, earlier: Callable[[str], dict[str, Any]] | None = None
) -> None:
    """Both modes replay without an exception, a second replay gives the same JSON, the JSON
    survives storage unchanged, and the request explorer can be built from the stored messages
    and result for every request. ``earlier(mode)`` gives a replay already made (a cache)."""
    session = engine.load_session(str(path))
    assert not [p for p in session.problems if p.severity == "error"]
    messages = engine.expand_messages(stored(engine.messages_json(session)))
    for mode in ("recorded", "whatif"):
        first = earlier(mode) if earlier else replay_json(path, mode)
        assert first["requests"], f"{mode}: no requests"
        again = replay_json(path, mode)
        assert first == again, f"{mode}: a second replay gave another result"
        data = stored(first)
        assert data == first, f"{mode}: the result changes when stored as JSON"
        for request in data["requests"]:
            view = engine.side_by_side(messages[request["thread"]], data, request["index"])
            assert view["end"] <= len(messages[request["thread"]]), (mode, request["index"])
            assert view["rows"], f"{mode}: request {request['index']} shows no rows"


def first_view_mismatch(recorded: engine.ReplayResult, whatif: engine.ReplayResult) -> int | None:
    """The first request whose what-if view differs in size from the recorded one, if any."""
    rows = zip(recorded.to_json()["requests"], whatif.to_json()["requests"], strict=True)
    return next((a["index"] for a, b in rows if a["raw_tokens"] != b["raw_tokens"]), None)
