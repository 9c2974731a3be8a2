"""``CacheBlocks.within``: how many leading blocks fit in a cache read, by bisection over running
sums kept in step with the blocks, against a walk over the blocks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contextlab.engine.replay.cache_blocks import CacheBlocks


def walked(tokens: list[int], budget: int) -> int:
    """The leading blocks that fit, walking them (the block that crosses the budget counts
    when more than half of it fits)."""
    total = 0
    for n, tok in enumerate(tokens):
        if total + tok > budget:
            return n + 1 if budget - total > tok / 2 else n
        total += tok
    return len(tokens)


tokens = st.lists(st.integers(0, 5_000), max_size=40)


def _resum(blocks: CacheBlocks, start: int) -> None:
    """``sums`` again from block ``start`` of ``cal`` on, for a ``cal`` set by hand (``sync``
    keeps them as it walks the new blocks)."""
    system = len(blocks.system_keys)
    tail_start = max(0, start - system)
    del blocks.sums[tail_start:]
    total = blocks.sums[-1] if blocks.sums else 0
    for tok in blocks.cal[system + tail_start :]:
        total += tok
        blocks.sums.append(total)


@given(
    first=tokens,
    appended=tokens,
    cut=st.integers(0, 45),
    system=st.tuples(st.integers(0, 20_000), st.integers(0, 20_000)),
    budgets=st.lists(st.integers(0, 250_000), min_size=1, max_size=8),
)
def test_within_is_the_walk_after_appends_and_rebuilds(first, appended, cut, system, budgets):
    blocks = CacheBlocks([1, 2])
    # a request: the system blocks, then its messages' blocks
    blocks.cal = [0, 0, *first]
    _resum(blocks, 0)
    # the next: its view changed from block ``cut`` on (rebuilt), then appended
    cut = max(2, min(cut, len(blocks.cal)))  # the system blocks stay
    blocks.cal = [*blocks.cal[:cut], *appended]
    _resum(blocks, cut)
    # the estimator sets the system blocks per request, after the sums are kept
    blocks.cal[0], blocks.cal[1] = system
    for budget in budgets:
        assert blocks.within(budget) == walked(blocks.cal, budget)


@given(
    first=tokens,
    appended=tokens,
    cut=st.integers(0, 45),
    system=st.tuples(*[st.integers(0, 9)] * 2),
)
def test_total_is_the_sum_of_the_blocks(first, appended, cut, system):
    blocks = CacheBlocks([1, 2])
    blocks.cal = [0, 0, *first]
    _resum(blocks, 0)
    cut = max(2, min(cut, len(blocks.cal)))
    blocks.cal = [*blocks.cal[:cut], *appended]
    _resum(blocks, cut)
    blocks.cal[0], blocks.cal[1] = system
    assert blocks.total() == sum(blocks.cal)


def test_a_blocks_key_is_the_text_key_of_its_type_and_text():
    """``block_key`` hashes from a hasher that holds the type's part: the same key as the
    content hash of ``type + NUL + text`` (keys are kept in the session cache and must not
    change), for ASCII, other characters and a lone surrogate from a JSON escape."""
    from contextlab.engine.input.model import Block
    from contextlab.engine.measures.tokens import block_key, text_key

    for kind, text, media in [
        ("text", "hello", 0),
        ("tool_result", "x" * 5000, 0),
        ("tool_use", "édition → 編集", 0),
        ("text", "half \ud83d pair", 0),
        ("tool_result", "", 2),
        ("thinking", "\x00 inside", 0),
    ]:
        block = Block(kind, text, media=media)
        assert block_key(block) == text_key(kind + "\x00" + text) ^ media
        assert block_key(Block(kind, text, media=media)) == block.key  # stable
