"""``Fenwick.grown``: a view's override sums carried to a thread that grew (a live append)
must be the tree made of the same points at the new size, whichever way it is worked out."""

from __future__ import annotations

import random

import pytest

from contextlab.engine.pipeline.base import Fenwick


def _made(size: int, points: dict[int, int]) -> Fenwick:
    tree = Fenwick(size)
    for index, delta in points.items():
        tree.add(index, delta)
    return tree


@pytest.mark.parametrize("seed", range(6))
def test_a_grown_tree_is_the_tree_of_its_points_at_the_new_size(seed):
    rng = random.Random(seed)
    size = rng.randint(0, 300)
    points = {rng.randrange(size): rng.randint(-50, 50) for _ in range(size // 3)} if size else {}
    tree = _made(size, points)
    for new in sorted({size, size + 1, size + rng.randint(1, 5), size * 2 + 3, max(0, size - 7)}):
        grown = tree.grown(new)
        kept = {i: d for i, d in points.items() if i < new}
        expected = _made(new, kept)
        assert grown.size == new
        assert grown.tree == expected.tree
        assert grown.touched == tree.touched
        for end in range(new + 1):
            assert grown.prefix(end) == sum(d for i, d in kept.items() if i < end)
        # then updated like any tree
        if new:
            grown.add(new - 1, 4)
            assert grown.prefix(new) == sum(kept.values()) + 4
    # the tree grown from stays as it was
    assert tree.tree == _made(size, points).tree


def test_an_untouched_tree_grows_untouched():
    grown = Fenwick(5).grown(9)
    assert (grown.size, grown.touched, grown.tree) == (9, False, [0] * 10)
