"""Shared fixtures: users and clients, corpus files, and a real Celery worker process."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from django.conf import settings
from django.test import Client

ROOT = Path(__file__).resolve().parent.parent
#: The whole transcript corpus (tens of MB, not in the repository): ``$CONTEXTLAB_CORPUS``, else
#: ``../shared/corpus`` beside the checkout. Every test that needs it finds it through
#: ``CORPUS``, ``corpus_files()`` or ``corpus_path()`` and is skipped, with the reason printed,
#: when it is absent (``CONTEXTLAB_CORPUS=/nonexistent make test`` proves a clone without it).
CORPUS = Path(os.environ.get("CONTEXTLAB_CORPUS") or ROOT.parent / "shared" / "corpus")
HAVE_CORPUS = CORPUS.is_dir()
NO_CORPUS = (
    f"needs the transcript corpus, not found at {CORPUS} "
    "(set CONTEXTLAB_CORPUS to its folder; see README, Two commands)"
)
#: Mark for tests that need the whole corpus.
needs_corpus = pytest.mark.skipif(not HAVE_CORPUS, reason=NO_CORPUS)
DEMO = ROOT / "contextlab" / "demo"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def corpus_files() -> list[Path]:
    """Every transcript of the corpus, subfolders (``recent/``) included; [] without it."""
    return sorted(CORPUS.rglob("*.jsonl")) if HAVE_CORPUS else []


def corpus_path(name: str) -> Path:
    """One corpus file (``name`` relative to the corpus folder): skips the test when the corpus
    is absent, fails it when the corpus is there without that file."""
    if not HAVE_CORPUS:
        pytest.skip(NO_CORPUS)
    path = CORPUS / name
    if not path.exists():
        pytest.fail(f"the corpus at {CORPUS} has no {name}", pytrace=False)
    return path


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def pytest_configure(config: pytest.Config) -> None:
    # Every connection says whose it is (libpq reads PGAPPNAME), so a connection left open at
    # the end names its process: ``django_db_setup`` below lists them.
    os.environ.setdefault("PGAPPNAME", f"pytest {os.environ.get('PYTEST_XDIST_WORKER', 'main')}")
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("postgresql"):
        host, port = db.get("HOST") or "127.0.0.1", int(db.get("PORT") or 5432)
        if not _reachable(host, port):
            raise pytest.UsageError(
                f"PostgreSQL is not reachable at {host}:{port}, and the test suite uses it "
                "(integration tests need it). Start it, e.g. "
                "`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, "
                "or run only the unit tests: DATABASE_URL=sqlite:// pytest -m 'not integration and not browser'."
            )


def assert_passes_on_sqlite(test_file: str) -> None:
    """Run ``test_file``'s tests again on SQLite (``make run``'s database) in a child pytest,
    all but the ones that start this pass (named ``*sqlite*``), and assert they passed."""
    env = {**os.environ, "DATABASE_URL": "sqlite://"}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", test_file, "-k", "not sqlite"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout
    assert "failed" not in out.stdout


def corpus_file(name: str) -> Path:
    """A real transcript that always exists: from the corpus when present, else the committed
    copy (``contextlab/demo/`` or ``tests/fixtures/``, byte-identical to the corpus file)."""
    for folder in (CORPUS, DEMO, FIXTURES):
        if (folder / name).exists():
            return folder / name
    pytest.fail(f"corpus file {name} not found in {CORPUS}, {DEMO} or {FIXTURES}")


@pytest.fixture
def pinned_rate_clock(monkeypatch: pytest.MonkeyPatch) -> float:
    """Hold the rate limiter's clock still for the test.

    django-ratelimit counts in fixed windows (a new count starts at each window's end), so a
    burst that happens to straddle that end starts counting again half-way, and a test expecting
    429 after N requests fails by the wall clock (it did, once in CI). Only the limiter's view of
    the time is pinned: every request still goes through the real limiter and cache."""
    import types

    import django_ratelimit.core as ratelimit_core

    now = time.time()
    monkeypatch.setattr(ratelimit_core, "time", types.SimpleNamespace(time=lambda: now))
    return now


@pytest.fixture
def short_jsonl() -> Path:
    return corpus_file("marot__spotter__short.jsonl")


@pytest.fixture
def tool_heavy_jsonl() -> Path:
    return corpus_file("marot__spotter__tool_heavy.jsonl")


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


@pytest.fixture
def other_user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(username="mallory", password="pw-mallory-123")


@pytest.fixture
def alice_client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def mallory_client(other_user: Any) -> Client:
    client = Client()
    client.force_login(other_user)
    return client


@pytest.fixture
def api_token(user: Any) -> str:
    from contextlab.accounts.services import create_api_token

    return create_api_token(username=user.username)[1]


@pytest.fixture
def auth_header(api_token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token}"}


@pytest.fixture
def other_auth_header(other_user: Any) -> dict[str, str]:
    from contextlab.accounts.services import create_api_token

    return {"HTTP_AUTHORIZATION": f"Bearer {create_api_token(username=other_user.username)[1]}"}


@pytest.fixture
def make_transcript(user: Any) -> Callable[..., Any]:
    """Create a session from a file through the real service (its run stays queued)."""
    from contextlab.transcripts import services

    def make(path: Path, owner: Any = None, name: str | None = None) -> Any:
        with path.open("rb") as fh:
            transcript, _ = services.create_transcript(
                owner=owner or user, name=name or path.name, content=fh
            )
        return transcript

    return make


# --- real services: PostgreSQL, Redis, a Celery worker process --------------------------------


def require_services() -> None:
    """Integration tests need the real PostgreSQL and Redis; say so clearly when they are absent."""
    db = settings.DATABASES["default"]
    problems = []
    if not db["ENGINE"].endswith("postgresql"):
        problems.append(
            f"the database is {db['ENGINE']}, not PostgreSQL (unset DATABASE_URL or point it at PostgreSQL)"
        )
    redis = urlparse(REDIS_URL)
    if not _reachable(redis.hostname or "127.0.0.1", redis.port or 6379):
        problems.append(
            f"Redis is not reachable at {redis.hostname}:{redis.port} (start it: "
            "redis-server --daemonize yes --port 6379)"
        )
    if problems:
        message = "integration tests need real services: " + "; ".join(problems)
        if os.environ.get("CONTEXTLAB_SKIP_INTEGRATION") == "1" and os.environ.get("CI") != "true":
            pytest.skip(message)
        pytest.fail(message, pytrace=False)


#: The worker (and beat) processes running now: a failed test's report shows their logs' tails
#: (``pytest_runtest_makereport``), as a flaky failure in CI can be read nowhere else
RUNNING_WORKERS: list[WorkerProcess] = []


class WorkerProcess:
    """A ``celery -A contextlab.celery worker`` subprocess on the test database and Redis."""

    def __init__(self, log: Path, env: dict[str, str], argv: list[str]) -> None:
        self.log_path = log
        self.log = log.open("wb")
        self.proc = subprocess.Popen(
            argv, env=env, stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT
        )
        RUNNING_WORKERS.append(self)

    def wait_ready(self, timeout: float = 60, marker: bytes = b"ready.") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited early:\n{self.output()}")
            if marker in self.log_path.read_bytes():
                return
            time.sleep(0.2)
        raise RuntimeError(f"celery worker not ready after {timeout}s:\n{self.output()}")

    def output(self) -> str:
        return self.full_log()[-4000:]

    def full_log(self) -> str:
        """The whole log (``output`` is its tail, for messages): what a test looks for may be
        followed by many lines, such as the periodic recovery's tasks."""
        return self.log_path.read_bytes().decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL: the worker dies mid-task, as in an out-of-memory kill."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self in RUNNING_WORKERS:
            RUNNING_WORKERS.remove(self)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test's report ends with the log tail of each worker process running then."""
    report = yield
    if report.failed:
        for worker in RUNNING_WORKERS:
            try:
                tail = worker.output()
            except OSError as exc:
                tail = f"(unreadable: {exc})"
            report.sections.append((f"worker log {worker.log_path.name} (tail)", tail))
    return report


def worker_env(**extra: str) -> dict[str, str]:
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "contextlab.settings",
            "DATABASE_URL": (
                f"postgres://{db['USER']}:{db.get('PASSWORD') or ''}@{db.get('HOST') or '127.0.0.1'}:"
                f"{db.get('PORT') or 5432}/{db['NAME']}"
            ),
            "CELERY_BROKER_URL": REDIS_URL,
            "CELERY_TASK_DEFAULT_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
            "MEDIA_ROOT": str(settings.MEDIA_ROOT),
            "VAR_DIR": str(settings.VAR_DIR),
            "PYTHONPATH": str(ROOT),
            "PGAPPNAME": "pytest child",
        }
    )
    env.update(extra)
    return env


def start_worker(tmp: Path, name: str, *, script: Path | None = None, **env: str) -> WorkerProcess:
    celery = [sys.executable, "-m", "celery"] if script is None else [sys.executable, str(script)]
    argv = [
        *celery,
        "-A",
        "contextlab.celery",
        "worker",
        "--pool=solo",
        "--loglevel=INFO",
        "--without-mingle",
        "--without-gossip",
        f"--hostname={name}@%h",
    ]
    env.setdefault("PGAPPNAME", f"celery worker {name}")
    worker = WorkerProcess(tmp / f"{name}.log", worker_env(**env), argv)
    try:
        worker.wait_ready()
    except Exception:
        worker.stop()
        raise
    return worker


def start_beat(tmp: Path, name: str, **env: str) -> WorkerProcess:
    """``celery beat``, as docker-compose's beat service runs it: it sends the periodic
    recovery (at start, then every RUN_RECOVER_EVERY s) to the workers of this run's queue."""
    argv = [sys.executable, "-m", "celery", "-A", "contextlab.celery", "beat", "--loglevel=INFO"]
    env.setdefault("PGAPPNAME", f"celery beat {name}")
    beat = WorkerProcess(tmp / f"{name}-beat.log", worker_env(**env), argv)
    try:
        beat.wait_ready(marker=b"beat: Starting")
    except Exception:
        beat.stop()
        raise
    return beat


#: Connections ``django_db_setup`` found still open at its teardown, for the terminal summary.
LEFT_OPEN: list[str] = []


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's test databases, and at the end a check that nothing else is still
    connected to them. A connection left open makes Django's DROP DATABASE fail ("being
    accessed by other users") and leaves the database behind: each is named with its
    process (``PGAPPNAME``), its state and last statement, then closed, so the drop succeeds
    and the culprit is in the terminal output."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, application_name, state, backend_start, left(query, 200) "
            "FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        left_open = cursor.fetchall()
        for pid, *_ in left_open:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    LEFT_OPEN.extend(
        f"pid {pid} ({name or 'no name'}), {state}, since {start:%H:%M:%S}: {query!r}"
        for pid, name, state, start, query in left_open
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Session fixtures are torn down with the output captured, before the summary: the
    connections ``django_db_setup`` found left open are told here."""
    if LEFT_OPEN:
        terminalreporter.section("connections left open to the test database", yellow=True)
        for line in LEFT_OPEN:
            terminalreporter.write_line(line)


def flush_broker() -> None:
    """Drop leftover messages of this run's queue (other runs' queues are left alone)."""
    import redis

    redis.Redis.from_url(REDIS_URL).delete(settings.CELERY_TASK_DEFAULT_QUEUE)


@pytest.fixture(scope="module")
def celery_worker_process(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerProcess]:
    """One real worker for a test module (pool=solo, Redis broker, the test database)."""
    require_services()
    flush_broker()
    worker = start_worker(tmp_path_factory.mktemp("worker"), "it")
    yield worker
    worker.stop()


def wait_for_run(
    run_id: int, timeout: float = 120, statuses: tuple[str, ...] = ("done", "failed")
) -> Any:
    from contextlab.runs.models import Run

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = Run.objects.get(pk=run_id)
        if run.status in statuses:
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} still {Run.objects.get(pk=run_id).status} after {timeout}s")


def settle_runs(timeout: float = 30) -> None:
    """Before a test's database is flushed under a live worker: cancel the runs still queued or
    running (a replay stops at its next progress write), then wait until no other connection to
    the test database is inside a statement or a transaction. A flush (TRUNCATE of every table)
    racing a replay's writes deadlocks in PostgreSQL, and the flush is the one aborted."""
    from django.db import connection

    from contextlab.jobs import lifecycle
    from contextlab.runs.models import Run

    active = list(
        Run.objects.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).values_list(
            "pk", flat=True
        )
    )
    if active:
        lifecycle.cancel(active, "Cancelled: the test is over.")
    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline and quiet < 2:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state IN "
                "('active', 'idle in transaction', 'idle in transaction (aborted)')"
            )
            busy = cursor.fetchone()[0]
        quiet = quiet + 1 if busy == 0 else 0
        time.sleep(0.2)


@pytest.fixture
def clean_media() -> Iterator[None]:
    yield
    shutil.rmtree(Path(settings.MEDIA_ROOT) / "uploads", ignore_errors=True)
