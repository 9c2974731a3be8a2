"""The explorer counts the history rows a summary replaced instead of building them: the rows it
does list, the counts and the prompt breakdown must be those of the full side-by-side view, for
every request of a recorded replay and of a what-if replay that compacts early."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine import HistoryIndex

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl"
#: (transcript, mode, whether history must be replaced somewhere)
CASES = [
    ("fixture", "recorded", False),
    ("fixture", "whatif", True),  # autocompact at 20 %
    ("synthetic", "recorded", True),  # recorded compactions
    ("synthetic", "whatif", True),
]


GENERATE = ("--size-mb", "4", "--seed", "3", "-o")


@cache
def _path(name: str) -> Path:
    if name == "fixture":
        return FIXTURE
    target = Path(tempfile.mkdtemp(prefix="contextlab-omitted-")) / "synthetic.jsonl"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gen_synthetic.py"), *GENERATE, str(target)],
        check=True,
        capture_output=True,
    )
    return target


@cache
def _replay(name: str, mode: str) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    session = engine.load_session(str(_path(name)))
    overrides = {"autocompact_pct_override": 20} if mode == "whatif" else {}
    config, preset = engine.resolve_config("auto", overrides, version=session.version)
    result = engine.replay(
        session, config, mode=mode, preset_name=preset, summarizer=engine.ExtractiveSummarizer()
    ).to_json()
    return result, engine.expand_messages(engine.messages_json(session))


def _replaced(row: dict[str, Any], start: int) -> bool:
    return (
        row.get("badge") == "summarized"
        and row.get("model") is None
        and isinstance(row.get("message"), int)
        and row["message"] < start
    )


@pytest.mark.slow
@pytest.mark.parametrize(("name", "mode", "compacts"), CASES)
def test_counted_rows_match_the_full_view(name: str, mode: str, compacts: bool) -> None:
    result, messages = _replay(name, mode)
    histories = {thread: HistoryIndex(rows) for thread, rows in messages.items()}
    previous: dict[str, dict[str, Any]] = {}
    omitted_somewhere = False
    for req in result["requests"]:
        thread = req["thread"]
        msgs = messages[thread]
        before = previous.get(thread)
        compacted = any(
            e.get("step") == "autocompact" and e.get("action") == "compacted"
            for e in req.get("events") or []
        )
        replaced_from = before["view"]["start"] if compacted and before else None
        full = engine.side_by_side(msgs, result, req["index"])
        fast = engine.side_by_side(
            msgs, result, req["index"], history=histories[thread], list_replaced_from=replaced_from
        )
        start = full["start"]
        kept = [r for r in full["rows"] if not _replaced(r, start)]
        all_replaced = [r for r in full["rows"] if _replaced(r, start)]
        # listed: only what this request's own compaction removed (its breakdown's input)
        listed_replaced = [
            r for r in all_replaced if replaced_from is not None and r["message"] >= replaced_from
        ]
        # the same visible rows in the same order, the replaced ones counted
        assert [r for r in fast["rows"] if not _replaced(r, start)] == kept
        assert [r for r in fast["rows"] if _replaced(r, start)] == listed_replaced
        assert fast["omitted"]["rows"] + len(listed_replaced) == len(all_replaced)
        omitted_somewhere |= fast["omitted"]["rows"] > 0
        figures = {
            "model_tokens": int(req.get("model_tokens") or 0),
            "prefix_tokens": 100,
            "ratio": 1.1,
            "replaced_from": replaced_from,
        }
        whole = engine.compose(full["rows"], msgs, **figures)
        quick = engine.compose(
            fast["rows"], msgs, omitted_tokens=fast["omitted"]["tokens"], **figures
        )
        for key in ("parts", "total", "removed", "removed_total"):
            assert quick[key] == whole[key], (req["index"], key)
        assert sorted(quick["layers"], key=lambda x: x["badge"]) == sorted(
            whole["layers"], key=lambda x: x["badge"]
        )
        assert [h["tokens"] for h in quick["heaviest"]] == [h["tokens"] for h in whole["heaviest"]]
        previous[thread] = req
    if compacts:
        assert omitted_somewhere, "no request had replaced history: the test checked nothing"
