"""What a live session's update keeps between appends, so its work follows the bytes appended:
each version's parse with its token counts beside it (``TokenCounts``, not a second pickle of
the whole tokenized session), and the replay state with the state before its last request
after it (``replay.live``). Each round trips to what a fresh load and a whole read give, and a
piece that is missing or damaged costs a recount or a whole replay, never a wrong figure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.input import session_cache
from contextlab.engine.measures import tokenized
from contextlab.engine.measures.tokens import TiktokenCounter
from contextlab.engine.replay import checkpoints
from tests.conftest import DEMO
from tests.engine.test_live_replay import _config, _plain, _user_line_start

TOOL_HEAVY = DEMO / "marot__spotter__tool_heavy.jsonl"


def _figures(session: engine.Session) -> list[tuple[int, int, int]]:
    return [(b.tok, b.rough, b.key) for t in session.threads for m in t.messages for b in m.blocks]


class CountingCounter(TiktokenCounter):
    """Counts like the worker's counter, and the characters it was asked to count."""

    characters = 0

    def count(self, text: str) -> int:
        CountingCounter.characters += len(text)
        return super().count(text)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[CountingCounter]]:
    monkeypatch.setattr(tokenized, "TiktokenCounter", CountingCounter)
    CountingCounter.characters = 0
    session_cache._RECENT.clear()  # every load as a fresh worker's
    yield CountingCounter
    session_cache._RECENT.clear()


def _version(folder: Path, data: bytes, cache: Path, earlier: str | None) -> tuple[Path, str]:
    """A version of the live session as an append leaves it: the file, its read (on from the
    earlier version's) and the parse handed over to the worker."""
    folder.mkdir()
    path = folder / "session.jsonl"
    path.write_bytes(data)
    sha = engine.file_sha256(str(path))
    session, _ = engine.load_growing(
        path, "session.jsonl", cache_dir=cache, sha256=sha, earlier_sha256=earlier
    )
    engine.keep_parsed(path, session, cache_dir=str(cache), sha256=sha)
    session.close()
    return path, sha


def _load(path: Path, cache: Path, sha: str, earlier: str | None) -> engine.Session:
    session_cache._RECENT.clear()
    return engine.load_session_cached(
        str(path), cache_dir=str(cache), sha256=sha, seed_sha256=earlier
    )


def test_versions_keep_their_parse_and_counts_and_carry_them_on(tmp_path, counted):
    data = TOOL_HEAVY.read_bytes()
    cuts = [_user_line_start(data, share) for share in (1 / 3, 2 / 3)] + [len(data)]
    cache = tmp_path / "cache"
    first, first_sha = _version(tmp_path / "v0", data[: cuts[0]], cache, None)
    _load(first, cache, first_sha, None).close()  # the first upload: cached whole
    earlier = first_sha
    for n, cut in enumerate(cuts[1:], start=1):
        path, sha = _version(tmp_path / f"v{n}", data[:cut], cache, earlier)
        counted.characters = 0
        session = _load(path, cache, sha, earlier)
        carried = counted.characters
        counted.characters = 0
        fresh = engine.load_session(str(path))
        tokenized.tokenize_session(fresh)
        assert _figures(session) == _figures(fresh)
        # only what the append brought was counted
        assert 0 < carried < counted.characters
        # kept as the parse and its counts; no whole copy of the tokenized session, and
        # nothing of the version before
        names = [p.name for p in cache.iterdir() if not p.name.endswith(".tmp")]
        assert all(name.startswith(sha) for name in names)
        assert sorted(name.rsplit(".", 2)[-2] for name in names) == [
            "counts",
            "parsed",
            f"reading-v{_reading_version()}",
        ]
        session.close()
        # a second run of the same version counts nothing and has the same figures
        counted.characters = 0
        again = _load(path, cache, sha, earlier)
        assert counted.characters == 0
        assert _figures(again) == _figures(fresh)
        assert json.dumps(_replayed(again), sort_keys=True) == json.dumps(
            _replayed(fresh), sort_keys=True
        )
        again.close()
        earlier = sha


def test_a_missing_or_damaged_counts_file_means_counting_again(tmp_path, counted):
    data = TOOL_HEAVY.read_bytes()
    cut = _user_line_start(data, 1 / 2)
    cache = tmp_path / "cache"
    first, first_sha = _version(tmp_path / "v0", data[:cut], cache, None)
    _load(first, cache, first_sha, None).close()
    path, sha = _version(tmp_path / "v1", data, cache, first_sha)
    _load(path, cache, sha, first_sha).close()
    (kept,) = cache.glob(f"{sha}-*.counts.pickle")
    counted.characters = 0
    fresh = engine.load_session(str(path))
    tokenized.tokenize_session(fresh)
    everything = counted.characters
    for damage in (b"", b"not a pickle", kept.read_bytes()[:40]):
        kept.write_bytes(damage)
        counted.characters = 0
        session = _load(path, cache, sha, first_sha)
        assert _figures(session) == _figures(fresh)
        assert counted.characters >= everything  # its own counts unread: all counted again
        session.close()
    # the next version finds no counts of this one (nor its prepared copy): it counts all
    kept.unlink()
    (tmp_path / "v2").mkdir()
    grown = tmp_path / "v2" / "session.jsonl"
    grown.write_bytes(data + data[cut:])
    grown_sha = engine.file_sha256(str(grown))
    counted.characters = 0
    session = _load(grown, cache, grown_sha, sha)
    whole = engine.load_session(str(grown))
    tokenized.tokenize_session(whole)
    assert _figures(session) == _figures(whole)
    assert counted.characters > 0
    session.close()


def test_counts_carry_only_to_blocks_with_the_same_content(tmp_path):
    data = TOOL_HEAVY.read_bytes()
    cut = _user_line_start(data, 1 / 2)
    start = tmp_path / "start.jsonl"
    start.write_bytes(data[:cut].replace(b"start phoenix", b"start PHOENIX"))
    earlier = engine.load_session(str(start))
    tokenized.tokenize_session(earlier)
    counts = tokenized.TokenCounts.of(earlier)
    grown = engine.load_session(str(TOOL_HEAVY))
    carried = tokenized.carry_token_counts(counts, grown)
    assert carried > 0
    prompt = next(b for b in _blocks(grown) if "start phoenix" in b.text)
    assert prompt.tok < 0  # its text differs from the earlier version's: not carried
    tokenized.tokenize_session(grown)
    fresh = engine.load_session(str(TOOL_HEAVY))
    tokenized.tokenize_session(fresh)
    assert _figures(grown) == _figures(fresh)


def test_the_state_before_the_last_request_rides_after_the_state(tmp_path):
    """An append that brings one request keeps the state it went on from as its rewind (the
    bytes after its own state, one state deep); the next append, which completes that
    response, goes on from it. A rewind cut short is refused like any state that does not
    fit (the caller replays the session whole)."""
    data = TOOL_HEAVY.read_bytes()
    first, second = _response_of_two_lines(data)
    path = tmp_path / "v.jsonl"

    def grown(end: int) -> engine.Session:
        path.write_bytes(data[:end])
        return engine.load_session(str(path))

    session = grown(first[0])
    config, preset = _config(session)
    before, state = engine.replay_live(session, config, preset_name=preset)
    _, one_more = engine.continue_live(state, grown(first[1]))
    summarizer = engine.ExtractiveSummarizer()
    _, at = checkpoints.load_prefix(one_more, grown(first[1]), summarizer, None, live=True)
    _, own = checkpoints.load_prefix(state, session, summarizer, None, live=True)
    assert one_more[at:] == state[:own]  # the state it went on from, without its rewind
    seen: list[int] = []
    result, _ = engine.continue_live(one_more, grown(second[1]), replayed=seen.append)
    rows = _plain(result)["requests"]
    known = len(_plain(before)["requests"])
    assert rows[:known] == _plain(before)["requests"]
    assert seen == [known]  # the completed response's request, replayed from the rewind
    whole = _plain(engine.replay(grown(second[1]), config, preset_name=preset))
    assert [r["recorded"] for r in rows] == [r["recorded"] for r in whole["requests"]]
    with pytest.raises(ValueError, match="does not fit"):
        engine.continue_live(one_more[: len(one_more) - 10], grown(second[1]))


def _response_of_two_lines(data: bytes) -> tuple[tuple[int, int], tuple[int, int]]:
    """(start, end) of the first two lines of a response written in two lines or more, the
    line before them not of that response."""
    starts = [0, *(i + 1 for i, byte in enumerate(data[:-1]) if byte == ord("\n"))]
    lines = [(start, data.index(b"\n", start) + 1) for start in starts]

    def response(line: tuple[int, int]) -> str | None:
        message = json.loads(data[line[0] : line[1]]).get("message") or {}
        return message.get("id") if message.get("role") == "assistant" else None

    for before, one, two in zip(lines, lines[1:], lines[2:], strict=False):
        if response(one) and response(one) == response(two) != response(before):
            return one, two
    raise AssertionError("no response written in two lines")


def _blocks(session: engine.Session) -> list[engine.Block]:
    return [b for t in session.threads for m in t.messages for b in m.blocks]


def _replayed(session: engine.Session) -> dict[str, Any]:
    config, preset = _config(session)
    return _plain(engine.replay(session, config, mode="recorded", preset_name=preset))


def _reading_version() -> int:
    from contextlab.engine.input.sources.claude_code.growing import STATE_VERSION

    return STATE_VERSION
