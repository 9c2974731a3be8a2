"""A session that grew (a live session's append) reuses its earlier version's token counts:
only the new blocks are counted, and every count, key and replayed figure is the same as a
fresh count's."""

from __future__ import annotations

from contextlab import engine
from contextlab.engine.measures.tokenized import carry_counts, tokenize_session
from contextlab.engine.measures.tokens import TiktokenCounter
from tests.conftest import DEMO

FULL = DEMO / "marot__spotter__tool_heavy.jsonl"


class Recording:
    def __init__(self) -> None:
        self.counter = TiktokenCounter()
        self.characters = 0

    def count(self, text: str) -> int:
        self.characters += len(text)
        return self.counter.count(text)


def blocks(session: engine.Session) -> list[tuple[int, int, int]]:
    return [(b.tok, b.rough, b.key) for t in session.threads for m in t.messages for b in m.blocks]


def replayed(session: engine.Session) -> dict:
    config, preset = engine.resolve_request_config("auto", {}, version=session.version)
    return engine.replay(session, config, mode="recorded", preset_name=preset).to_json()


def test_a_grown_session_counts_only_its_new_blocks_with_the_same_results(tmp_path):
    lines = FULL.read_bytes().splitlines(keepends=True)
    start = tmp_path / "start.jsonl"
    start.write_bytes(b"".join(lines[:24]))
    earlier = engine.load_session(str(start))
    before = Recording()
    tokenize_session(earlier, before)  # type: ignore[arg-type]
    seeded = engine.load_session(str(FULL))
    recording = Recording()
    tokenize_session(seeded, recording, seed=lambda: earlier)  # type: ignore[arg-type]
    fresh = engine.load_session(str(FULL))
    everything = Recording()
    tokenize_session(fresh, everything)  # type: ignore[arg-type]
    assert blocks(seeded) == blocks(fresh)
    # only what the append brought is counted: the earlier version's text is not, again
    assert 0 < recording.characters <= everything.characters - before.characters
    assert replayed(seeded) == replayed(fresh)


def test_blocks_that_changed_are_counted_again(tmp_path):
    lines = FULL.read_bytes().splitlines(keepends=True)
    start = tmp_path / "start.jsonl"
    start.write_bytes(b"".join(lines[:24]).replace(b"start phoenix", b"start PHOENIX"))
    earlier = engine.load_session(str(start))
    tokenize_session(earlier)
    grown = engine.load_session(str(FULL))
    carried = carry_counts(earlier, grown)
    assert carried > 0
    prompt = next(
        b for t in grown.threads for m in t.messages for b in m.blocks if "start phoenix" in b.text
    )
    assert prompt.tok < 0  # its text differs from the earlier version's: not carried


def test_carry_onto_finds_each_pending_blocks_kept_figures_wherever_it_is():
    """``TokenCounts.carry_onto`` gives each pending block the figures kept at its place
    (thread, message, block), for blocks anywhere in the thread, in order, skipping messages,
    and out of order (its offsets are summed as it goes, branch live27)."""
    from contextlab.engine.measures.tokenized import TokenCounts

    counted = engine.load_session(str(FULL))
    tokenize_session(counted, TiktokenCounter())
    counts = TokenCounts.of(counted)
    fresh = engine.load_session(str(FULL))
    places = [
        (t.id, m, b, block)
        for t in fresh.threads
        for m, message in enumerate(t.messages)
        for b, block in enumerate(message.blocks)
    ]
    assert len(places) > 20
    # every third block in order, then the rest backwards
    chosen = places[::3]
    rest = [p for i, p in enumerate(places) if i % 3][::-1]
    for pending in (chosen, rest):
        counts.carry_onto(pending)
    expected = {
        (t.id, m, b): (block.tok, block.rough)
        for t in counted.threads
        for m, message in enumerate(t.messages)
        for b, block in enumerate(message.blocks)
    }
    for thread_id, m, b, block in places:
        assert (block.tok, block.rough) == expected[(thread_id, m, b)], (thread_id, m, b)
        assert block.tok >= 0
