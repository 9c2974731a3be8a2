"""The caches a warm process keeps of a growing session check the grown thread once (branch
live25c): they keep one ``kept_cache.Prefix`` of a thread version, and ``kept_cache.leads``
checks it against the grown thread once per read, a worker's continuation going on with its
read's verdicts (``hand_over``). A message whose blocks changed in place between two
updates is still seen by every cache."""

from __future__ import annotations

from typing import Any

from contextlab import engine
from contextlab.engine.input import kept_cache
from contextlab.engine.input import session as session_module
from contextlab.engine.input.model import Block
from contextlab.engine.measures import tokenized
from contextlab.engine.replay import checkpoints
from contextlab.engine.replay import live as live_module
from tests.engine.test_live_kept_in_process import (
    TOOL_HEAVY,
    _another_process,
    _cold,
    _cuts,
    _forget,
    _text,
    _Versions,
)


def _worker(versions: _Versions, end: int, state: bytes) -> tuple[engine.Session, str, bytes]:
    """The web's read on, then the worker's read and continuation (its session left open)."""
    path, sha = versions.version(end)
    session = engine.load_session_cached(
        str(path), cache_dir=str(versions.cache), sha256=sha, seed_sha256=versions.earlier
    )
    versions.earlier = sha
    result, after = engine.continue_live(state, session)
    return session, _text(result), after


def _prefixes(session: engine.Session) -> list[Any]:
    """The prefix every cache keeps of ``session``'s main thread."""
    first = session.threads[0].messages[0]
    kept: list[Any] = []
    for cache in (
        checkpoints._REFS,
        tokenized._COUNTED,
        tokenized._LISTED,
        session_module._LINKED,
        live_module._SIZED,
    ):
        found = [v.prefix for v in cache.values() if v.prefix and v.prefix.messages[0] is first]
        assert len(found) == 1, cache
        kept += found
    return kept


def test_a_warm_update_checks_the_grown_thread_once_for_every_cache(tmp_path):
    _forget()
    data = TOOL_HEAVY.read_bytes()
    versions = _Versions(tmp_path, data)
    cuts = _cuts(data, [0.5, 0.6, 0.7, 0.8])
    _, state = versions.warm(cuts[0], None)
    _, state = versions.warm(cuts[1], state)
    warm = 0
    for end in cuts[2:]:
        before = state
        path, sha = versions.version(end)
        checks, blocks = kept_cache.CHECKS[0], kept_cache.CHECKS[1]
        session = engine.load_session_cached(
            str(path), cache_dir=str(versions.cache), sha256=sha, seed_sha256=versions.earlier
        )
        versions.earlier = sha
        result, state = engine.continue_live(before, session)
        # one check of the grown thread for the read (linked, counted, listed) and the
        # continuation (sized, references) together; none for a thread built whole (a
        # response the append completed: nothing kept is of its messages)
        assert kept_cache.CHECKS[0] - checks <= 1, f"version {versions.k}"
        assert kept_cache.CHECKS[1] - blocks <= 1  # the references' only
        warm += kept_cache.CHECKS[0] - checks
        prefixes = _prefixes(session)
        assert all(p is prefixes[0] for p in prefixes)  # one object, kept by every cache
        assert len(prefixes[0]) == len(session.threads[0].messages) - 1
        session.close()
        with _another_process():
            assert _text(result) == _cold(path, before)[0]
    assert warm >= 3


def test_a_block_changed_in_place_between_updates_is_seen_by_every_cache(tmp_path):
    """The verdict is the read's: a message of the kept version that gained a block in place
    before the next read is counted, listed, linked and referred to afresh."""
    _forget()
    data = TOOL_HEAVY.read_bytes()
    versions = _Versions(tmp_path, data)
    cuts = _cuts(data, [0.5, 0.65, 0.8])
    _, state = versions.warm(cuts[0], None)
    session, _, state = _worker(versions, cuts[1], state)
    message = session.threads[0].messages[1]
    session.close()
    added = Block("tool_result", "output added in place", tool_use_id="toolu_nowhere")
    message.blocks.append(added)  # the next read's thread holds this very message
    grown, _, state = _worker(versions, cuts[2], state)
    assert grown.threads[0].messages[1] is message
    assert added.tok >= 0  # counted
    assert added.key >= 0
    assert any(p.code == "orphan_tool_result" for p in grown.problems)  # linked
    listed = tokenized.TokenCounts.of(grown).threads[grown.threads[0].id]
    assert listed[0][1] == len(message.blocks)  # listed
    refs = next(r for r in checkpoints._REFS.values() if r.prefix.messages[1] is message)
    assert refs.refs[id(added)] == ("block", 0, 1, len(message.blocks) - 1)  # referred to
    for prefix in _prefixes(grown):
        assert prefix.sizes[1] == len(message.blocks)
    # a block put in another's place (as many blocks): the references are made afresh
    replaced = Block("text", "a block put in its place")
    message.blocks[0] = replaced
    grown.close()
    again, _, state = _worker(versions, cuts[3], state)
    assert again.threads[0].messages[1] is message
    refs = next(r for r in checkpoints._REFS.values() if r.prefix.messages[1] is message)
    assert refs.refs[id(replaced)] == ("block", 0, 1, 0)
    again.close()


def test_a_verdict_holds_within_its_checking_only():
    session = engine.load_session(str(TOOL_HEAVY), name="session.jsonl")
    messages = session.threads[0].messages
    prefix = kept_cache.prefix_of(messages)
    assert len(prefix) == len(messages) - 1
    assert kept_cache.leads(prefix, messages)
    added = Block("text", "a block added in place")
    with kept_cache.checking():
        checks = kept_cache.CHECKS[0]
        assert kept_cache.leads(prefix, messages)
        assert kept_cache.leads(prefix, messages)
        assert kept_cache.CHECKS[0] == checks + 1  # remembered
        assert kept_cache.prefix_of(messages) is kept_cache.prefix_of(messages)
        messages[1].blocks.append(added)
    assert not kept_cache.leads(prefix, messages)  # outside: checked again
    with kept_cache.checking():
        assert not kept_cache.leads(prefix, messages)
    messages[1].blocks.remove(added)
    # a block replaced in place: as many blocks, not the very ones
    first = messages[1].blocks[0]
    messages[1].blocks[0] = Block("text", "a block put in its place")
    with kept_cache.checking():
        assert kept_cache.leads(prefix, messages)
        assert not kept_cache.leads(prefix, messages, blocks=True)
        assert kept_cache.leads(prefix, messages)
    messages[1].blocks[0] = first
    assert kept_cache.leads(prefix, messages, blocks=True)
    other = list(messages)
    other[2] = messages[3]
    assert not kept_cache.leads(prefix, other)  # not the very objects
    # one made on from a shorter prefix holds what one made afresh does
    on = kept_cache.prefix_of(messages[:10])
    assert kept_cache.leads(on, messages)
    longer = kept_cache.prefix_of(messages, on=on)
    assert longer.messages == prefix.messages
    assert longer.sizes == prefix.sizes
    assert all(a is b for a, b in zip(longer.blocks, prefix.blocks, strict=True))


def test_a_read_hands_its_verdicts_to_its_own_session_s_continuation_only(tmp_path):
    session = engine.load_session(str(TOOL_HEAVY), name="session.jsonl")
    messages = session.threads[0].messages
    prefix = kept_cache.prefix_of(messages)
    with kept_cache.reading(1000):
        assert kept_cache.leads(prefix, messages)
        kept_cache.hand_over(session)
    messages[1].blocks.append(Block("text", "a block added in place"))
    other = engine.load_session(str(TOOL_HEAVY), name="session.jsonl")
    with kept_cache.checking(other):  # not the session handed over: checked afresh
        assert not kept_cache.leads(prefix, messages)
    with kept_cache.checking(session):  # the read's verdict (nothing changes in between)
        assert kept_cache.leads(prefix, messages)
    with kept_cache.checking(session):  # once
        assert not kept_cache.leads(prefix, messages)
    with kept_cache.reading(1000):
        kept_cache.hand_over(session)
    assert kept_cache._HANDED.get() is not None
    with kept_cache.reading(1000):  # another read lets the last one's session go first
        assert kept_cache._HANDED.get() is None
    with kept_cache.reading(kept_cache.KEPT_MAX_BYTES + 1):
        assert not kept_cache.leads(prefix, messages)
        kept_cache.hand_over(session)  # too large to keep: nothing handed
    assert kept_cache._HANDED.get() is None
