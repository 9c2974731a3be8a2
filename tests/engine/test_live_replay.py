"""A live session's replay goes on from its last state (``engine.continue_live``): the earlier
rows are the ones the last replay gave, only the appended requests are replayed (counted), and
a state that does not fit the grown session is refused (the caller then replays it whole)."""

from __future__ import annotations

import json
import multiprocessing
import pickle
import sys
from array import array
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.input.session import thread_requests
from contextlab.engine.replay import checkpoints
from contextlab.engine.replay import live as live_module
from tests.conftest import DEMO, FIXTURES, ROOT
from tests.engine.test_growing_session import compacting_transcript

TOOL_HEAVY = DEMO / "marot__spotter__tool_heavy.jsonl"
ENTIREIO = FIXTURES / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl"


def _config(session: engine.Session) -> tuple[engine.PipelineConfig, str]:
    return engine.resolve_session_config(session)


def _plain(result: engine.ReplayResult) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(result.to_json(), default=str))
    return out


def _line_ends(data: bytes) -> list[int]:
    return [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]


def _user_line_start(data: bytes, share: float) -> int:
    """The start of the first user line from ``share`` of the file on: every response before
    it is whole (Claude Code writes a response block by block, one line each)."""
    ends = _line_ends(data)
    for start in ends[int(len(ends) * share) : -1]:
        if json.loads(data[start : data.index(b"\n", start)]).get("type") == "user":
            return start
    raise AssertionError("no user line after the cut")


def _session(tmp_path: Path, data: bytes, name: str) -> engine.Session:
    path = tmp_path / name
    path.write_bytes(data)
    return engine.load_session(str(path), name="session.jsonl")


def _start(tmp_path: Path, data: bytes) -> tuple[dict[str, Any], bytes, engine.PipelineConfig]:
    session = _session(tmp_path, data, "v0.jsonl")
    config, preset = _config(session)
    result, state = engine.replay_live(session, config, preset_name=preset)
    return _plain(result), state, config


@pytest.mark.parametrize("source", [TOOL_HEAVY, ENTIREIO], ids=["tool_heavy", "entireio"])
def test_a_live_replay_is_the_whole_replay(tmp_path, source):
    session = _session(tmp_path, source.read_bytes(), "a.jsonl")
    config, preset = _config(session)
    live, state = engine.replay_live(session, config, preset_name=preset)
    again = _session(tmp_path, source.read_bytes(), "b.jsonl")
    whole = engine.replay(again, config, mode="recorded", preset_name=preset)
    assert json.dumps(_plain(live), sort_keys=True) == json.dumps(_plain(whole), sort_keys=True)
    assert state.startswith(b"contextlab live replay ")


@pytest.mark.parametrize("source", [TOOL_HEAVY, ENTIREIO], ids=["tool_heavy", "entireio"])
def test_an_append_replays_only_its_requests_and_keeps_the_earlier_rows(tmp_path, source):
    data = source.read_bytes()
    cut = _user_line_start(data, 2 / 3)
    before, state, _ = _start(tmp_path, data[:cut])
    grown = _session(tmp_path, data, "v1.jsonl")
    seen: list[int] = []
    result, _ = engine.continue_live(state, grown, replayed=seen.append)
    after = _plain(result)
    known = len(before["requests"])
    assert len(after["requests"]) > known
    # earlier rows exactly as the last replay stored them
    assert after["requests"][:known] == before["requests"]
    # the replay ran on the new requests only, each once, in order
    assert seen == list(range(known, len(after["requests"])))
    # the new rows are the whole file's requests (same lines, same recorded facts)
    whole = _plain(engine.replay(_session(tmp_path, data, "w.jsonl"), *_whole_args(grown)))
    assert [r["line"] for r in after["requests"]] == [r["line"] for r in whole["requests"]]
    assert [r["recorded"] for r in after["requests"]] == [r["recorded"] for r in whole["requests"]]
    assert [r["recorded_cost_usd"] for r in after["requests"]] == [
        r["recorded_cost_usd"] for r in whole["requests"]
    ]
    assert after["summary"]["requests"] == len(after["requests"])


def _whole_args(session: engine.Session) -> tuple[engine.PipelineConfig]:
    return (_config(session)[0],)


def test_appends_go_on_from_each_other_across_a_compaction(tmp_path):
    data, _ = compacting_transcript()
    cuts = [_user_line_start(data, k / 4) for k in (1, 2, 3)] + [len(data)]
    before, state, _ = _start(tmp_path, data[: cuts[0]])
    rows = before["requests"]
    for n, cut in enumerate(cuts[1:], start=1):
        seen: list[int] = []
        grown = _session(tmp_path, data[:cut], f"v{n}.jsonl")
        result, state = engine.continue_live(state, grown, replayed=seen.append)
        after = _plain(result)
        assert after["requests"][: len(rows)] == rows
        assert seen == list(range(len(rows), len(after["requests"])))
        rows = after["requests"]
    assert any(e["step"] == "autocompact" for r in rows for e in r["events"])
    whole = _plain(engine.replay(_session(tmp_path, data, "w.jsonl"), _config(grown)[0]))
    assert len(rows) == len(whole["requests"])


def test_nothing_appended_replays_nothing(tmp_path):
    data = TOOL_HEAVY.read_bytes()
    before, state, _ = _start(tmp_path, data)
    seen: list[int] = []
    result, _ = engine.continue_live(
        state, _session(tmp_path, data, "same.jsonl"), replayed=seen.append
    )
    assert seen == []
    assert _plain(result)["requests"] == before["requests"]


def test_a_state_that_does_not_fit_is_refused(tmp_path):
    data = TOOL_HEAVY.read_bytes()
    ends = _line_ends(data)
    _, state, _ = _start(tmp_path, data[: ends[len(ends) // 2]])
    # a shorter file (rewritten): its messages are not the state's
    shorter = _session(tmp_path, data[: ends[3]], "short.jsonl")
    with pytest.raises(ValueError, match=r"lost messages|does not fit"):
        engine.continue_live(state, shorter)
    # another session altogether
    with pytest.raises(ValueError, match=r"changed|lost messages|does not fit"):
        engine.continue_live(state, _session(tmp_path, ENTIREIO.read_bytes(), "other.jsonl"))
    # a state of another engine version, and a summary's checkpoint, are never taken
    grown = _session(tmp_path, data, "grown.jsonl")
    old = state.replace(
        f"replay {checkpoints.CHECKPOINT_VERSION}\n".encode(),
        f"replay {checkpoints.CHECKPOINT_VERSION - 1}\n".encode(),
        1,
    )
    with pytest.raises(ValueError, match="another engine version"):
        engine.continue_live(old, grown)
    with pytest.raises(ValueError, match="another engine version"):
        engine.continue_live(b"contextlab replay checkpoint 4\n" + state, grown)


def test_an_append_inside_a_response_goes_on_from_before_that_request(tmp_path):
    """The last response was cut between its blocks: its row changes, so the update goes on
    from the replay kept before that request (one thread); without it, the state does not fit
    (the caller replays the session whole)."""
    data = TOOL_HEAVY.read_bytes()
    ends = _line_ends(data)

    def role(end: int) -> str | None:
        record = json.loads(data[end : data.index(b"\n", end)])
        return (record.get("message") or {}).get("role")

    # a line end between two lines of one response (the same message id)
    inside = next(
        end
        for prev, end in zip(ends[len(ends) // 3 :], ends[len(ends) // 3 + 1 : -1], strict=False)
        if role(prev) == "assistant"
        and role(end) == "assistant"
        and json.loads(data[prev:end])["message"]["id"]
        == json.loads(data[end : data.index(b"\n", end)])["message"]["id"]
    )
    before, state, _ = _start(tmp_path, data[:inside])
    known = len(before["requests"])
    grown = _session(tmp_path, data, "grown.jsonl")
    seen: list[int] = []
    result, _ = engine.continue_live(state, grown, replayed=seen.append)
    after = _plain(result)
    # the rows before the cut response as they were; that response's row (its request from
    # the whole response's record) and the new ones replayed
    assert after["requests"][: known - 1] == before["requests"][:-1]
    assert seen == list(range(known - 1, len(after["requests"])))
    whole = _plain(engine.replay(_session(tmp_path, data, "w.jsonl"), _config(grown)[0]))
    assert after["requests"][known - 1]["recorded"] == whole["requests"][known - 1]["recorded"]

    # a state without that earlier replay does not fit
    earlier = engine.load_session(str(tmp_path / "v0.jsonl"), name="session.jsonl")
    summarizer = engine.ExtractiveSummarizer()
    live = checkpoints.load(state, earlier, summarizer, None, live=True)
    live.rewind = None  # type: ignore[attr-defined]
    bare = checkpoints.dump(live, earlier, summarizer, None, live=True)
    with pytest.raises(ValueError, match="last response changed"):
        engine.continue_live(bare, _session(tmp_path, data, "grown2.jsonl"))


def test_a_session_grown_past_the_refit_share_is_refused(tmp_path):
    """The frozen calibration was fitted on the requests known then: past ``refit_share`` more,
    the update is refused (the caller replays whole and fits again)."""
    data = TOOL_HEAVY.read_bytes()
    before, state, _ = _start(tmp_path, data[: _user_line_start(data, 0.5)])
    grown = _session(tmp_path, data, "grown.jsonl")
    known = len(before["requests"])
    total = len(_plain(engine.replay(grown, _config(grown)[0]))["requests"])
    assert total > known
    share = (total - known) / known
    with pytest.raises(ValueError, match="calibration was fitted on"):
        engine.continue_live(state, _session(tmp_path, data, "g1.jsonl"), refit_share=share / 2)
    result, _ = engine.continue_live(state, _session(tmp_path, data, "g2.jsonl"), refit_share=share)
    assert len(_plain(result)["requests"]) == total


def test_a_state_refers_to_the_sessions_blocks_instead_of_copying_them(tmp_path):
    """A step's state may hold the session's blocks (``restore``'s index of the files read
    holds every Read result's): the live state keeps them by reference, so its bytes (pickled
    at every append, and read back at the next) do not grow with the session's text. The
    state read back against the grown session holds that session's very blocks."""
    data, _ = compacting_transcript()
    _, state, _ = _start(tmp_path, data)
    session = _session(tmp_path, data, "again.jsonl")
    live = checkpoints.load(state, session, engine.ExtractiveSummarizer(), None, live=True)
    runners = live.replay.finished  # type: ignore[attr-defined]
    reads = [
        block
        for runner in runners.values()
        for block in runner.state.get("restore", {}).get("reads", {}).values()
    ]
    assert reads, "the compaction's restoration indexed no Read result"
    blocks = {id(b) for t in session.threads for m in t.messages for b in m.blocks}
    assert all(id(block) in blocks for block in reads)


def test_a_state_keeps_each_threads_requests_as_their_positions(tmp_path):
    """A thread's requests (one per response, each a reference to its message) are pickled as
    the thread and their positions: read back, they are the session's ``thread_requests``,
    holding its very messages. Requests no longer ``thread_requests``' are pickled whole."""
    data = TOOL_HEAVY.read_bytes()
    _, state, _ = _start(tmp_path, data)
    assert b"RequestInfo" not in state  # no request pickled as an object
    session = _session(tmp_path, data, "again.jsonl")
    live = checkpoints.load(state, session, engine.ExtractiveSummarizer(), None, live=True)
    runners = live.replay.finished  # type: ignore[attr-defined]
    assert runners
    for runner in runners.values():
        fresh = thread_requests(runner.thread)
        assert runner.requests == fresh
        assert len(fresh) > 1
        assert all(a.message is b.message for a, b in zip(runner.requests, fresh, strict=True))
    requests = thread_requests(session.threads[0])
    requests.reverse()  # no longer the thread's requests in order: kept as they are
    back = pickle.loads(pickle.dumps(requests))
    assert [r.position for r in back] == [r.position for r in requests]


def test_a_continuation_keeps_the_thinking_sizes_a_whole_walk_finds(tmp_path, monkeypatch):
    """Each append's state keeps how every response its requests saw had its thinking sized;
    a continuation carries the last state's sizes and reads only the responses it sized afresh
    (not every message at every append): the same as reading every message again."""
    sys.path.insert(0, str(ROOT / "bench"))
    from gen_synthetic import generate

    source = tmp_path / "synthetic.jsonl"
    generate(source, 400_000, seed=1)
    data = source.read_bytes()
    compared: list[dict[str, dict[int, Any]]] = []
    init = live_module.LiveState.__init__

    def checked(self: Any, replay: Any, fitted: int, thinking: Any = None, carried: Any = None):
        init(self, replay, fitted, thinking, carried)
        if carried is not None:
            whole = object.__new__(live_module.LiveState)
            init(whole, replay, fitted, thinking)
            assert self.sized == whole.sized
            compared.append(self.sized)

    monkeypatch.setattr(live_module.LiveState, "__init__", checked)
    cuts = [_user_line_start(data, k / 5) for k in (2, 3, 4)] + [len(data)]
    _, state, _ = _start(tmp_path, data[: cuts[0]])
    for n, cut in enumerate(cuts[1:], start=1):
        _, state = engine.continue_live(state, _session(tmp_path, data[:cut], f"v{n}.jsonl"))
    assert len(compared) == 3
    assert any(len(sized) > 2 for sized in compared[-1].values())


def test_an_appended_list_pickles_only_what_was_added_since_its_last_dump():
    rows = checkpoints.AppendedList([{"n": n, "events": [n]} for n in range(8)])
    first = pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)
    (whole,) = rows.chunks
    rows.append({"n": 8, "events": []})
    again = pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)
    # the earlier items' chunk copied as it was, one chunk more for the new item
    assert whole[1] in again
    assert [count for count, _ in rows.chunks] == [8, 1]
    back = pickle.loads(again)
    assert back == rows
    assert type(back) is checkpoints.AppendedList
    assert back.chunks == rows.chunks  # read back, it goes on from the same chunks
    assert len(first) < len(again)
    # chunks of as many items merge (a binary counter's carry): few chunks however many dumps
    for n in range(9, 40):
        back.append({"n": n})
        back = pickle.loads(pickle.dumps(back, protocol=pickle.HIGHEST_PROTOCOL))
    assert [row["n"] for row in back] == list(range(40))
    assert len(back.chunks) <= 6
    # a change other than an append drops the chunks: the list is pickled whole again
    back[3] = {"n": "changed"}
    assert back.chunks == []
    assert pickle.loads(pickle.dumps(back))[3] == {"n": "changed"}


def test_an_appended_lists_large_chunks_are_kept_compressed():
    """A chunk of many rows (text: most of a live state's bytes, written, read back and
    compared at every append) is kept compressed; an append's own small chunk stays a plain
    pickle. Either reads back to the same items, in a fresh process too."""
    rows = checkpoints.AppendedList(
        [{"n": n, "text": f"line {n} of a tool's output, " * 40} for n in range(200)]
    )
    plain = pickle.dumps(list(rows), protocol=pickle.HIGHEST_PROTOCOL)
    assert len(plain) >= checkpoints.COMPRESS_CHUNK_BYTES
    first = pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)
    (whole,) = rows.chunks
    assert len(whole[1]) < len(plain) / 2
    assert len(first) < len(plain) / 2
    rows.append({"n": 200, "text": "the last one"})
    again = pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)
    small = rows.chunks[-1][1]
    assert small.startswith(pickle.PROTO)  # too small to be worth compressing
    assert pickle.loads(small) == [{"n": 200, "text": "the last one"}]
    checkpoints._DECODED.clear()  # as a worker that did not write it
    checkpoints._DECODED_BYTES[0] = 0
    back = pickle.loads(again)
    assert back == rows
    assert back.chunks == rows.chunks
    # a damaged compressed chunk is refused as any chunk that does not read back
    checkpoints._DECODED.clear()
    checkpoints._DECODED_BYTES[0] = 0
    broken = again.replace(whole[1][40:80], bytes(40))
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(broken)


def test_a_live_states_views_keep_their_sizes_as_machine_integers(tmp_path):
    """A thread's view keeps its messages' sizes and running sums as ``array``s (pickled as one
    run of bytes at every append, not as thousands of int objects read one by one), grown by
    an append and read back the same as a whole measure of the grown thread gives."""
    data = TOOL_HEAVY.read_bytes()
    cut = _user_line_start(data, 2 / 3)
    _, state, _ = _start(tmp_path, data[:cut])
    grown = _session(tmp_path, data, "v1.jsonl")
    _, after = engine.continue_live(state, grown)
    again = _session(tmp_path, data, "v2.jsonl")
    summarizer = engine.ExtractiveSummarizer()
    live = checkpoints.load(after, again, summarizer, None, live=True)
    whole = _session(tmp_path, data, "v3.jsonl")
    config, preset = _config(whole)
    _, whole_state = engine.replay_live(whole, config, preset_name=preset)
    fresh = checkpoints.load(whole_state, whole, summarizer, None, live=True)
    for thread_id, runner in live.replay.finished.items():  # type: ignore[attr-defined]
        view = runner.view
        other = fresh.replay.finished[thread_id].view  # type: ignore[attr-defined]
        for name in ("msg_tok", "msg_rough", "cum_tok", "cum_rough"):
            sizes = getattr(view, name)
            assert type(sizes) is array, name
            assert sizes == getattr(other, name), name
        assert list(view.cum_tok) == [0, *accumulate(view.msg_tok)]


def test_an_appended_list_of_objects_is_pickled_as_a_list():
    """An item that is not plain data is never chunked (a chunk, pickled on its own, would copy
    the session's objects the state refers to): the list is pickled whole, as before."""
    session = engine.load_session(str(TOOL_HEAVY), name="session.jsonl")
    message = session.threads[0].messages[0]
    items = checkpoints.AppendedList([{"n": 1}, message])
    summarizer = engine.ExtractiveSummarizer()
    data = checkpoints.dump({"items": items}, session, summarizer, None, live=True)
    back = checkpoints.load(data, session, summarizer, None, live=True)
    assert back["items"][1] is message  # type: ignore[index]
    assert items.chunks == []


def test_each_append_copies_the_earlier_rows_pickle_instead_of_pickling_them_again(tmp_path):
    """A live state keeps its rows and synthetic messages in chunks (``AppendedList``): the
    state after an append holds the earlier state's chunks byte for byte, and read back (as
    another process would) it goes on to the same result as the process that wrote it."""
    data = TOOL_HEAVY.read_bytes()
    # each append fewer requests than the first replay's (a chunk merges with one as large)
    cuts = [_user_line_start(data, share) for share in (0.6, 0.75, 0.9)] + [len(data)]
    _, state, _ = _start(tmp_path, data[: cuts[0]])
    states: list[bytes] = []
    for n, cut in enumerate(cuts[1:], start=1):
        session = _session(tmp_path, data[:cut], f"v{n}.jsonl")
        live = checkpoints.load(state, session, engine.ExtractiveSummarizer(), None, live=True)
        chunks = [
            chunk
            for runner in live.replay.finished.values()  # type: ignore[attr-defined]
            for _, chunk in runner.position.results.chunks
        ]
        assert chunks
        result, after = engine.continue_live(state, session)
        last = _plain(result)
        # the earlier rows' chunk (the first, the largest) copied as it was
        assert chunks[0] in after
        state, states = after, [*states, after]
    # the state of the first append, continued over the others in a fresh process (another
    # worker's), gives what continuing it here gives, and the rows the appends gave one by one
    grown = _session(tmp_path, data, "g.jsonl")
    here = _plain(engine.continue_live(states[0], grown)[0])
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        there = pool.apply(_continue_in_process, (states[0], str(tmp_path / "g.jsonl")))
    assert json.dumps(there, sort_keys=True) == json.dumps(here, sort_keys=True)
    assert here["requests"] == last["requests"]


def _continue_in_process(state: bytes, path: str) -> dict[str, Any]:
    session = engine.load_session(path, name="session.jsonl")
    return _plain(engine.continue_live(state, session)[0])
