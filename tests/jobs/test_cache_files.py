"""The periodic recovery removes session cache files nobody used for SESSION_CACHE_STALE_AFTER
(copies of replayed sessions, the reading state of a live session that stopped growing, a
write cut short), keeps fresh, recently read and in-use ones, and a replay after it still
works (it parses again)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.core.cache import cache
from django.core.files.base import ContentFile

from contextlab import blobs, engine
from contextlab.jobs import cache_files, tasks
from contextlab.jobs import replay as runner
from contextlab.runs import services as run_services
from contextlab.runs.models import Run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


def _age(path: Path, seconds: float, *, read_ago: float | None = None) -> None:
    then = time.time() - seconds
    read = time.time() - read_ago if read_ago is not None else then
    os.utime(path, (read, then))


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


@pytest.fixture
def cache_dir(tmp_path: Path, settings) -> Path:
    settings.SESSION_CACHE_DIR = tmp_path / "session-cache"
    settings.SESSION_CACHE_DIR.mkdir()
    return settings.SESSION_CACHE_DIR


def test_recovery_removes_unused_cache_files_and_keeps_fresh_and_in_use_ones(
    cache_dir, settings, user, make_transcript, short_jsonl, tool_heavy_jsonl
):
    stale_age = settings.SESSION_CACHE_STALE_AFTER + 60
    # two sessions replayed: each leaves its parsed, tokenized copy
    idle = make_transcript(short_jsonl)
    runner.execute_run(idle.runs.get().pk)
    busy = make_transcript(tool_heavy_jsonl)
    runner.execute_run(busy.runs.get().pk)
    idle_files = {n for n in _files(cache_dir) if n.startswith(idle.sha256)}
    busy_files = {n for n in _files(cache_dir) if n.startswith(busy.sha256)}
    assert idle_files
    assert busy_files
    # the busy session has a run waiting: its copy is about to be read
    queued = run_services.start_run(owner=user, transcript=busy, mode="whatif")
    assert queued.status == Run.Status.QUEUED
    # a live session that stopped growing left its reading state; a killed write, its temp file
    ended = "ab" * 32
    reading = cache_dir / f"{ended}.reading-v1.pickle"
    reading.write_bytes(b"state")
    cut_short = cache_dir / "tmpk2j4x.tmp"
    cut_short.write_bytes(b"half")
    # a copy written long ago but read yesterday, and one written a minute ago
    read_lately = cache_dir / f"{'cd' * 32}-100-1-v11.pickle"
    read_lately.write_bytes(b"read")
    fresh = cache_dir / f"{'ef' * 32}-100-1-v11.pickle"
    fresh.write_bytes(b"new")
    for name in _files(cache_dir) - {fresh.name}:
        _age(cache_dir / name, stale_age)
    _age(read_lately, stale_age, read_ago=24 * 3600)

    tasks.recover()

    left = _files(cache_dir)
    assert not left & idle_files
    assert reading.name not in left
    assert cut_short.name not in left
    assert busy_files <= left
    assert {read_lately.name, fresh.name} <= left
    # once the waiting run is done, the busy session's copy goes too
    Run.objects.filter(pk=queued.pk).update(status=Run.Status.DONE)
    assert set(cache_files.remove_stale_session_cache()) == busy_files
    # derived data only: the idle session replays again, parsing it anew
    engine.session_cache._RECENT.clear()  # as in another worker process
    again = run_services.start_run(owner=user, transcript=idle, mode="whatif")
    runner.execute_run(again.pk)
    again.refresh_from_db()
    assert again.status == Run.Status.DONE, again.error
    assert any(n.startswith(idle.sha256) for n in _files(cache_dir))


def test_nothing_younger_than_the_setting_goes(cache_dir, settings):
    settings.SESSION_CACHE_STALE_AFTER = 3600
    young = cache_dir / f"{'12' * 32}.reading-v1.pickle"
    young.write_bytes(b"state")
    _age(young, 3000)
    assert cache_files.remove_stale_session_cache() == []
    settings.SESSION_CACHE_STALE_AFTER = 60
    assert cache_files.remove_stale_session_cache() == [young.name]


def test_the_mirrors_copies_are_pruned_at_most_once_an_hour(cache_dir, settings):
    """The object store's ``session-cache/`` copies go by their write time; listing them costs
    a request each, so one process lists them per MIRROR_PRUNE_EVERY."""
    cache.delete(cache_files.MIRROR_PRUNE_KEY)
    prefix = blobs.SessionCacheMirror.prefix
    old = blobs.storage().save(f"{prefix}{'34' * 32}-1-1-v11.pickle", ContentFile(b"old"))
    new = blobs.storage().save(f"{prefix}{'56' * 32}-1-1-v11.pickle", ContentFile(b"new"))
    _age(Path(blobs.storage().path(old)), settings.SESSION_CACHE_STALE_AFTER + 60)
    cutoff = time.time() - settings.SESSION_CACHE_STALE_AFTER
    assert cache_files.prune_mirror(cutoff, set()) == [old]
    assert not blobs.storage().exists(old)
    assert blobs.storage().exists(new)
    _age(Path(blobs.storage().path(new)), settings.SESSION_CACHE_STALE_AFTER + 60)
    assert cache_files.prune_mirror(cutoff, set()) == []  # listed within the hour: not again
    cache.delete(cache_files.MIRROR_PRUNE_KEY)
    assert cache_files.prune_mirror(cutoff, set()) == [new]
