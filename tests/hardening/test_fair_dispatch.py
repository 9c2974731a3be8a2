"""Fair dispatch on the Redis broker: comparison and sweep batches are published below uploads
and single runs, so another user's upload queued after a big sweep is replayed before the
sweep's batches, by a real worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings

from contextlab.runs import services
from contextlab.tuning import configs as tuning_configs
from contextlab.tuning import services as tuning
from tests.conftest import REDIS_URL, flush_broker, require_services, start_worker, wait_for_run

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]


def test_an_upload_queued_after_a_sweep_is_replayed_before_the_sweeps_batches(
    make_transcript: Any,
    user: Any,
    other_user: Any,
    tool_heavy_jsonl: Path,
    short_jsonl: Path,
    tmp_path: Path,
) -> None:
    require_services()
    flush_broker()
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    client = redis.Redis.from_url(REDIS_URL)
    client.delete(*(f"{queue}:{step}" for step in range(1, 10)))
    # no worker yet: everything waits in Redis, the sweep first
    sweep = tuning.create_sweep(
        owner=user,
        transcripts=[make_transcript(tool_heavy_jsonl)],
        base=tuning_configs.ConfigSpec(),
        field_name="autocompact_pct_override",
        values="50:90:5",
    )
    sweep_runs = [item.run for item in sweep.items.select_related("run")]
    assert len(sweep_runs) == 9
    assert client.llen(f"{queue}:6") == 2  # the sweep's two batches, a priority step down
    theirs = make_transcript(short_jsonl, owner=other_user)
    upload_run = theirs.runs.get()
    worker = start_worker(tmp_path, "fair")  # one process: it takes one task at a time
    try:
        upload_done = wait_for_run(upload_run.pk, timeout=120)
        assert upload_done.status == "done", upload_done.error + worker.output()
        finished = [wait_for_run(run.pk, timeout=300) for run in sweep_runs]
    finally:
        worker.stop()
    assert {run.status for run in finished} == {"done"}
    # the upload, queued last, was replayed before any sweep run ended
    assert upload_done.finished_at < min(run.finished_at for run in finished)
    assert services.default_run(theirs) is not None
