"""What a warm worker keeps in memory between a live session's appends (branch live64) never
changes what an update computes: the chunks of rows it pickled or read
(``checkpoints._DECODED``, by their bytes), the references of the messages it dumped last
(``checkpoints._REFS``), the messages it counted (``tokenized._COUNTED``) and linked
(``session._LINKED``), the thinking sizes it set (``live._SIZED``, branch live64b), the counts
it listed (``tokenized._LISTED``) and the replay state it dumped last (``kept_state.KEPT_STATES``,
branch live64c). Each is used only when what it was kept for is what is there now: the
versions grown through the warm path equal the same updates made cold (nothing kept), also
when another worker took the append in between, after a restart, across a response completed
by the next append (the state's rewind), and when the file changed otherwise than by an
append."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.input import session as session_module
from contextlab.engine.input.model import Block, Message
from contextlab.engine.input.session import Thread
from contextlab.engine.measures import tokenized
from contextlab.engine.measures import tokens as tokens_module
from contextlab.engine.measures.tokens import thinking_writes
from contextlab.engine.replay import checkpoints, kept_state
from contextlab.engine.replay import live as live_module
from tests.conftest import DEMO, ROOT
from tests.engine.test_anchors import branch_above_200k_beside_a_main_that_compacted_below_it
from tests.engine.test_live_replay import _line_ends, _user_line_start

TOOL_HEAVY = DEMO / "marot__spotter__tool_heavy.jsonl"

#: the module caches a warm process keeps, each a dict
_KEPT = (
    checkpoints._DECODED,
    checkpoints._REFS,
    tokenized._COUNTED,
    session_module._LINKED,
    live_module._SIZED,
    tokenized._LISTED,
    kept_state.KEPT_STATES,
)


def _forget() -> None:
    """As a process that just started (a restart, another worker)."""
    for kept in _KEPT:
        kept.clear()
    checkpoints._DECODED_BYTES[0] = 0


@contextmanager
def _another_process() -> Iterator[None]:
    """Run the body as a fresh worker would, then give this process its own caches back (as
    they were before: stale for what the other worker wrote)."""
    saved = [dict(kept) for kept in _KEPT]
    counted = checkpoints._DECODED_BYTES[0]
    writes = thinking_writes()
    _forget()
    try:
        yield
    finally:
        for kept, items in zip(_KEPT, saved, strict=True):
            kept.clear()
            kept.update(items)  # type: ignore[attr-defined]
        checkpoints._DECODED_BYTES[0] = counted
        # its sizings were of its own sessions' responses, counted in its own process
        tokens_module._THINKING_WRITES[0] = writes


def _text(result: engine.ReplayResult) -> str:
    return json.dumps(result.to_json(), sort_keys=True, default=str)


class _Versions:
    """A growing session's versions through the warm path: the web's read on
    (``engine.load_growing``), the worker's read on from its kept read and counts
    (``load_session_cached`` with the earlier version's digest), ``continue_live``."""

    def __init__(self, folder: Path, data: bytes) -> None:
        self.folder, self.data = folder, data
        self.cache = folder / "cache"
        self.earlier: str | None = None
        self.k = 0
        #: the thinking sizes of the main thread's messages after the last ``warm``
        self.thinking: list[Any] = []

    def version(self, end: int) -> tuple[Path, str]:
        self.k += 1
        path = self.folder / f"v{self.k}" / "session.jsonl"
        path.parent.mkdir(parents=True)
        path.write_bytes(self.data[:end])
        sha = engine.file_sha256(str(path))
        engine.load_growing(
            path, path.name, cache_dir=self.cache, sha256=sha, earlier_sha256=self.earlier
        )[0].close()
        return path, sha

    def warm(self, end: int, state: bytes | None) -> tuple[str, bytes]:
        path, sha = self.version(end)
        session = engine.load_session_cached(
            str(path), cache_dir=str(self.cache), sha256=sha, seed_sha256=self.earlier
        )
        self.earlier = sha
        try:
            if state is None:
                config, preset = engine.resolve_session_config(session)
                result, after = engine.replay_live(session, config, preset_name=preset)
            else:
                result, after = engine.continue_live(state, session)
            self.thinking = [live_module._sized_thinking(m) for m in session.threads[0].messages]
            return _text(result), after
        finally:
            session.close()


def _cold(path: Path, state: bytes) -> tuple[str, bytes]:
    """``continue_live`` of ``state`` over ``path`` read whole and counted in a process that
    keeps nothing."""
    _forget()
    session = engine.load_session(str(path), name="session.jsonl")
    tokenized.tokenize_session(session)
    result, after = engine.continue_live(state, session)
    return _text(result), after


def _cuts(data: bytes, shares: list[float]) -> list[int]:
    """A user turn at each share, and a line end between each two (a response cut while it
    is written: the next append completes it, and goes on from the state's rewind)."""
    turns = [_user_line_start(data, share) for share in shares] + [len(data)]
    ends = _line_ends(data)
    cuts = [turns[0]]
    for a, b in pairwise(turns):
        between = [e for e in ends if a < e < b]
        cuts += [between[len(between) // 2], b] if between else [b]
    return cuts


def test_the_warm_path_gives_what_a_process_keeping_nothing_gives(tmp_path):
    _forget()
    data = TOOL_HEAVY.read_bytes()
    versions = _Versions(tmp_path, data)
    cuts = _cuts(data, [0.5, 0.6, 0.7, 0.8, 0.9])
    text, state = versions.warm(cuts[0], None)
    hits = 0
    for end in cuts[1:]:
        before = state
        text, state = versions.warm(end, before)
        hits += len(checkpoints._REFS) > 0 and len(tokenized._COUNTED) > 0
        path = versions.folder / f"v{versions.k}" / "session.jsonl"
        with _another_process():
            cold_text, cold_state = _cold(path, before)
        assert text == cold_text, f"version {versions.k}"
        # the states may differ in bytes (a pickle shares equal strings it met as one object),
        # never in what they hold: both go on to the same result
        with _another_process():
            assert _cold(path, state)[0] == _cold(path, cold_state)[0]
    assert hits  # the warm path did use what it kept


def test_a_worker_whose_last_append_another_worker_took_reads_that_worker_s_state(tmp_path):
    _forget()
    data = TOOL_HEAVY.read_bytes()
    versions = _Versions(tmp_path, data)
    cuts = _cuts(data, [0.5, 0.65, 0.8])
    _, state = versions.warm(cuts[0], None)
    _, state = versions.warm(cuts[1], state)  # this worker's caches now hold this version's
    with _another_process():  # the next append, taken elsewhere
        path, sha = versions.version(cuts[2])
        versions.earlier = sha
        _, other = _cold(path, state)
    for end in cuts[3:]:
        path_before = versions.folder / f"v{versions.k}" / "session.jsonl"
        assert path_before.exists()
        text, after = versions.warm(end, other)
        path = versions.folder / f"v{versions.k}" / "session.jsonl"
        with _another_process():
            assert text == _cold(path, other)[0]
        other = after


def test_a_restart_and_a_file_changed_otherwise_than_by_an_append(tmp_path):
    _forget()
    data = TOOL_HEAVY.read_bytes()
    versions = _Versions(tmp_path, data)
    cuts = _cuts(data, [0.5, 0.7])
    _, state = versions.warm(cuts[0], None)
    text, state = versions.warm(cuts[1], state)
    _forget()  # a restart: nothing kept, the stored state is all there is
    text, after = versions.warm(cuts[2], state)
    _assert_as_a_process_keeping_nothing(versions, text, state)
    # the file cut back (a rewind, not an append): the state no longer fits, and the whole
    # replay that follows is the one a process keeping nothing makes
    rewound = tmp_path / "rewound" / "session.jsonl"
    rewound.parent.mkdir()
    rewound.write_bytes(data[: cuts[0]])
    session = engine.load_session(str(rewound), name="session.jsonl")
    tokenized.tokenize_session(session)
    with pytest.raises(ValueError, match=r"does not fit|lost messages|changed"):
        engine.continue_live(after, session)
    config, preset = engine.resolve_session_config(session)
    warm = _text(engine.replay_live(session, config, preset_name=preset)[0])
    _forget()
    again = engine.load_session(str(rewound), name="session.jsonl")
    assert warm == _text(engine.replay_live(again, config, preset_name=preset)[0])


def test_kept_chunks_are_found_by_their_whole_bytes():
    """Two chunks of the same length and ends, differing inside: each decodes to its own."""
    _forget()
    one = checkpoints.AppendedList([{"text": "a" * 300 + "1" + "b" * 300}])
    two = checkpoints.AppendedList([{"text": "a" * 300 + "2" + "b" * 300}])
    data_one, data_two = pickle.dumps(one), pickle.dumps(two)
    (_, chunk_one), (_, chunk_two) = one.chunks[0], two.chunks[0]
    assert len(chunk_one) == len(chunk_two)
    assert chunk_one != chunk_two
    assert checkpoints._chunk_key(chunk_one) == checkpoints._chunk_key(chunk_two)
    assert pickle.loads(data_one) == one
    assert pickle.loads(data_two) == two
    assert pickle.loads(data_one) == one


def test_kept_references_are_not_used_for_a_message_whose_blocks_changed(tmp_path):
    """A message that gained a block in place (``chains`` merges a response's records into
    one message) is referred to afresh: the dump equals one made with nothing kept."""
    _forget()
    session = engine.load_session(str(TOOL_HEAVY), name="session.jsonl")
    thread = session.threads[0]
    state = {"blocks": [m.blocks[-1] for m in thread.messages]}
    summarizer = engine.ExtractiveSummarizer()
    checkpoints.dump(state, session, summarizer, None, live=True)
    assert checkpoints._REFS
    thread.messages[1].blocks.append(Block("text", "a block added in place"))
    state["blocks"].append(thread.messages[1].blocks[-1])
    warm = checkpoints.dump(state, session, summarizer, None, live=True)
    _forget()
    assert warm == checkpoints.dump(state, session, summarizer, None, live=True)
    back: Any = checkpoints.load(warm, session, summarizer, None, live=True)
    assert back["blocks"][-1] is thread.messages[1].blocks[-1]


def test_counted_messages_are_walked_again_when_their_blocks_changed():
    _forget()
    session = engine.load_session(str(TOOL_HEAVY), name="session.jsonl")
    tokenized.tokenize_session(session)
    assert tokenized._COUNTED
    added = Block("text", "a block added in place")
    session.threads[0].messages[1].blocks.append(added)
    tokenized.tokenize_session(session)
    assert added.tok >= 0
    assert added.key >= 0


def test_linking_goes_on_only_from_the_same_messages():
    """A tool result added in place to a message linked before is linked (and an orphan
    reported) as a whole walk does."""
    session_module._LINKED.clear()
    session = engine.load_session(str(TOOL_HEAVY), name="session.jsonl")
    thread = session.threads[0]
    assert session_module._LINKED
    orphan = Block("tool_result", "output", tool_use_id="toolu_nowhere")
    thread.messages[1].blocks.append(orphan)
    problems: list[Any] = []
    session_module.link_tool_results([thread], problems)
    session_module._LINKED.clear()
    whole: list[Any] = []
    session_module.link_tool_results([thread], whole)
    assert [p.to_json() for p in problems] == [p.to_json() for p in whole]
    assert [p.code for p in whole] == ["orphan_tool_result"]


def test_a_result_does_not_renumber_its_threads_rows(tmp_path):
    """``to_json`` numbers the main conversation's rows (branches in time order) on copies:
    the threads' rows are shared with a live state, kept as they were written."""
    built = branch_above_200k_beside_a_main_that_compacted_below_it()
    session = engine.load_session(str(built.write(tmp_path / "s.jsonl")))
    config, preset = engine.resolve_session_config(session)
    result = engine.replay(session, config, mode="recorded", preset_name=preset)
    rows = [dict(r) for tr in result.threads for r in tr.requests]
    numbered = result.to_json()["requests"]
    assert [r["index"] for r in numbered] == list(range(len(numbered)))
    assert rows == [dict(r) for tr in result.threads for r in tr.requests]
    assert any(r["thread"] != "main" for r in numbered)
    assert any(r["index"] != n for n, r in enumerate(rows))  # a branch's rows, renumbered


def _synthetic(tmp_path: Path) -> bytes:
    """A session whose responses think (the demo's barely do)."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from gen_synthetic import generate

    source = tmp_path / "synthetic.jsonl"
    generate(source, 400_000, seed=1)
    return source.read_bytes()


def _cold_thinking(path: Path, state: bytes) -> list[Any]:
    """The thinking sizes of every message of the main thread after ``_cold``'s update."""
    _forget()
    session = engine.load_session(str(path), name="session.jsonl")
    tokenized.tokenize_session(session)
    engine.continue_live(state, session)
    return [live_module._sized_thinking(m) for m in session.threads[0].messages]


def _of(indices: dict[int, Any], sizes: list[Any]) -> dict[int, Any]:
    return {i: sizes[i] for i in indices}


def _warm_thinking() -> dict[int, Any]:
    """The thinking sizes of the responses whose sizes the state read back by this process's
    last update held (``_SIZED``): set from it, whichever way (every response's sizes are
    compared in ``test_a_response_an_append_completes_is_sized_again_from_its_completed_output``)."""
    kept = list(live_module._SIZED.values())[-1]
    return {i: live_module._sized_thinking(kept.prefix.messages[i]) for i in kept.sized}


def _assert_as_a_process_keeping_nothing(versions: _Versions, text: str, state: bytes) -> None:
    """The last warm version's result and the thinking sizes it set are those of an update
    of ``state`` in a process that keeps nothing."""
    path = versions.folder / f"v{versions.k}" / "session.jsonl"
    warm = _warm_thinking()
    with _another_process():
        assert text == _cold(path, state)[0]
        assert warm == _of(warm, _cold_thinking(path, state))


def test_kept_thinking_sizes_are_set_again_after_any_sizing_in_between(tmp_path):
    """A warm worker does not walk again the responses whose thinking it sized last
    (``live._SIZED``), unless a sizing ran since in the process (a what-if replay of the same
    cached session sizes the same message objects: here, their thinking set to other sizes)
    or the stored state's sizes are not the ones it set (another worker's append): each
    version equals the update a process keeping nothing makes."""
    _forget()
    data = _synthetic(tmp_path)
    versions = _Versions(tmp_path, data)
    cuts = _cuts(data, [0.4, 0.55, 0.7, 0.85])
    _, state = versions.warm(cuts[0], None)
    skipped = resized = 0
    for n, end in enumerate(cuts[1:]):
        before = state
        kept = next(iter(live_module._SIZED.values()), None)
        if kept is not None and n % 2:
            # another replay in this process sizes the kept responses' thinking otherwise
            for message in kept.prefix.messages:
                toks = tuple(b.tok + 7 for b in message.blocks if b.type == "thinking")
                if toks and message.metadata.get("thinking_sized"):
                    live_module._set_sized_thinking(message, (toks, False, None))
                    resized += 1
        writes = thinking_writes()
        text, state = versions.warm(end, before)
        skipped += kept is not None and not n % 2 and thinking_writes() - writes < len(kept.sized)
        path = versions.folder / f"v{versions.k}" / "session.jsonl"
        warm = _warm_thinking()
        with _another_process():
            assert text == _cold(path, before)[0], f"version {versions.k}"
            assert warm == _of(warm, _cold_thinking(path, before)), f"version {versions.k}"
    assert resized  # the kept responses were sized otherwise in between
    assert skipped  # and otherwise the warm path did not set them all again


def test_kept_thinking_sizes_are_not_used_when_the_stored_ones_differ(tmp_path):
    """The state read back holds other sizes than the ones this process set (another
    worker's): they are set, as a walk of every response does."""
    _forget()
    data = _synthetic(tmp_path)
    versions = _Versions(tmp_path, data)
    cuts = _cuts(data, [0.5, 0.7])
    _, state = versions.warm(cuts[0], None)
    text, state = versions.warm(cuts[2], state)  # a user turn: no rewind next
    (kept,) = live_module._SIZED.values()
    assert kept.sized
    # what this process kept says another size was set on one response than the state holds
    i, (toks, unsized, scaled_by) = next(iter(kept.sized.items()))
    kept.sized[i] = (tuple(t + 7 for t in toks), unsized, scaled_by)
    message = kept.prefix.messages[i]
    live_module._set_sized_thinking(message, kept.sized[i])
    kept.writes = thinking_writes()
    text, _ = versions.warm(cuts[4], state)
    _assert_as_a_process_keeping_nothing(versions, text, state)


def test_listed_counts_are_read_again_where_thinking_was_sized_since(tmp_path):
    """``TokenCounts.of`` does not read again the blocks it listed last, but a response's
    thinking sized since (a continuation, a what-if replay) is read as it is now."""
    _forget()
    source = tmp_path / "s.jsonl"
    source.write_bytes(_synthetic(tmp_path))
    session = engine.load_session(str(source), name="s.jsonl")
    tokenized.tokenize_session(session)
    first = tokenized.TokenCounts.of(session)
    assert tokenized._LISTED
    assert tokenized.TokenCounts.of(session) == first  # from what it kept
    thread = session.threads[0]
    thinking = next(m for m in thread.messages[:-1] if any(b.type == "thinking" for b in m.blocks))
    toks = tuple(b.tok + 7 for b in thinking.blocks if b.type == "thinking")
    live_module._set_sized_thinking(thinking, (toks, False, None))
    warm = tokenized.TokenCounts.of(session)
    assert warm != first
    tokenized._LISTED.clear()
    assert warm == tokenized.TokenCounts.of(session)


def test_a_response_an_append_completes_is_sized_again_from_its_completed_output(tmp_path):
    """A warm worker's read of the earlier version holds the message of a response the file
    ended inside, sized from its streaming snapshot (``thinking_sized``, perhaps
    ``thinking_unsized``). The append that completes it merges records into a copy of that
    message: the copy is sized again from the completed output, as a process that keeps
    nothing sizes it, not left at the snapshot's sizes."""
    _forget()
    data = _synthetic(tmp_path)
    versions = _Versions(tmp_path, data)
    cuts = _cuts(data, [0.4, 0.55, 0.7, 0.85])
    _, state = versions.warm(cuts[0], None)
    cold_state = state  # the versions as workers keeping nothing take them, one after another
    compared = 0
    for end in cuts[1:]:
        before = state
        text, state = versions.warm(end, before)
        warm = versions.thinking
        path = versions.folder / f"v{versions.k}" / "session.jsonl"
        with _another_process():
            cold = _cold_thinking(path, before)
            cold_text, cold_state = _cold(path, cold_state)
        assert warm == cold, f"version {versions.k}"
        # a size kept wrong goes on in the state: later versions' results would differ
        assert text == cold_text, f"version {versions.k}"
        compared += sum(1 for toks, _, _ in warm if toks)
    assert compared  # responses with thinking were compared


def _reachable_session_objects(root: object) -> tuple[set[int], set[int]]:
    """The ids of the sessions and threads, and of the message lists, that ``root``'s object
    graph holds (it is walked whole, but for the messages and blocks it refers to)."""
    sessions: set[int] = set()
    lists: set[int] = set()
    seen: set[int] = set()
    stack: list[object] = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or obj is None or isinstance(obj, str | bytes | int | float):
            continue
        seen.add(id(obj))
        if isinstance(obj, engine.Session | Thread):
            sessions.add(id(obj))
            continue
        if isinstance(obj, Message | Block):
            continue
        if isinstance(obj, list) and obj and isinstance(obj[0], Message):
            lists.add(id(obj))
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
        stack.extend(getattr(obj, "__dict__", {}).values())
        for cls in type(obj).__mro__:
            stack.extend(getattr(obj, name, None) for name in getattr(cls, "__slots__", ()))
    return sessions, lists


def _session_objects(session: engine.Session) -> tuple[set[int], set[int]]:
    return {id(session), *map(id, session.threads)}, {id(t.messages) for t in session.threads}


def _extended(session: engine.Session) -> engine.Session:
    """``session`` as a warm read of its grown file makes it: new session and thread objects
    (and message lists) holding the very same messages (``claude_code.extending``)."""
    threads = [replace(t, messages=list(t.messages)) for t in session.threads]
    return replace(session, threads=threads, memo={})


def test_a_kept_state_is_bound_to_the_next_version_s_session_whole(tmp_path):
    """The state a worker keeps between appends (``kept_state.KEPT_STATES``) refers, once taken
    for the next version, to that version's session, threads and message lists only, none of
    the earlier version's left anywhere in it (a session with branches; then the warm path
    over real appends, where the kept replay itself goes on)."""
    _forget()
    built = branch_above_200k_beside_a_main_that_compacted_below_it()
    session = engine.load_session(str(built.write(tmp_path / "s.jsonl")))
    assert len(session.threads) > 1
    config, preset = engine.resolve_session_config(session)
    _, data = engine.replay_live(session, config, preset_name=preset)
    grown = _extended(session)
    taken = kept_state.take_kept(data, grown, live_module.LiveState)
    assert taken is not None
    sessions, lists = _reachable_session_objects(taken[0])
    old_sessions, old_lists = _session_objects(session)
    assert not sessions & old_sessions
    assert not lists & old_lists
    assert sessions <= _session_objects(grown)[0]
    assert id(grown) in sessions

    data = TOOL_HEAVY.read_bytes()
    versions = _Versions(tmp_path / "warm", data)
    cuts = _cuts(data, [0.5, 0.6, 0.7, 0.8])
    text, state = versions.warm(cuts[0], None)
    went_on = 0
    for end in cuts[1:]:
        (before,) = kept_state.KEPT_STATES.values()
        before_state = state
        text, state = versions.warm(end, state)
        (after,) = kept_state.KEPT_STATES.values()
        if after.live.replay is not before.live.replay:
            continue  # went on from the state's rewind (a response the append completed)
        sessions, lists = _reachable_session_objects(after.live)
        old_sessions, old_lists = _session_objects(before.session)
        assert not sessions & old_sessions, f"version {versions.k}"
        assert not lists & old_lists, f"version {versions.k}"
        assert id(after.session) in sessions
        path = versions.folder / f"v{versions.k}" / "session.jsonl"
        with _another_process():
            assert text == _cold(path, before_state)[0], f"version {versions.k}"
        went_on += 1
    assert went_on  # the kept replay went on over appends


def test_a_kept_state_is_used_only_for_the_bytes_it_was_dumped_to(tmp_path):
    """A stored state that is not the one this process wrote last (another worker's, for the
    same version, here with one earlier row otherwise) is read from its bytes: the update is
    the one a process keeping nothing makes of it."""
    _forget()
    data = TOOL_HEAVY.read_bytes()
    versions = _Versions(tmp_path, data)
    cuts = _cuts(data, [0.5, 0.6, 0.7, 0.8])
    _, state = versions.warm(cuts[0], None)
    _, state = versions.warm(cuts[2], state)
    (kept,) = kept_state.KEPT_STATES.values()
    with _another_process():
        path = versions.folder / f"v{versions.k}" / "session.jsonl"
        session = engine.load_session(str(path), name="session.jsonl")
        live, _ = live_module._load(state, session, None)
        rows = live.replay.by_thread["main"].requests
        rows[0] = {**rows[0], "model_tokens": rows[0]["model_tokens"] + 1000}
        summarizer = engine.ExtractiveSummarizer()
        other = checkpoints.dump(live, session, summarizer, None, live=True) + (live.rewind or b"")
    text, _ = versions.warm(cuts[4], other)
    *_, after = kept_state.KEPT_STATES.values()
    assert after.live.replay is not kept.live.replay  # the stored state was read
    path = versions.folder / f"v{versions.k}" / "session.jsonl"
    with _another_process():
        cold = _cold(path, other)[0]
        assert text == cold
        assert cold != _cold(path, state)[0]  # the row changed is in the result


def test_a_kept_state_is_not_bound_to_a_session_read_afresh(tmp_path):
    """A session whose messages are not the kept state's very objects (read whole, not on
    from the last version's read: a worker's read kept for another file, a restart of the
    read) gets the stored state read back, not the kept one."""
    _forget()
    session = engine.load_session(str(TOOL_HEAVY), name="session.jsonl")
    config, preset = engine.resolve_session_config(session)
    _, data = engine.replay_live(session, config, preset_name=preset)
    afresh = engine.load_session(str(TOOL_HEAVY), name="session.jsonl")
    assert kept_state.take_kept(data, afresh, live_module.LiveState) is None
    _, data = engine.replay_live(session, config, preset_name=preset)
    assert kept_state.take_kept(data, _extended(session), live_module.LiveState) is not None


def test_a_kept_state_s_requests_are_listed_on_from_the_earlier_ones():
    """The requests of a thread whose earlier messages are the very objects the kept state's
    requests were listed from are those requests and the later messages' (``thread_requests``
    of the whole thread); without that (``same`` 0: a state read back) they are listed
    whole."""
    session = engine.load_session(str(TOOL_HEAVY), name="session.jsonl")
    thread = session.threads[0]
    whole = session_module.thread_requests(thread)
    for k in (len(thread.messages) // 3, len(thread.messages) // 2, len(thread.messages) - 1):
        earlier = replace(thread, messages=thread.messages[:k])
        old = session_module.thread_requests(earlier)
        grown = kept_state.grown_requests(thread, old, k)
        assert grown is not None
        assert grown.thread is thread
        assert [(r.index, r.position) for r in grown] == [(r.index, r.position) for r in whole]
        assert all(a.message is b.message for a, b in zip(grown, whole, strict=True))
        assert kept_state.grown_requests(thread, old, 0) is None
