"""Fixtures for tuning tests: a session, and a way to finish queued runs like a worker would."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from contextlab.jobs import tasks
from contextlab.runs.models import Run

#: B compacts early on the tool-heavy session, so A and B diverge at request 1
EARLY = {"autocompact_pct_override": 10}


@pytest.fixture
def session(make_transcript, tool_heavy_jsonl) -> Any:
    return make_transcript(tool_heavy_jsonl)


@pytest.fixture
def second_session(make_transcript, short_jsonl) -> Any:
    return make_transcript(short_jsonl)


@pytest.fixture
def other_session(make_transcript, other_user, tool_heavy_jsonl) -> Any:
    return make_transcript(tool_heavy_jsonl, owner=other_user)


@pytest.fixture
def finish() -> Callable[..., None]:
    """Replay every queued what-if run as the worker's batch task does (no broker)."""

    def run_all() -> None:
        ids = list(
            Run.objects.filter(status=Run.Status.QUEUED, mode=Run.Mode.WHATIF).values_list(
                "pk", flat=True
            )
        )
        tasks.replay_batch(ids)

    return run_all
