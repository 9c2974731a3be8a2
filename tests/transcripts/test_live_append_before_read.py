"""An append that lands after a worker read its run's row and before it opened the session's
file: the append replaces the file (the one it grew from is deleted once it commits) and leaves
the running run alone, so the run must replay the grown file, not fail on the deleted one (it
did: FileNotFoundError, the run failed and the live explorer showed no request until the next
append; seen once in CI as the browser test's explorer stuck on "catching up").

A real worker process (its first replay held at that point by ``gated_worker.py``), PostgreSQL
and Redis."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from contextlab.runs.models import Run, RunResult
from contextlab.transcripts.models import Transcript, TranscriptMessages
from tests.conftest import flush_broker, require_services, start_worker, wait_for_run
from tests.transcripts.test_live_append import LINES, append, create

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]

GATED_WORKER = Path(__file__).resolve().parent / "gated_worker.py"
#: the first two requests, then a system line: the append that makes the session live
START, FIRST_APPEND = b"".join(LINES[:23]), LINES[23]


def test_an_append_between_the_runs_row_and_its_file_is_replayed(
    client: Any, auth_header: dict[str, str], tmp_path: Path
) -> None:
    require_services()
    flush_broker()
    gate = tmp_path / "gate"
    gate.mkdir()
    worker = start_worker(tmp_path, "gated", script=GATED_WORKER, CONTEXTLAB_TEST_GATE=str(gate))
    try:
        created = create(client, auth_header, START)
        transcript = Transcript.objects.get(pk=created["id"])
        run = transcript.runs.get()
        deadline = time.monotonic() + 60
        while not (gate / "reached").exists():
            assert time.monotonic() < deadline, worker.output()
            time.sleep(0.05)
        assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
        first_file = Path(transcript.path)
        response = append(client, auth_header, transcript.pk, len(START), FIRST_APPEND)
        assert response.status_code == 200, response.content
        assert response.json()["replays"] == []  # running: it replays the grown file itself
        assert not first_file.exists()  # the file the worker was about to read is gone
        (gate / "go").touch()
        finished = wait_for_run(run.pk)
        assert finished.status == Run.Status.DONE, (finished.error, worker.output())
    finally:
        worker.stop()
    transcript.refresh_from_db()
    assert transcript.is_live
    result = RunResult.objects.get(run=finished).read()
    assert len(result["requests"]) == 2
    assert TranscriptMessages.objects.get(transcript=transcript).sha256 == transcript.sha256
    client.force_login(transcript.owner)
    page = client.get(f"/sessions/{transcript.pk}/requests/1/")
    assert page.status_code == 200
    assert b'id="req-number">2<' in page.content
