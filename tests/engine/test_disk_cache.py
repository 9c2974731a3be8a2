"""The one disk-cache helper: atomic writes, tolerant reads (a bad cache file is no cache)."""

from __future__ import annotations

import pickle
from pathlib import Path

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
