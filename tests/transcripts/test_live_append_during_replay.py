"""An append that lands while the run replays the session (after the replay read the file and
before it stored its messages): the run replays the grown file again, and the messages it
stores for the explorer are the grown file's, not those of the file the first replay read
(the explorer's last requests pointed past them: an error page)."""

from __future__ import annotations

from typing import Any

import pytest

from contextlab import engine
from contextlab.jobs import replay as runner
from contextlab.runs.models import Run, RunResult
from contextlab.transcripts.models import Transcript, TranscriptMessages
from tests.transcripts.test_live_provisional import CUTS, LINES, _grow_to, _live_session

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


@pytest.fixture(autouse=True)
def _no_refit(settings) -> None:
    settings.LIVE_REFIT_PERCENT = 100_000


def test_messages_stored_are_the_grown_files(
    client, auth_header, user, monkeypatch, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    _grow_to(client, auth_header, session_id, CUTS[2], capture)
    real = engine.load_session_cached
    loads: list[str] = []

    def load_then_append(*args: Any, **kwargs: Any) -> engine.Session:
        session = real(*args, **kwargs)
        loads.append(kwargs["sha256"])
        if len(loads) == 1:  # the file grows once the first replay has read it
            _grow_to(client, auth_header, session_id, CUTS[3], capture)
        return session

    monkeypatch.setattr(engine, "load_session_cached", load_then_append)
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    transcript = Transcript.objects.get(pk=session_id)
    assert len(loads) == 2
    assert loads[-1] == transcript.sha256 != loads[0]
    assert transcript.size == len(b"".join(LINES[: CUTS[3]]))
    stored = engine.expand_messages(TranscriptMessages.objects.get(transcript=transcript).read())
    grown = engine.expand_messages(engine.messages_json(engine.load_session(transcript.path)))
    assert stored == grown
    requests = RunResult.objects.get(run=run).read()["requests"]
    assert max(r["view"]["end"] for r in requests) <= len(stored["main"])
    client.force_login(user)
    last = client.get(f"/sessions/{session_id}/requests/{len(requests) - 1}/")
    assert last.status_code == 200
