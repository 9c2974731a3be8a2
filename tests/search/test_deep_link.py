"""The explorer opened at a search hit's block (``?block=b-<message>-<block>``): the page that
holds it, the block marked, and history a summary replaced shown when the block is in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from contextlab import engine
from contextlab.runs import explorer

FIXTURE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl"
)


@pytest.fixture(scope="module")
def compacted() -> tuple[dict[str, Any], dict[str, Any]]:
    """A what-if replay that compacts early (autocompact at 20 %): history gets replaced."""
    session = engine.load_session(str(FIXTURE))
    config, preset = engine.resolve_config(
        "auto", {"autocompact_pct_override": 20}, version=session.version
    )
    result = engine.replay(
        session, config, mode="whatif", preset_name=preset, summarizer=engine.ExtractiveSummarizer()
    ).to_json()
    return result, engine.expand_messages(engine.messages_json(session))


def _build(data: dict[str, Any], messages: dict[str, Any], index: int, **flags: Any) -> Any:
    return explorer.build(
        data,
        messages,
        index,
        flags=explorer.Flags(**flags),
        request_url=lambda i: f"/r/{i}/",
        cache_key=None,
    )


def test_a_replaced_block_is_shown_and_marked(compacted):
    data, messages = compacted
    index, start = next(
        (r["index"], r["view"]["start"])
        for r in data["requests"]
        if r["thread"] == "main" and r["view"]["start"] > 2
    )
    message = next(
        row["index"] for row in messages["main"][:start] if row["blocks"] and row["role"] == "user"
    )
    block = f"b-{message}-0"
    plain = _build(data, messages, index)
    assert block not in {row["anchor"] for row in plain["rows"]}  # hidden behind "show them"
    opened = _build(data, messages, index, block=block)
    marked = [row for row in opened["rows"] if row["hit"]]
    assert [row["anchor"] for row in marked] == [block]
    assert opened["show_replaced"]


@override_settings(EXPLORER_ROWS_PER_PAGE=5)
def test_the_page_holding_the_block_is_shown(compacted):
    data, messages = compacted
    last = len(data["requests"]) - 1
    third = _build(data, messages, last, page=3)
    target = next(r["anchor"] for r in third["rows"] if not r["anchor"].startswith("b-s-"))
    opened = _build(data, messages, last, block=target)
    assert opened["page"] == 3
    assert opened["next_page"] == (4 if third["next_page"] else None)
    assert [row["anchor"] for row in opened["rows"] if row["hit"]] == [target]


def test_an_unknown_or_malformed_block_changes_nothing(compacted):
    data, messages = compacted
    plain = _build(data, messages, 3)
    for value in ("b-999999-0", "<script>", "b-1-2-3", "b--1-0"):
        flags = explorer.Flags.of({"block": value})
        opened = explorer.build(
            data, messages, 3, flags=flags, request_url=lambda i: f"/r/{i}/", cache_key=None
        )
        assert opened["page"] == 1
        assert [r["anchor"] for r in opened["rows"]] == [r["anchor"] for r in plain["rows"]]
        assert not any(r["hit"] for r in opened["rows"])
