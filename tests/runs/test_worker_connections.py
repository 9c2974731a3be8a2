"""A worker keeps its database connection between tasks as CONN_MAX_AGE says. In a module of
its own: no other worker (such as the module-wide one of test_worker_integration.py) may take
its tasks, or the connection it holds would be another's to judge."""

from __future__ import annotations

import pytest

from contextlab.runs import services
from tests.conftest import wait_for_run

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]


def _backends(application: str) -> set[int]:
    """PostgreSQL backends on the test database opened by ``application``."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %s",
            [application],
        )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.parametrize("max_age", ["60", "0"])
def test_a_worker_keeps_its_database_connection_between_tasks_as_conn_max_age_says(
    max_age, tmp_path, make_transcript, short_jsonl
):
    """Celery's Django fix-up would close it around every task; Django's rules apply instead."""
    from tests.conftest import flush_broker, require_services, start_worker, worker_env

    require_services()
    flush_broker()
    application = f"contextlab-conn-test-{max_age}"
    url = f"{worker_env()['DATABASE_URL']}?application_name={application}"
    worker = start_worker(tmp_path, f"conn{max_age}", CONN_MAX_AGE=max_age, DATABASE_URL=url)
    try:
        transcript = make_transcript(short_jsonl)
        assert wait_for_run(transcript.runs.get().pk).status == "done", worker.output()
        after_first = _backends(application)
        run = services.start_run(
            owner=transcript.owner, transcript=transcript, mode="whatif", preset="aggressive"
        )
        assert wait_for_run(run.pk).status == "done", worker.output()
        after_second = _backends(application)
    finally:
        worker.stop()
    # (the worker's start-up check for abandoned runs may hold a connection of its own)
    if max_age == "60":
        assert after_first & after_second  # the same backend served both tasks
    else:
        assert not after_first & after_second  # closed after each task
