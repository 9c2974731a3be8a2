"""Parse and tokenize once: cached sessions replay exactly like fresh ones."""

from __future__ import annotations

import shutil
from pathlib import Path

from contextlab import engine
from contextlab.engine.input import session_cache
from tests.engine.test_pipeline import long_session


def test_cached_session_replays_identically_and_is_reused(tmp_path):
    path = long_session(6).write(tmp_path / "s.jsonl")
    cache = tmp_path / "cache"
    first = engine.load_session_cached(path, cache_dir=cache)
    files = list(cache.glob("*.pickle"))
    assert len(files) == 1
    assert engine.load_session_cached(path, cache_dir=cache) is first  # kept in memory
    session_cache._RECENT.clear()  # as in another worker process
    second = engine.load_session_cached(path, cache_dir=cache)
    assert second is not first
    assert all(b.tok >= 0 for m in second.main.messages for b in m.blocks)  # tokenized already
    config = engine.get_preset("claude-code-2.1.88")
    fresh = engine.replay(engine.load_session(str(path)), config).to_json()
    assert engine.replay(second, config).to_json() == fresh


def test_sessions_kept_in_memory_are_bounded_by_their_files_bytes(tmp_path, monkeypatch):
    # a worker must not hold a session of gigabytes while it reads the next one (issue #25)
    session_cache._RECENT.clear()
    small = long_session(3).write(tmp_path / "small.jsonl")
    large = long_session(12).write(tmp_path / "large.jsonl")
    assert small.stat().st_size < large.stat().st_size
    monkeypatch.setattr(session_cache, "RECENT_MAX_BYTES", large.stat().st_size - 1)
    cache = tmp_path / "cache"
    first = engine.load_session_cached(small, cache_dir=cache)
    assert engine.load_session_cached(small, cache_dir=cache) is first  # kept
    big = engine.load_session_cached(large, cache_dir=cache)
    assert not session_cache._RECENT  # the small one let go before, the large one not kept
    assert engine.load_session_cached(large, cache_dir=cache) is not big
    again = engine.load_session_cached(small, cache_dir=cache)
    assert again is not first
    assert engine.load_session_cached(small, cache_dir=cache) is again
    assert again.main.messages == first.main.messages
    session_cache._RECENT.clear()  # (the next tests read these sessions' files afresh)


def test_a_corrupt_cache_file_is_ignored_and_rewritten(tmp_path):
    path = long_session(3).write(tmp_path / "s.jsonl")
    cache = tmp_path / "cache"
    engine.load_session_cached(path, cache_dir=cache)
    (target,) = cache.glob("*.pickle")
    target.write_bytes(b"not a pickle")
    session_cache._RECENT.clear()
    session = engine.load_session_cached(path, cache_dir=cache)
    assert session.main.messages
    assert target.read_bytes() != b"not a pickle"


def test_replays_of_the_same_session_and_config_reuse_the_calibration_pass(tmp_path, monkeypatch):
    from contextlab.engine.replay.thread import ThreadReplay

    path = long_session(4).write(tmp_path / "s.jsonl")
    session = engine.load_session(str(path))
    config = engine.get_preset("claude-code-2.1.88")
    probes = []
    real_run = ThreadReplay.run

    def counting(self, *, with_results):
        if not with_results:
            probes.append(1)
        return real_run(self, with_results=with_results)

    monkeypatch.setattr(ThreadReplay, "run", counting)
    first = engine.replay(session, config, mode="whatif").to_json()
    second = engine.replay(session, config, mode="whatif").to_json()
    assert first == second
    assert len(probes) == 1


class _FolderMirror:
    """A ``CacheMirror`` in a folder (as the object store is for hosts sharing no disk),
    noting each ``fetch`` it is asked for (the object store's GETs)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.fetched: list[str] = []

    def fetch(self, name: str, target: Path) -> bool:
        self.fetched.append(name)
        if not (self.folder / name).is_file():
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.folder / name, target)
        return True

    def store(self, name: str, source: Path) -> None:
        shutil.copyfile(source, self.folder / name)

    def discard(self, name: str) -> None:
        (self.folder / name).unlink(missing_ok=True)


def test_a_first_replay_asks_the_mirror_for_the_upload_checks_parse_only(tmp_path):
    # a worker host's first replay of an upload: the web host kept its parse in the mirror
    # (``keep_parsed``); asking for a prepared copy first was one missing object per run
    path = long_session(4).write(tmp_path / "s.jsonl")
    sha = session_cache.file_sha256(path)
    config = engine.get_preset("claude-code-2.1.88")
    fresh = engine.replay(engine.load_session(str(path)), config).to_json()
    for parsed_first in (True, False):
        mirror = _FolderMirror(tmp_path / f"store-{parsed_first}")
        kept = engine.keep_parsed(
            path,
            engine.load_session(str(path)),
            cache_dir=tmp_path / f"web-{parsed_first}",
            sha256=sha,
            mirror=mirror,
        )
        assert kept is not None
        session_cache._RECENT.clear()  # another host's worker process
        first = engine.load_session_cached(
            path,
            cache_dir=tmp_path / f"worker-{parsed_first}",
            sha256=sha,
            mirror=mirror,
            parsed_first=parsed_first,
        )
        prepared = kept.name.removesuffix(session_cache.PARSED_SUFFIX) + ".pickle"
        if parsed_first:
            assert mirror.fetched == [kept.name]  # the parse only: no missing prepared copy
        else:
            assert mirror.fetched == [prepared, kept.name]  # as before: the prepared first
        assert engine.replay(first, config).to_json() == fresh
        # either way the prepared copy replaces the parse, and a later replay reads it
        assert sorted(p.name for p in mirror.folder.iterdir()) == [prepared]
        mirror.fetched.clear()
        session_cache._RECENT.clear()
        later = engine.load_session_cached(
            path, cache_dir=tmp_path / f"host3-{parsed_first}", sha256=sha, mirror=mirror
        )
        assert mirror.fetched == [prepared]
        assert engine.replay(later, config).to_json() == fresh
    session_cache._RECENT.clear()
