"""Counting a text's tokens leaves the text as it was in memory (issue #25: bounded replay memory)."""

from __future__ import annotations

import sys

import pytest

from contextlab.engine.measures.tokens import TiktokenCounter

#: A Read result as Claude Code records it: ``→`` line prefixes make the text non-ASCII.
READ_RESULT = "".join(f"{n:>6}→    value_{n} = compute({n}, 'x')\n" for n in range(1, 3000))


@pytest.mark.parametrize(
    "text",
    [READ_RESULT, "héllo wörld " * 500, "lone surrogate \ud800 from a JSON escape " * 50],
    ids=["read-result", "latin-1", "lone-surrogate"],
)
def test_counting_keeps_no_second_copy_of_a_non_ascii_text(text: str) -> None:
    """CPython keeps the UTF-8 form handed to tiktoken's Rust core on the str itself; a
    block's text would then be held twice for the rest of the replay."""
    counter = TiktokenCounter()
    before = sys.getsizeof(text)
    assert counter.count_plain(text) > 0
    assert sys.getsizeof(text) == before


def test_count_of_a_non_ascii_text_is_the_encoders_own() -> None:
    counter = TiktokenCounter()
    counter.count_plain("warm up")
    encoding = counter._encoding
    fresh = "".join(READ_RESULT.splitlines(keepends=True))  # an equal str, not yet encoded
    assert counter.count_plain(READ_RESULT) == len(encoding.encode_ordinary(fresh))
