"""Test settings: the project's settings with test-only speed and isolation overrides.

The database is PostgreSQL by default (the integration tests need it; pytest-django creates
``test_<name>``); set DATABASE_URL=sqlite:// to run the unit tests without a server.
"""

import os
import tempfile
from pathlib import Path

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/contextlab")
# Tests must never publish to a developer's embedded broker; the real-worker fixtures use Redis.
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")
_TMP = Path(tempfile.mkdtemp(prefix="contextlab-tests-"))
os.environ.setdefault("VAR_DIR", str(_TMP / "var"))
# Uploads stream to a folder of this run (the recovery removes stale files there, never in
# the shared system temp folder).
os.environ.setdefault("FILE_UPLOAD_TEMP_DIR", str(_TMP / "upload-tmp"))
# DEBUG is off by default, as in production: the tests need a key of their own.
os.environ.setdefault("SECRET_KEY", "test-only-secret-key-" + "x" * 40)
# Several test runs may share one PostgreSQL and one Redis (developers, CI, agents): each run
# gets its own test database and its own queue, so their workers never take each other's tasks.
_RUN_ID = f"{os.getpid()}"
os.environ.setdefault("CELERY_TASK_DEFAULT_QUEUE", f"contextlab-test-{_RUN_ID}")

# Under pytest-xdist the workers inherit the environment the controller set above: each
# takes a folder and a queue of its own below the controller's (the database name is already
# the worker's own pid).
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _XDIST_WORKER:
    for _name in ("VAR_DIR", "FILE_UPLOAD_TEMP_DIR"):
        os.environ[_name] = str(Path(os.environ[_name]) / _XDIST_WORKER)
    os.environ["CELERY_TASK_DEFAULT_QUEUE"] += f"-{_XDIST_WORKER}"

from contextlab.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
MEDIA_ROOT = _TMP / "media"
STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}  # noqa: F405
# Publishing must not hang a unit test when Redis is down.
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_BROKER_CONNECTION_MAX_RETRIES = 1
DATABASES["default"].setdefault("TEST", {})["NAME"] = (  # noqa: F405
    f"test_{DATABASES['default']['NAME']}_{_RUN_ID}"  # noqa: F405
    if DATABASES["default"]["ENGINE"].endswith("postgresql")  # noqa: F405
    else None
)
# Each test process counts rate limits in its own memory (no Redis needed for unit tests), with
# limits no suite reaches; tests/hardening/test_throttling.py sets low ones.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
LOGIN_RATE = LOGIN_USER_RATE = SIGNUP_RATE = COMMENT_RATE = "100000/m"
