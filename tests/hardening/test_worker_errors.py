"""A database error the worker meets while storing a result fails the run with a message for
people: the SQL text and the data it quotes stay in the server log."""

from __future__ import annotations

import pytest
from django.db import DataError

from contextlab.jobs import lifecycle
from contextlab.jobs import replay as runner
from contextlab.runs.models import Run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

SQL_TEXT = (
    'unsupported Unicode escape sequence\nCONTEXT: JSON data, line 1: INSERT INTO "runs_runresult"'
)


def test_a_refused_result_fails_the_run_without_sql_text(make_transcript, short_jsonl, monkeypatch):
    run = make_transcript(short_jsonl).runs.get()

    def refusing_finish(run_id, data, **_options):
        raise DataError(SQL_TEXT)  # what PostgreSQL said of a NUL in jsonb

    monkeypatch.setattr(lifecycle, "finish", refusing_finish)
    outcome = runner.execute_run(run.pk)
    assert isinstance(outcome, lifecycle.Failed)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "could not be stored" in run.error
    assert "INSERT" not in run.error
    assert "CONTEXT" not in run.error
