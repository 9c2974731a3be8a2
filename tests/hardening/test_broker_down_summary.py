"""The task queue down when a run parks for an LLM summary: sending its fetch task fails,
the run stays parked and is marked due, so the recovery sends the fetch again once the queue
is back (before, the error escaped the worker's task and the run stayed queued for good)."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.conftest import DEMO
from tests.hardening.conftest import run_with_broker_down

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import json, logging, django
    from django.core.management import call_command
    django.setup()
    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import User
    from contextlab.jobs import lifecycle
    from contextlab.runs.models import Run
    from contextlab.summaries.models import RunSummarizer
    from contextlab.jobs import tasks as summary_tasks
    from contextlab.transcripts import services
    logging.basicConfig(level=logging.WARNING)
    user = User.objects.create_user("u", password="pw-u-123456")
    with open({path!r}, "rb") as fh:
        transcript, _ = services.create_transcript(owner=user, name="s.jsonl", content=fh)
    run = transcript.runs.get()
    RunSummarizer.objects.update_or_create(run=run, defaults={{"pending_key": "k1"}})
    lifecycle.queue_unreachable.set(False)
    Run.objects.filter(pk=run.pk).update(updated_at=django.utils.timezone.now())
    # what run_replay does after the replay parks: queue the fetch (after commit: at once here)
    summary_tasks.queue_fetch(lifecycle.WaitingForSummary(run.pk, "k1", 0))
    due = lifecycle.queued_too_long()
    print(json.dumps({{
        "run": run.pk, "status": Run.objects.get(pk=run.pk).status,
        "noticed": lifecycle.queue_unreachable.get(),
        "due": due, "parked": {{str(k): v for k, v in lifecycle.pending_summaries(due).items()}},
    }}))
    """
)


def test_a_fetch_that_cannot_be_sent_leaves_the_run_parked_and_due(tmp_path):
    proc = run_with_broker_down(
        tmp_path, SCRIPT.format(path=str(DEMO / "marot__spotter__short.jsonl"))
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] == "queued"
    assert out["noticed"] is True
    # due at once for the recovery, which sends the summary's fetch (not a replay)
    assert out["due"] == [out["run"]]
    assert out["parked"] == {str(out["run"]): "k1"}
