"""What a warm process keeps of a live session between its appends (the replay state, its
dump's references, the messages counted, listed, linked and sized: ``kept_cache``) is bounded
by the size of the sessions it is kept for, as the kept findings are (branch live25): nothing
of a session whose file is over ``KEPT_MAX_BYTES``, at most that many bytes of sessions in all,
and everything let go before a larger session is read, so a 2 GB live session's worker holds
that session only. The updates themselves are the same either way (storage stays the truth)."""

from __future__ import annotations

import gc
import weakref

import pytest

from contextlab import engine
from contextlab.engine.input import kept_cache, session_cache
from contextlab.engine.replay import kept_state
from tests.conftest import DEMO
from tests.engine.test_live_kept_in_process import (
    _KEPT,
    TOOL_HEAVY,
    _another_process,
    _cold,
    _cuts,
    _forget,
    _Versions,
)

SHORT = DEMO / "marot__spotter__short.jsonl"

#: the caches bounded by session size (``checkpoints._DECODED`` is bounded by its chunks' bytes)
_BOUNDED = [kept for kept in _KEPT if isinstance(kept, kept_cache.KeptCache)]


def _held() -> dict[str, int]:
    return {type(next(iter(kept.values()))).__name__: len(kept) for kept in _BOUNDED if kept}


def test_every_cache_that_keeps_a_session_s_objects_is_bounded():
    assert len(_BOUNDED) == len(_KEPT) - 1  # all but the decoded chunks


def test_a_session_over_the_bound_keeps_nothing_and_updates_the_same(tmp_path, monkeypatch):
    _forget()
    data = TOOL_HEAVY.read_bytes()
    cuts = _cuts(data, [0.5, 0.7, 0.9])
    # under the bound: the warm path keeps what it made (the check below is not vacuous)
    kept = _Versions(tmp_path / "kept", data)
    _, state = kept.warm(cuts[0], None)
    texts = []
    for end in cuts[1:]:
        text, state = kept.warm(end, state)
        texts.append(text)
    assert len(_held()) == len(_BOUNDED), _held()
    # the web's read and the worker's versions read afresh (an append completing a response)
    # are other objects, each counted at its version's size
    assert len(data) <= kept_cache.held_bytes() <= kept_cache.KEPT_MAX_BYTES
    # over it (a file a byte larger than the bound, as a 2 GB session is over 256 MB)
    _forget()
    monkeypatch.setattr(kept_cache, "KEPT_MAX_BYTES", cuts[0] - 1)
    large = _Versions(tmp_path / "large", data)
    _, state = large.warm(cuts[0], None)
    for k, end in enumerate(cuts[1:]):
        before = state
        text, state = large.warm(end, before)
        assert _held() == {}, f"version {large.k}"
        assert kept_cache.held_bytes() == 0
        assert text == texts[k]
        path = large.folder / f"v{large.k}" / "session.jsonl"
        with _another_process():
            assert text == _cold(path, before)[0]


def test_reading_a_session_over_the_bound_lets_everything_kept_go_first(tmp_path, monkeypatch):
    _forget()
    data = TOOL_HEAVY.read_bytes()
    cuts = _cuts(data, [0.5, 0.7])
    small = _Versions(tmp_path / "small", data)
    _, state = small.warm(cuts[0], None)
    small.warm(cuts[1], state)
    assert len(_held()) == len(_BOUNDED)
    (kept,) = kept_state.KEPT_STATES.values()
    held_session = weakref.ref(kept.session)
    del kept
    # another session, larger than the bound, is read: nothing of the first is kept past it
    monkeypatch.setattr(kept_cache, "KEPT_MAX_BYTES", len(data) - 1)
    monkeypatch.setattr(session_cache, "RECENT_MAX_BYTES", len(data) - 1)
    large = tmp_path / "large" / "session.jsonl"
    large.parent.mkdir()
    large.write_bytes(data)
    session = engine.load_session_cached(str(large), cache_dir=str(tmp_path / "cache"))
    assert _held() == {}
    assert session.source_bytes == len(data)
    session.close()
    del session
    gc.collect()
    # nothing holds the first session's objects (the sessions and reads ``session_cache``
    # keeps let go for the read too)
    assert held_session() is None


def test_the_sessions_kept_in_all_fit_the_bound(tmp_path, monkeypatch):
    """Two live sessions each under the bound, together over it: the older one's objects go."""
    _forget()
    data = TOOL_HEAVY.read_bytes()
    other = SHORT.read_bytes()
    cuts, other_cuts = _cuts(data, [0.5, 0.7]), _cuts(other, [0.5, 0.7])
    bound = max(cuts[1], other_cuts[1]) * 3 // 2
    assert cuts[1] + other_cuts[1] > bound
    monkeypatch.setattr(kept_cache, "KEPT_MAX_BYTES", bound)
    first = _Versions(tmp_path / "first", data)
    _, state = first.warm(cuts[0], None)
    first.warm(cuts[1], state)
    lineage_first = {held[1] for kept in _BOUNDED for held in kept.held.values()}
    assert lineage_first
    # held here, so that no object of the second session takes a lineage's id
    first_values = [value for kept in _BOUNDED for value in kept.values()]
    second = _Versions(tmp_path / "second", other)
    _, state = second.warm(other_cuts[0], None)
    second.warm(other_cuts[1], state)
    lineages = {held[1] for kept in _BOUNDED for held in kept.held.values()}
    assert lineages
    assert not lineages & lineage_first
    assert kept_cache.held_bytes() <= bound
    assert first_values


@pytest.mark.parametrize("size", [0, 10])
def test_keep_under_and_over_the_bound(size, monkeypatch):
    monkeypatch.setattr(kept_cache, "KEPT_MAX_BYTES", 5)
    cache: kept_cache.KeptCache[str, int] = kept_cache.KeptCache(2)
    try:
        cache.keep("a", 1, size=size, lineage=1)
        assert ("a" in cache) == (size <= 5)
        cache.keep("b", 2, size=3, lineage=2)
        cache.keep("c", 3, size=3, lineage=3)  # 3 + 3 > 5: the older goes
        assert list(cache) == ["c"]
        cache.keep("c", 4, size=3, lineage=3)
        cache.keep("d", 5, size=2, lineage=3)  # the same lineage, counted once at its largest
        assert list(cache) == ["c", "d"]
        assert kept_cache.held_bytes() == 3
    finally:
        kept_cache._CACHES.remove(cache)
