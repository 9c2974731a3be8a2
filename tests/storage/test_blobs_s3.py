"""``blobs`` against a real S3 server (moto_server): the requests it makes with the storage's
client give what the storage's own calls give (the same objects, bytes, content type and
times), with fewer requests and less of the worker's CPU."""

from __future__ import annotations

import time

import pytest
from celery.signals import worker_process_init
from django.core.cache import cache
from django.core.files.base import ContentFile

from contextlab import blobs
from contextlab.jobs import cache_files, tasks

pytestmark = pytest.mark.slow

PREFIX = blobs.SessionCacheMirror.prefix


@pytest.fixture(autouse=True)
def _empty_mirror(s3_storage):
    """Each test starts with nothing in the mirror (the server is the module's)."""
    for key in s3_storage.keys(PREFIX):
        s3_storage.client().delete_object(Bucket="contextlab-test", Key=key)


def _requests(s3, verb: str) -> int:
    return s3.log.read_text(errors="replace").count(f'"{verb} ')


def test_a_cached_session_is_stored_read_and_removed_as_the_storage_would(s3_storage, tmp_path):
    source = tmp_path / "a.pickle"
    source.write_bytes(bytes(range(256)) * 4000)
    mirror = blobs.SessionCacheMirror()
    mirror.store("a.pickle", source)
    # the storage's own save of the same bytes, for comparison
    saved = blobs.storage().save(f"{PREFIX}b.pickle", ContentFile(source.read_bytes()))
    client = s3_storage.client()
    ours = client.head_object(Bucket="contextlab-test", Key=f"{PREFIX}a.pickle")
    theirs = client.head_object(Bucket="contextlab-test", Key=saved)
    assert ours["ContentType"] == theirs["ContentType"]
    assert ours["ContentLength"] == theirs["ContentLength"] == source.stat().st_size
    target = tmp_path / "fetched.pickle"
    assert mirror.fetch("a.pickle", target)
    assert target.read_bytes() == source.read_bytes()
    # a missing object: not fetched, and reading it says so
    assert not mirror.fetch("none.pickle", tmp_path / "none.pickle")
    with pytest.raises(FileNotFoundError):
        blobs.open_stored(f"{PREFIX}none.pickle")
    mirror.discard("a.pickle")
    mirror.discard("a.pickle")  # gone already: fine
    blobs.delete(f"{PREFIX}none.pickle")
    assert f"{PREFIX}a.pickle" not in s3_storage.keys(PREFIX)
    assert saved in s3_storage.keys(PREFIX)


def test_one_listing_gives_each_files_time_as_the_storage_does(s3_storage):
    for name in ("x.pickle", "y.pickle", "deeper/z.pickle"):
        blobs.storage().save(f"{PREFIX}{name}", ContentFile(b"data"))
    heads = _requests(s3_storage, "HEAD")
    listed = blobs.files_written(PREFIX)
    assert _requests(s3_storage, "HEAD") == heads  # no object asked for apart
    _folders, names = blobs.listdir(PREFIX)
    assert sorted(name for name, _ in listed) == sorted(names)
    assert "deeper/z.pickle" not in dict(listed)
    for name, written in listed:
        # the time a HEAD of the object gives, to the second
        assert written == blobs.storage().get_modified_time(PREFIX + name)


def test_the_mirror_is_pruned_from_one_listing(s3_storage):
    for name in ("old.pickle", "older.pickle"):
        blobs.storage().save(f"{PREFIX}{name}", ContentFile(b"data"))
    cache.delete(cache_files.MIRROR_PRUNE_KEY)
    heads = _requests(s3_storage, "HEAD")
    # a cutoff before every write: nothing goes
    assert cache_files.prune_mirror(time.time() - 3600, set()) == []
    cache.delete(cache_files.MIRROR_PRUNE_KEY)
    # a cutoff after every write: each goes but the one a run reads
    busy = "ab" * 32
    blobs.storage().save(f"{PREFIX}{busy}-1-1-v1.pickle", ContentFile(b"data"))
    removed = cache_files.prune_mirror(time.time() + 5, {busy})
    assert sorted(removed) == [f"{PREFIX}old.pickle", f"{PREFIX}older.pickle"]
    assert _requests(s3_storage, "HEAD") == heads
    assert s3_storage.keys(PREFIX) == [f"{PREFIX}{busy}-1-1-v1.pickle"]


def test_a_worker_process_has_its_client_before_its_first_run(s3_storage, tmp_path):
    """``worker_process_init`` (sent in each process that runs tasks) makes the storage's
    client for that thread, sending nothing; the first read then uses that client."""
    store = blobs.storage()
    assert getattr(store._connections, "connection", None) is None
    sent = len(s3_storage.log.read_text(errors="replace").splitlines())
    answered = worker_process_init.send(sender="host-a")
    assert tasks._connect_storage in [receiver for receiver, _ in answered]
    made = store._connections.connection
    assert len(s3_storage.log.read_text(errors="replace").splitlines()) == sent
    store.save(f"{PREFIX}warm.pickle", ContentFile(b"warm"))
    blobs.fetch(f"{PREFIX}warm.pickle", tmp_path / "warm.pickle")
    assert (tmp_path / "warm.pickle").read_bytes() == b"warm"
    assert store._connections.connection is made


def test_on_the_filesystem_there_is_no_client_to_make(settings, tmp_path):
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path)},
        },
    }
    blobs.connect()
    assert blobs.is_local()
    assert list(tmp_path.iterdir()) == []
