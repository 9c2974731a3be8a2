"""Counting the tokens of a long line shows progress and honours a cancel (issue #23: a
63 MB line showed 0.0 for minutes and took ~40 s to stop): the count reports every piece it
has counted, the run shows "counting tokens" with a moving fraction, and a cancel stops the
count at its next piece, before the session is cached or replayed."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from contextlab import engine
from contextlab.engine.input.session_cache import PARSED_SUFFIX
from contextlab.engine.measures.tokens import COUNT_CHUNK_CHARS
from contextlab.jobs import lifecycle
from contextlab.jobs import replay as runner
from contextlab.runs.models import Run
from tests.conftest import DEMO
from tests.hardening.test_long_line import MB, session_with_one_long_line

pytestmark = pytest.mark.slow


def _counts(session: engine.Session) -> list[int]:
    return [b.tok for t in session.threads for m in t.messages for b in m.blocks]


def test_counting_reports_each_piece_and_counts_the_same(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    session_with_one_long_line(path, 3 * MB)
    heard: list[tuple[int, int]] = []
    with_progress = engine.load_session(path)
    engine.tokenize_session(with_progress, progress=lambda done, total: heard.append((done, total)))
    plain = engine.load_session(path)
    engine.tokenize_session(plain)
    assert _counts(with_progress) == _counts(plain)
    total = heard[0][1]
    assert heard[0] == (0, total)
    assert heard[-1] == (total, total)
    assert total >= 3 * MB
    # the long line is heard piece by piece, never more than a piece apart
    assert len(heard) >= 3 * MB // COUNT_CHUNK_CHARS
    steps = [later[0] - earlier[0] for earlier, later in itertools.pairwise(heard)]
    assert max(steps) <= COUNT_CHUNK_CHARS
    assert [done for done, _ in heard] == sorted(done for done, _ in heard)


def test_a_progress_that_raises_stops_the_count_midway(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    session_with_one_long_line(path, 3 * MB)
    session = engine.load_session(path)
    heard: list[int] = []

    def stop_at_a_third(done: int, total: int) -> None:
        heard.append(done)
        if done > total // 3:
            raise engine.ReplayStopped("cancelled")

    with pytest.raises(engine.ReplayStopped):
        engine.tokenize_session(session, progress=stop_at_a_third)
    assert heard[-1] < 2 * heard[0] + 3 * MB // 2  # stopped near a third, not at the end
    assert any(b.tok < 0 for t in session.threads for m in t.messages for b in m.blocks)


@pytest.mark.django_db(transaction=True)
def test_a_run_cancelled_while_counting_stops_before_caching_or_replaying(
    tmp_path: Path, make_transcript: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "long.jsonl"
    session_with_one_long_line(path, 24 * MB)
    run = make_transcript(path).runs.get()
    monkeypatch.setattr(lifecycle, "PROGRESS_EVERY", 0.1)
    outcome: list[Any] = []

    def work() -> None:
        try:
            outcome.append(runner.execute_run(run.pk))
        finally:
            connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    seen: list[tuple[str, int, int]] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and worker.is_alive():
            row = Run.objects.filter(pk=run.pk).values_list(
                "progress_stage", "progress_done", "progress_total"
            )[0]
            seen.append(row)
            stage, done, total = row
            if stage == Run.Stage.COUNTING and 0 < done < total:
                break
            time.sleep(0.05)
        # the page says what it counts, and the fraction moved off 0
        assert seen
        assert seen[-1][0] == Run.Stage.COUNTING, seen[-5:]
        assert 0 < seen[-1][1] < seen[-1][2]
        lifecycle.cancel([run.pk], "Cancelled by its owner.")
    finally:
        worker.join(timeout=300)
    assert not worker.is_alive()
    assert isinstance(outcome[0], lifecycle.Failed)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error == "Cancelled by its owner."
    # stopped inside the count: nothing was cached (a finished count is cached before the
    # replay starts) and no replay progress was ever written
    counted = [
        p.name
        for p in Path(settings.SESSION_CACHE_DIR).glob(f"{run.transcript.sha256}-*")
        if not p.name.endswith(PARSED_SUFFIX)
    ]
    assert not counted
    assert run.progress_stage == Run.Stage.COUNTING


def test_the_demo_session_counts_the_same_with_progress() -> None:
    path = next(DEMO.glob("*.jsonl"))
    heard: list[tuple[int, int]] = []
    session = engine.load_session(path)
    engine.tokenize_session(session, progress=lambda d, t: heard.append((d, t)))
    plain = engine.load_session(path)
    engine.tokenize_session(plain)
    assert _counts(session) == _counts(plain)
    assert heard[-1][0] == heard[-1][1]
