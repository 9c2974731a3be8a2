"""Django for the benchmarks that measure the apps: set up on the tests' settings, with a test
database of the benchmark's own (created, and dropped on the way out)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


def setup_django(database: str = "postgres", *, name: str) -> None:
    """``django.setup()`` on ``tests.settings``; ``database="sqlite"`` points it at a scratch
    SQLite file instead of the PostgreSQL server."""
    if database == "sqlite":
        folder = tempfile.mkdtemp(prefix=f"{name}-")
        os.environ["DATABASE_URL"] = f"sqlite:///{folder}/bench.sqlite3"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()


@contextmanager
def test_database(name: str) -> Iterator[None]:
    """A test database named after the benchmark: never one a test run elsewhere on the same
    server is using (pytest's are ``test_<name>`` and ``test_<name>_gw<n>``)."""
    from django.conf import settings
    from django.db import connection
    from django.test.utils import setup_test_environment

    setup_test_environment()
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = f"test_{name}"
    created = connection.creation.create_test_db(verbosity=0, keepdb=False)
    try:
        yield
    finally:
        connection.creation.destroy_test_db(created, verbosity=0)
