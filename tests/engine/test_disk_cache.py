"""The one disk-cache helper: atomic writes, tolerant reads (a bad cache file is no cache)."""

from __future__ import annotations

import os
import pickle
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from contextlab.engine.input import disk_cache


def test_a_written_pickle_reads_back_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "nested" / "value.pickle"
    assert disk_cache.write_pickle_atomic(target, {"a": 1})
    assert disk_cache.read_pickle(target, dict) == {"a": 1}
    assert sorted(p.name for p in target.parent.iterdir()) == ["value.pickle"]


def test_a_truncated_or_foreign_cache_file_reads_as_missing(tmp_path: Path) -> None:
    target = tmp_path / "value.pickle"
    target.write_bytes(pickle.dumps({"a": 1})[:-3])  # truncated
    assert disk_cache.read_pickle(target, dict) is None
    target.write_bytes(b"not a pickle at all")
    assert disk_cache.read_pickle(target, dict) is None
    target.write_bytes(pickle.dumps([1, 2]))  # another type than asked for
    assert disk_cache.read_pickle(target, dict) is None
    target.write_bytes(pickle.dumps({"a": 1}))  # the right type, refused by the caller's check
    assert disk_cache.read_pickle(target, dict, lambda value: len(value) > 5) is None
    assert disk_cache.read_pickle(tmp_path / "absent.pickle", dict) is None


def test_an_unwritable_cache_folder_is_reported_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("the cache folder's parent is a file")
    assert not disk_cache.write_bytes_atomic(blocker / "sub" / "value.bin", b"x")
    assert disk_cache.read_bytes(blocker / "sub" / "value.bin") is None


def test_a_rewrite_replaces_the_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "value.bin"
    assert disk_cache.write_bytes_atomic(target, b"a" * 10_000)
    assert disk_cache.write_bytes_atomic(target, b"b")
    assert disk_cache.read_bytes(target) == b"b"


def test_gc_paused_pauses_the_collector_and_puts_it_back_as_it_was():
    import gc

    from contextlab.engine.input.disk_cache import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested: the outer one turns it back on
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off: left off
    finally:
        gc.enable()


def test_gc_paused_puts_what_it_made_in_the_oldest_generation():
    """Objects made under a long pause leave it in the oldest generation: the next collections
    (young, then middle) would otherwise walk every one of them, twice, for nothing."""
    import gc

    from contextlab.engine.input.disk_cache import PROMOTE_FROM_OBJECTS, gc_paused

    gc.collect()
    with gc_paused():
        made = [[n] for n in range(2 * PROMOTE_FROM_OBJECTS)]
    probe = {id(made[0]), id(made[-1])}
    assert probe <= {id(o) for o in gc.get_objects(generation=2)}
    assert not probe & {id(o) for o in gc.get_objects(generation=0)}
    assert gc.isenabled()
    # a short pause leaves its few objects to the collector as before
    with gc_paused():
        few = [[n] for n in range(10)]
    assert id(few[0]) not in {id(o) for o in gc.get_objects(generation=2)}


def test_gc_paused_leaves_no_frozen_objects_and_spares_frozen_ones():
    import gc

    from contextlab.engine.input.disk_cache import PROMOTE_FROM_OBJECTS, gc_paused

    with gc_paused():
        made = [[n] for n in range(2 * PROMOTE_FROM_OBJECTS)]
    assert made
    assert gc.get_freeze_count() == 0
    gc.freeze()  # someone else's frozen start-up state stays frozen
    try:
        frozen = gc.get_freeze_count()
        with gc_paused():
            more = [[n] for n in range(2 * PROMOTE_FROM_OBJECTS)]
        assert more
        # neither unfrozen (0) nor frozen again with what the pause made (2 × more); other
        # threads of the test process (live servers) may free a few frozen objects meanwhile
        assert frozen - PROMOTE_FROM_OBJECTS < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_loading_and_replaying_leave_no_cyclic_garbage():
    """What ``gc_paused`` promotes is freed by reference counting when dropped: a session and
    its replays (recorded and what-if, both agents) make no reference cycles, so keeping their
    objects out of young collections holds no memory longer."""
    import gc

    from contextlab.engine.config.resolve import resolve_session_config
    from contextlab.engine.input.sources.registry import load_session
    from contextlab.engine.replay.driver import replay

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    files = [
        *sorted((fixtures / "codex").glob("*.jsonl"))[:4],
        *sorted(fixtures.glob("*.jsonl"))[:4],
    ]
    assert len(files) >= 5
    for path in files:
        gc.collect()
        gc.disable()
        try:
            session = load_session(path)
            config, preset = resolve_session_config(session)
            for mode in ("recorded", "whatif"):
                replay(session, config, mode=mode, preset_name=preset).to_json()
            del session
            assert gc.collect() == 0, path.name
        finally:
            gc.enable()


def test_atomic_writes_hand_the_kernel_pieces_of_at_most_the_piece_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live state of megabytes is written in pieces (``WRITE_PIECE_BYTES``): one write of
    the whole makes the page cache take large blocks of memory, slow to touch on a VM whose
    balloon hands free blocks back to its host (bench/README.md, ``bench_live.py``)."""
    sizes: list[int] = []
    real_fdopen = os.fdopen

    class Recording:
        def __init__(self, fh: Any) -> None:
            self.fh = fh

        def write(self, data: Any) -> int:
            sizes.append(len(data))
            return int(self.fh.write(data))

        def __enter__(self) -> Recording:
            return self

        def __exit__(self, *exc: object) -> None:
            self.fh.close()

    monkeypatch.setattr(disk_cache.os, "fdopen", lambda *a, **k: Recording(real_fdopen(*a, **k)))
    piece = disk_cache.WRITE_PIECE_BYTES
    big = bytes(range(256)) * ((3 * piece + 5) // 256 + 1)
    target = tmp_path / "state.pickle"
    assert disk_cache.write_bytes_atomic(target, big)
    assert target.read_bytes() == big
    assert sizes
    assert max(sizes) <= piece
    assert sum(sizes) == len(big)
    sizes.clear()
    assert disk_cache.write_parts_atomic(target, (b"run 7\n", big, b"tail"))
    assert target.read_bytes() == b"run 7\n" + big + b"tail"
    assert max(sizes) <= piece
    assert sum(sizes) == len(big) + 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.pickle"]


def test_a_large_file_replaced_is_removed_by_the_removal_thread_not_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replace of a large file leaves its removal (the disk's discard of its blocks, which
    ext4 waits for) to ``_remove_apart``'s thread; a small one is removed by the replace."""
    removed: list[tuple[str, str]] = []
    real_unlink = Path.unlink

    def recording_unlink(self: Path, missing_ok: bool = False) -> None:
        removed.append((self.name, threading.current_thread().name))
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", recording_unlink)
    target = tmp_path / "state.pickle"
    large = b"s" * disk_cache.REMOVE_APART_BYTES
    assert disk_cache.write_bytes_atomic(target, large)
    assert disk_cache.write_bytes_atomic(target, large + b"2")
    assert disk_cache.write_bytes_atomic(target, b"small")
    assert disk_cache.write_bytes_atomic(target, b"small again")
    for _ in range(500):  # the removal thread's turn
        if sorted(p.name for p in tmp_path.iterdir()) == ["state.pickle"]:
            break
        time.sleep(0.01)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.pickle"]
    assert target.read_bytes() == b"small again"
    # the two large versions replaced went to the thread, under their second names
    assert len(removed) == 2
    assert all(name.endswith(".replaced.tmp") for name, _ in removed)
    assert {thread for _, thread in removed} == {"disk-cache-removals"}
