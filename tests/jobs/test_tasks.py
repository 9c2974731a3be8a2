from __future__ import annotations

import pytest
from celery.exceptions import Retry
from celery.signals import worker_init
from django.db import OperationalError

from contextlab.engine import TiktokenCounter
from contextlab.engine.measures import tokens
from contextlab.jobs import replay as runner
from contextlab.jobs import tasks


def test_task_calls_the_runner_with_the_id(monkeypatch):
    seen = []
    monkeypatch.setattr(runner, "execute_run", seen.append)
    tasks.run_replay(42)
    assert seen == [42]


def test_task_retries_transient_database_errors(monkeypatch):
    def flaky(run_id):
        raise OperationalError("connection refused")

    monkeypatch.setattr(runner, "execute_run", flaky)
    monkeypatch.setattr(tasks.run_replay, "retry", lambda *a, **k: (_ for _ in ()).throw(Retry()))
    with pytest.raises(Retry):
        tasks.run_replay.apply(args=[1], throw=True).get()


def test_task_options_suit_long_jobs():
    assert tasks.run_replay.acks_late is True
    assert tasks.run_replay.app.conf.worker_prefetch_multiplier == 1
    assert tasks.run_replay.app.conf.task_acks_late is True


def test_a_worker_builds_the_tokenizer_before_its_pool_forks():
    """``worker_init`` (the worker's own process, before its pool's processes fork and
    inherit what it loaded) builds the encoder, so no run pays for it."""
    assert tasks._preload in worker_init._live_receivers(None)
    tokens._encoding.cache_clear()
    tasks._preload()
    assert tokens._encoding.cache_info().currsize == 1
    assert TiktokenCounter().count_plain("hello world") == 2
    assert tokens._encoding.cache_info().misses == 1  # the count used the preloaded encoder
