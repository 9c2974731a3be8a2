#!/usr/bin/env python3
"""The database work of one replay run: statements, transactions and the server's CPU per run.

One in-process worker (``jobs.tasks.run_replay``, as a Celery worker calls it) replays
``--sessions`` synthetic sessions (bench/gen_synthetic.py, ``--size-kb`` each, the sessions
bench_hosts.py replays) on a scratch database of a PostgreSQL server (default the machine's,
127.0.0.1:5432, user postgres), one connection kept across runs as a worker host keeps it
(``CONN_MAX_AGE=60``), local storage in a temporary ``VAR_DIR``. Each upload is stored first
(not measured); then per run:

- statements the worker sent, by kind and table (Django's ``execute_wrapper``; a ``COPY``
  counted where psycopg opens it), and how many each of the run's steps sent;
- transactions: the server's own count for the database (``pg_stat_database``, flushed by the
  worker's backend before each reading; the readings' own transactions taken off);
- the server's CPU: the worker's backend's ``utime + stime`` from ``/proc`` (run as a user who
  may read PostgreSQL's ``/proc/PID/stat``: any user on Linux);
- the worker's own CPU (``time.process_time``) and the run's wall time.

The first run (a fresh connection: text search dictionaries loaded, catalog caches filled) is
reported apart; the figures are medians (min–max) of the others. Everything runs one after
another on one connection, so nothing else's work is counted but autovacuum's (none on a
fresh database this small).

With ``--own-server`` (root: the cluster runs as the ``postgres`` user) the database is on a
fresh PostgreSQL server of the bench's own (default settings, as bench_hosts.py starts one)
with ``pg_stat_statements`` loaded: the server's time per run of each statement (reset after
the first run), which the machine's server cannot say.

With ``--s3`` the files are in an object store (a ``moto_server`` of the bench's own,
``STORAGE_BACKEND=s3``) as on bench_hosts.py's worker hosts: the upload's parsed copy is
kept in it, and each run reads the upload and that copy from it and stores its prepared
session there; per run also the object store's CPU (its process, ``/proc``) and its requests
(its log's lines).

With ``--stages`` the worker's CPU per warm run is split by step (``STAGES``: each function
wrapped, its process CPU counted once where it nests in itself; a step's figure includes
the steps inside it).

Usage: .venv/bin/python bench/bench_run_db.py [--sessions 11] [--size-kb 1024] [--server URL]
       [--own-server] [--s3] [--statements] [--trace] [--stages]
       (--statements: each statement kind's count per run; --trace: the last run's, in order)
Writes bench/out/run_db.json.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import cProfile
import io
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PYTHON = sys.executable
DATA = ROOT / "bench" / "data" / "hosts"
OUT = ROOT / "bench" / "out" / "run_db.json"
SECRET_KEY = "bench-run-db-secret-key-not-for-production-0123456789abcdef0123"
TABLE = re.compile(r'(?:FROM|INTO|UPDATE|COPY)\s+"?([a-z_0-9]+)"?', re.IGNORECASE)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def sessions(count: int, size_kb: int) -> list[Path]:
    """``count`` synthetic sessions of about ``size_kb`` (seeds 1..count), made once (the
    same files as bench_hosts.py's)."""
    paths = [DATA / f"synth-{size_kb}kb-seed{seed}.jsonl" for seed in range(1, count + 1)]
    for seed, path in enumerate(paths, start=1):
        if not path.exists():
            DATA.mkdir(parents=True, exist_ok=True)
            generate = [PYTHON, str(ROOT / "bench" / "gen_synthetic.py")]
            subprocess.run(
                [*generate, "--size-kb", str(size_kb), "--seed", str(seed), "-o", str(path)],
                check=True,
                capture_output=True,
            )
    return paths


def statement_kind(sql: str) -> str:
    """``SELECT runs_run``, ``UPDATE runs_run``, ``COPY search_entry``…: the verb and the
    first table it names."""
    words = sql.lstrip().split(None, 1)
    verb = words[0].upper() if words else "?"
    table = TABLE.search(sql)
    return f"{verb} {table.group(1) if table else ''}".strip()


class Counter:
    """Statements the worker's connection sends, by kind (``statement_kind``)."""

    def __init__(self) -> None:
        self.kinds: collections.Counter[str] = collections.Counter()
        #: each statement's kind, in order, and whether it ran inside a transaction block
        self.order: list[str] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        from django.db import connection

        kind = statement_kind(sql)
        self.kinds[kind] += 1
        self.order.append(("  " if connection.in_atomic_block else "") + kind)
        return execute(sql, params, many, context)


def backend_cpu(pid: int) -> float:
    """CPU seconds of the process ``pid`` so far (user + system): a PostgreSQL backend, the
    object store."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def store_requests(log: Path) -> int:
    """Requests the object store (moto_server) has answered so far, one log line each."""
    return log.read_text(errors="replace").count(" HTTP/1.1")


def transactions_so_far() -> int:
    """The database's transactions so far, this backend's flushed first (3 of its own)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database "
            "WHERE datname = current_database()"
        )
        return int(cursor.fetchone()[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=11)
    parser.add_argument("--size-kb", type=int, default=1024)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument(
        "--own-server", action="store_true", help="a fresh server with pg_stat_statements"
    )
    parser.add_argument(
        "--s3",
        action="store_true",
        help="files in an object store (moto_server), as on bench_hosts",
    )
    parser.add_argument("--statements", action="store_true", help="print the kinds per run")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the warm runs: the worker's top steps"
    )
    parser.add_argument(
        "--trace", action="store_true", help="print the last run's statements in order"
    )
    parser.add_argument(
        "--stages", action="store_true", help="the worker's CPU per warm run, by step"
    )
    args = parser.parse_args(argv)
    batch = sessions(args.sessions, args.size_kb)
    name = f"bench_run_db_{os.getpid()}"

    import psycopg

    with contextlib.ExitStack() as stack:
        if args.own_server:
            args.server = stack.enter_context(own_server())
        with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        runs = on_database(args, batch, name)
    report(runs, args)
    return 0


@contextlib.contextmanager
def own_server() -> Iterator[str]:
    """A fresh PostgreSQL cluster (default settings, pg_stat_statements loaded) on a port of
    its own; its URL without a database. Stopped and removed after."""
    import pwd
    import shutil

    bin_dir = Path("/usr/lib/postgresql/15/bin")
    user = pwd.getpwnam("postgres")
    folder = Path(tempfile.mkdtemp(prefix="bench-run-db-pg-"))
    os.chown(folder, user.pw_uid, user.pw_gid)
    as_postgres = ["runuser", "-u", "postgres", "--"]
    cluster = folder / "cluster"
    initdb = [str(bin_dir / "initdb"), "-D", str(cluster), "-U", "postgres", "--auth=trust"]
    subprocess.run(
        [*as_postgres, *initdb, "-E", "UTF8", "--no-sync"],
        check=True,
        capture_output=True,
    )
    port = 5400 + os.getpid() % 500
    options = f"-p {port} -k {folder} -c shared_preload_libraries=pg_stat_statements"
    pg_ctl = [str(bin_dir / "pg_ctl"), "-D", str(cluster)]
    subprocess.run(
        [*as_postgres, *pg_ctl, "-w", "-o", options, "-l", str(folder / "log"), "start"],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(
            [*as_postgres, *pg_ctl, "-m", "fast", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(folder, ignore_errors=True)


def on_database(args: argparse.Namespace, batch: list[Path], name: str) -> list[dict[str, Any]]:
    """The runs measured on the scratch database ``name`` (made; dropped after)."""
    import psycopg

    try:
        with tempfile.TemporaryDirectory(prefix="bench-run-db-") as var:
            os.environ.update(
                DJANGO_SETTINGS_MODULE="contextlab.settings",
                DATABASE_URL=f"{args.server}/{name}",
                VAR_DIR=var,
                SECRET_KEY=SECRET_KEY,
                DEBUG="false",
                CONN_MAX_AGE="60",
            )
            for key in ("CELERY_BROKER_URL", "CACHE_URL", "STORAGE_BACKEND"):
                os.environ.pop(key, None)
            store = None
            if args.s3:
                from tests.storage.s3 import start_s3

                store = start_s3(Path(var))
                os.environ.update(store.env())
            subprocess.run(
                [PYTHON, "manage.py", "migrate", "--noinput"],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            try:
                return measure(
                    batch,
                    statements_kept=args.own_server,
                    profile=args.profile,
                    store=store,
                    stages=args.stages,
                )
            finally:
                if store is not None:
                    store.stop()
    finally:
        with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


#: the steps ``--stages`` times: (module or class, function), the run's outline first
STAGES = (
    ("contextlab.jobs.replay", "execute_run"),
    ("contextlab.jobs.lifecycle", "claim"),
    ("contextlab.jobs.replay", "load_session"),
    ("contextlab.blobs", "local_path"),
    ("contextlab.engine.input.session_cache", "read_kept"),
    ("contextlab.blobs.SessionCacheMirror", "fetch"),
    ("contextlab.engine.input.session_cache", "read_pickle"),
    ("contextlab.engine.measures.tokenized", "tokenize_session"),
    ("contextlab.engine.measures.tokens.TiktokenCounter", "count_plain"),
    ("contextlab.engine.measures.content_kinds.KindRatios", "scale"),
    ("contextlab.engine.input.session_cache", "stream_pickle_atomic"),
    ("contextlab.blobs.SessionCacheMirror", "store"),
    ("contextlab.blobs.SessionCacheMirror", "discard"),
    ("contextlab.jobs.replay", "store_messages_of"),
    ("contextlab.jobs.replay", "replay_run"),
    ("contextlab.engine", "replay"),
    ("contextlab.jobs.replay", "with_findings"),
    ("contextlab.engine", "tool_breakdown"),
    ("contextlab.engine", "waste_findings"),
    ("contextlab.jobs.lifecycle", "finish"),
    ("contextlab.jobs.lifecycle", "_store_result"),
    ("contextlab.search.services", "index_after_run"),
    ("contextlab.search.backends", "write_entries"),
    ("contextlab.search.backends", "index_words"),
)


class Steps:
    """Process CPU of each of ``STAGES`` while ``counting``: each function replaced, in its
    module or class, by a wrapper that times its outermost calls. (A name another module
    imported before is not replaced there: the steps listed are called through their
    module.)"""

    def __init__(self) -> None:
        import importlib

        self.counting = False
        self.cpu: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self._inside: collections.Counter[str] = collections.Counter()
        for where, name in STAGES:
            try:
                owner: Any = importlib.import_module(where)
            except ImportError:
                module, _, cls = where.rpartition(".")
                owner = getattr(importlib.import_module(module), cls)
            label = f"{where.rsplit('.', 1)[-1]}.{name}"
            setattr(owner, name, self._timed(label, getattr(owner, name)))

    def _timed(self, label: str, function: Any) -> Any:
        import functools

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.counting or self._inside[label]:
                return function(*args, **kwargs)
            self._inside[label] += 1
            started = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.cpu[label] += time.process_time() - started
                self.calls[label] += 1
                self._inside[label] -= 1

        return timed

    def per_run(self, runs: int) -> dict[str, list[float]]:
        """Each step's CPU (ms) and calls per run, in ``STAGES``' order."""
        return {
            label: [round(1000 * self.cpu[label] / runs, 1), round(self.calls[label] / runs, 1)]
            for label in (f"{w.rsplit('.', 1)[-1]}.{n}" for w, n in STAGES)
        }


def measure(
    batch: list[Path],
    *,
    statements_kept: bool = False,
    profile: bool = False,
    store: Any = None,
    stages: bool = False,
) -> list[dict[str, Any]]:
    """Each run's figures (``statements_kept``: the server has pg_stat_statements; the last
    entry then holds its statements' time per warm run, ``server_statements``; ``store``:
    the object store's ``tests.storage.s3.S3Server``, whose CPU and requests are counted)."""
    import django

    django.setup()
    import psycopg
    from django.contrib.auth.models import User
    from django.db import connection

    from contextlab.jobs import tasks
    from contextlab.transcripts import services

    owner = User.objects.create_user("bench", password=None)
    run_ids = []
    for path in batch:
        with path.open("rb") as handle:
            transcript, _ = services.create_transcript(owner=owner, name=path.name, content=handle)
        run_ids.append(transcript.runs.get().pk)
    if store is not None:
        # a worker host of its own: none of the upload's local copies (the file, its parse)
        from django.conf import settings

        host = Path(settings.VAR_DIR) / "worker-host"
        settings.WORKER_DIR = str(host / "worker")
        settings.SESSION_CACHE_DIR = str(host / "session-cache")
    copies = [0]
    opened = psycopg.Cursor.copy

    def counted_copy(self: Any, *a: Any, **k: Any) -> Any:
        copies[0] += 1
        return opened(self, *a, **k)

    psycopg.Cursor.copy = counted_copy  # type: ignore[method-assign]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = int(cursor.fetchone()[0])
    # the readings' own transactions: two readings back to back
    overhead = -transactions_so_far() + transactions_so_far()
    if statements_kept:
        with connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    profiler = cProfile.Profile()
    steps = Steps() if stages else None
    out = []
    for number, run_id in enumerate(run_ids):
        if statements_kept and number == 1:  # the warm runs' only
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_stat_statements_reset()")
        counter = Counter()
        copies[0] = 0
        before = transactions_so_far()
        server, worker, wall = backend_cpu(pid), time.process_time(), time.perf_counter()
        if store is not None:
            store_cpu, requests = backend_cpu(store.proc.pid), store_requests(store.log)
        with connection.execute_wrapper(counter):
            if profile and number:
                profiler.enable()
            if steps is not None:
                steps.counting = number > 0  # the warm runs' only
            tasks.run_replay(run_id)
            profiler.disable()
        wall = time.perf_counter() - wall
        worker = time.process_time() - worker
        server = backend_cpu(pid) - server
        xacts = transactions_so_far() - before - overhead
        kinds = dict(counter.kinds)
        if copies[0]:
            kinds["COPY"] = copies[0]
        figures = {}
        if store is not None:
            figures = {
                "store_cpu_s": round(backend_cpu(store.proc.pid) - store_cpu, 3),
                "store_requests": store_requests(store.log) - requests,
            }
        out.append(
            {
                "run": run_id,
                "statements": sum(kinds.values()),
                "transactions": xacts,
                "server_cpu_s": round(server, 3),
                "worker_cpu_s": round(worker, 3),
                "wall_s": round(wall, 3),
                **figures,
                "kinds": kinds,
                "order": counter.order,
            }
        )
        print(
            json.dumps({k: v for k, v in out[-1].items() if k not in {"kinds", "order"}}),
            file=sys.stderr,
        )
    if profile and len(out) > 1:
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats("cumulative").print_stats(r"contextlab|psycopg|json", 45)
        print(text.getvalue(), file=sys.stderr)
    if steps is not None and len(out) > 1:
        out[-1]["stages_ms_per_run"] = steps.per_run(len(out) - 1)
    if statements_kept and len(out) > 1:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT calls, total_exec_time, rows, query FROM pg_stat_statements "
                "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "ORDER BY total_exec_time DESC"
            )
            warm = len(out) - 1
            out[-1]["server_statements"] = [
                {
                    "calls_per_run": round(calls / warm, 2),
                    "ms_per_run": round(total / warm, 2),
                    "rows_per_run": round(rows / warm, 1),
                    "query": " ".join(query.split())[:160],
                }
                for calls, total, rows, query in cursor.fetchall()
            ]
    return out


def report(runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    warm = runs[1:] or runs

    def spread(key: str) -> str:
        values = [float(r[key]) for r in warm]
        return (
            f"{statistics.median(values):g} ({min(values):g}–{max(values):g}, "
            f"mean {statistics.mean(values):.3g})"
        )

    summary = {
        "sessions": args.sessions,
        "size_kb": args.size_kb,
        "first_run": runs[0],
        "warm_median": {
            key: statistics.median(float(r[key]) for r in warm)
            for key in (
                "statements",
                "transactions",
                "server_cpu_s",
                "worker_cpu_s",
                "wall_s",
                "store_cpu_s",
                "store_requests",
            )
            if key in warm[0]
        },
        "runs": runs,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(summary, indent=2))
    first = runs[0]
    print(
        f"first run: {first['statements']} statements, {first['transactions']} transactions, "
        f"server CPU {first['server_cpu_s']} s"
    )
    print(
        f"warm runs ({len(warm)}), median (min–max, mean): statements {spread('statements')}, "
        f"transactions {spread('transactions')}, server CPU {spread('server_cpu_s')} s, "
        f"worker CPU {spread('worker_cpu_s')} s, wall {spread('wall_s')} s; "
        f"load average {summary['load_average']}"
    )
    if "store_cpu_s" in warm[0]:
        print(
            f"object store: CPU {spread('store_cpu_s')} s, requests {spread('store_requests')} "
            "per warm run"
        )
    if args.statements:
        kinds: collections.Counter[str] = collections.Counter()
        for run in warm:
            kinds.update(run["kinds"])
        for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]):
            print(f"  {count / len(warm):5.1f}  {kind}")
    statements = runs[-1].get("server_statements")
    if statements:
        print("the server's time per warm run, by statement (pg_stat_statements):")
        for row in statements[:25]:
            print(
                f"  {row['ms_per_run']:7.2f} ms  {row['calls_per_run']:5.2f} calls  "
                f"{row['query'][:110]}"
            )
    stages = runs[-1].get("stages_ms_per_run")
    if stages:
        print("the worker's CPU per warm run, by step (a step includes the steps inside it):")
        for label, (ms, calls) in stages.items():
            print(f"  {ms:7.1f} ms  {calls:6.1f} calls  {label}")
    if args.trace:
        print("the last run's statements (indented: inside a transaction block; COPY not listed):")
        for kind in runs[-1]["order"]:
            print(f"  {kind}")


if __name__ == "__main__":
    raise SystemExit(main())
