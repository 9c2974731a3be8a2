"""A live session's stored messages grow by the rows each append changed or added
(``AppendedMessages``): read back, with the parts put in, they are the grown file's messages
whole, whether a page reads them cold or extends the earlier version it holds; messages that
cannot grow so are stored whole again."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import pytest

from contextlab import engine
from contextlab.jobs import replay as runner
from contextlab.runs import services as run_services
from contextlab.runs.models import Run
from contextlab.transcripts.models import AppendedMessages, Transcript, TranscriptMessages
from tests.transcripts.test_live_append import FULL, append, create

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media"), pytest.mark.slow]

LINES = FULL.read_bytes().splitlines(keepends=True)
#: the first two requests, then three appends (the last two bring a request each)
CUTS = [12, 23, 30, len(LINES)]


def _whole(transcript: Transcript) -> dict[str, Any]:
    session = engine.load_session(transcript.path, name=transcript.name)
    try:
        out: dict[str, Any] = json.loads(json.dumps(engine.messages_json(session)))
    finally:
        session.close()
    return out


def _grow(client, auth_header, capture, session_id: int, cut: int, to: int) -> Transcript:
    offset = sum(len(line) for line in LINES[:cut])
    with capture(execute=False):
        response = append(client, auth_header, session_id, offset, b"".join(LINES[cut:to]))
    assert response.status_code == 200, response.content
    return Transcript.objects.get(pk=session_id)


def test_appends_store_parts_that_read_back_as_the_whole_messages(
    client, auth_header, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        first = create(client, auth_header, b"".join(LINES[: CUTS[0]]))
    run = Run.objects.get(transcript_id=first["id"])
    runner.execute_run(run.pk)
    for n, (cut, to) in enumerate(pairwise(CUTS)):
        transcript = Transcript.objects.get(pk=first["id"])
        held = run_services.session_messages(transcript)  # the open explorer's process
        assert held == engine.expand_messages(_whole(transcript))
        transcript = _grow(
            client, auth_header, django_capture_on_commit_callbacks, first["id"], cut, to
        )
        assert TranscriptMessages.current_data(transcript) is None  # not this file's yet
        runner.execute_run(run.pk)
        stored = TranscriptMessages.objects.get(transcript=transcript)
        assert stored.sha256 == transcript.sha256
        parts = AppendedMessages.objects.filter(messages=stored)
        # one part per append, after the messages of the upload's first replay
        assert parts.count() == n + 1
        whole = _whole(transcript)
        assert TranscriptMessages.current_data(transcript) == whole
        # and the page that held the version before reads only the new part
        assert run_services.session_messages(transcript) == engine.expand_messages(whole)


def test_messages_are_stored_whole_past_the_parts_limit(
    client, auth_header, django_capture_on_commit_callbacks, monkeypatch
):
    monkeypatch.setattr(runner, "APPENDED_PARTS_MAX", 1)
    with django_capture_on_commit_callbacks(execute=False):
        first = create(client, auth_header, b"".join(LINES[: CUTS[0]]))
    run = Run.objects.get(transcript_id=first["id"])
    runner.execute_run(run.pk)
    for cut, to in pairwise(CUTS):
        transcript = _grow(
            client, auth_header, django_capture_on_commit_callbacks, first["id"], cut, to
        )
        runner.execute_run(run.pk)
    stored = TranscriptMessages.objects.get(transcript=transcript)
    # the first append stored a part, the second found the limit reached (stored whole),
    # the third stored a part after that
    assert AppendedMessages.objects.filter(messages=stored).count() == 1
    assert TranscriptMessages.current_data(transcript) == _whole(transcript)


def test_messages_stored_without_their_files_digest_go_at_an_append(
    client, auth_header, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        first = create(client, auth_header, b"".join(LINES[: CUTS[0]]))
    run = Run.objects.get(transcript_id=first["id"])
    runner.execute_run(run.pk)
    # as stored before the digest was kept with them
    TranscriptMessages.objects.filter(transcript_id=first["id"]).update(sha256="", marks=None)
    transcript = _grow(client, auth_header, django_capture_on_commit_callbacks, first["id"], 12, 23)
    assert not TranscriptMessages.objects.filter(transcript=transcript).exists()
    runner.execute_run(run.pk)
    assert TranscriptMessages.current_data(transcript) == _whole(transcript)
