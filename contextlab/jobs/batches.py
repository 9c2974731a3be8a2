"""Worker-side: replay several runs of the same sessions, parsing each session once.

A sweep or comparison queues its new runs in batches; for each run this claims it and hands
the replay, on the already-loaded session, to ``jobs.lifecycle.conclude``: the same claim and
the same outcomes as a single run, so a run is replayed once whichever task gets it and ends
the same way. The loaded session keeps its token counts, so the second and later configs skip
parsing and tokenizing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from contextlab import engine
from contextlab.jobs import lifecycle, replay
from contextlab.runs.models import Run

logger = logging.getLogger(__name__)


class BatchOutOfTime(Exception):
    """The worker's time limit stopped a batch; the runs it did not reach are still queued."""


def unstarted(run_ids: list[int]) -> list[int]:
    """The runs of a batch still queued (after the batch was stopped)."""
    return list(
        Run.objects.filter(pk__in=run_ids, status=Run.Status.QUEUED).values_list("pk", flat=True)
    )


def execute_batch(run_ids: list[int], *, on_outcome: Callable[[lifecycle.Outcome], None]) -> None:
    """Replay the runs in order, loading each session once. Safe to call twice.

    ``on_outcome`` gets each replayed run's outcome as soon as it is stored (the task queues
    a summary fetch for a run that waits for one). Failures are per run, as for a single run:
    a deterministic one is stored on that run and the batch goes on; a transient database
    error requeues the current run and propagates so the task retries (finished runs are then
    skipped). The soft time limit fails the current run and raises ``BatchOutOfTime``, so the
    task can hand the rest to single-run tasks.
    """
    sessions: dict[int, engine.Session] = {}
    try:
        for run_id in run_ids:
            if not lifecycle.claim(run_id):
                logger.info("run %s: not claimable (finished or running elsewhere)", run_id)
                continue
            run = Run.objects.select_related("transcript").get(pk=run_id)
            outcome = lifecycle.conclude(run, partial(_replay, run, sessions))
            on_outcome(outcome)
            if isinstance(outcome, lifecycle.Failed) and outcome.out_of_time:
                raise BatchOutOfTime(f"batch stopped at run {run_id}")
    finally:
        for session in sessions.values():
            session.close()


def _replay(run: Run, sessions: dict[int, engine.Session]) -> dict[str, Any]:
    session = sessions.get(run.transcript_id)
    if session is None:
        session = sessions[run.transcript_id] = replay.load_session(run.transcript)
    return replay.replay_run(run, session)
