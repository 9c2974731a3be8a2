#!/usr/bin/env python3
"""Replay throughput with one and with two worker hosts (issue #25, "Workers on other hosts").

Each host is a network namespace of its own on a bridge (tests/multihost/hosts.py): the web
(gunicorn, beat), the object store (moto_server), PostgreSQL and Redis (``--servers own``, the
default: fresh servers of the bench's own; ``machine``: the machine's, relayed onto the
bridge) and one or two Celery workers, each on its own empty folders, sharing nothing but the
network. Every host is a machine of its own to the CPU scheduler too: its processes run in a
session of their own, which the kernel's autogroup scheduling gives one fair share of the
CPUs against every other session on the machine (the same rule for every host, in both kinds
of round). Each worker runs one replay at a time (``--pool=solo``) and worker host i runs on
core i only (``--pin``, the default): one worker host is one core, in the one-host round as in
the two-host round.

Per round, a batch of SESSIONS synthetic sessions is uploaded through the web while no worker
runs; the round's worker hosts start on a queue of their own and, once every one is up, are
told at once to take the batch's queue (Celery's remote control; the batch's messages held
aside until every host pops from it, ``release``), so a host's start-up counts for none of
them and they start together. The batch's time runs from the first run claimed to the last one finished
(``started_at`` / ``finished_at`` of the runs, in the database). Rounds alternate one host,
two hosts; every round uses fresh bytes (a blank line per round appended) and fresh worker
hosts, so no round finds another's parsed sessions. Target: two hosts <= 0.6 x one host's time
(medians over the rounds).

Beside it: runs per host, replays per run (1: none done twice), the CPU seconds of every host
during the batch and the share of a core it got, where each worker host's batch went by the
scheduler's own accounting (on a core, runnable but waiting for one, the rest: waiting on the
servers or for work), the seconds each host had no run at the batch's start and end,
object-store requests and database transactions per run, and the load average. Needs root (network namespaces), PostgreSQL's binaries, redis-server and
moto_server (the dev dependencies).

Usage: sudo .venv/bin/python bench/bench_hosts.py [--sessions 20] [--size-kb 1024] [--rounds 1]
       [--no-pin] [--servers own|machine] [--logs FOLDER]
Writes bench/out/hosts.json; generated sessions go to bench/data/hosts/ (ignored by git).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.multihost import hosts  # noqa: E402
from tests.storage.s3 import start_s3  # noqa: E402

PYTHON = sys.executable
DATA = ROOT / "bench" / "data" / "hosts"
OUT = ROOT / "bench" / "out" / "hosts.json"
TARGET_RATIO = 0.6
#: the hosts of the servers (--servers own: db and broker too)
SERVER_HOSTS = {"web", "store", "db", "broker"}
CLAIM_LINE = re.compile(r"run (\d+): replaying \(attempt")
CELERY = [PYTHON, "-m", "celery", "-A", "contextlab.celery"]
SECRET_KEY = "bench-hosts-secret-key-not-for-production-0123456789abcdef"


def sessions(count: int, size_kb: int) -> list[Path]:
    """``count`` synthetic sessions of about ``size_kb`` (seeds 1..count), made once."""
    paths = [DATA / f"synth-{size_kb}kb-seed{seed}.jsonl" for seed in range(1, count + 1)]
    for seed, path in enumerate(paths, start=1):
        if not path.exists():
            DATA.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [
                    PYTHON,
                    str(ROOT / "bench" / "gen_synthetic.py"),
                    "--size-kb",
                    str(size_kb),
                    "--seed",
                    str(seed),
                    "-o",
                    str(path),
                ],
                check=True,
                capture_output=True,
            )
    return paths


def variant(path: Path, folder: Path, round_no: int) -> Path:
    """``path`` with ``round_no`` blank lines appended: the same session, other bytes."""
    copy = folder / path.name
    copy.write_bytes(path.read_bytes() + b"\n" * round_no)
    return copy


def django_env(database_url: str, redis_url: str, queue: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL"}
    }
    env.update(
        DJANGO_SETTINGS_MODULE="contextlab.settings",
        PYTHONPATH=str(ROOT),
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=redis_url,
        CELERY_TASK_DEFAULT_QUEUE=queue,
        SECRET_KEY=SECRET_KEY,
        DEBUG="false",
    )
    return env


def manage(env: dict[str, str], code: str) -> str:
    """Run ``code`` with Django set up against the bench database; its stdout."""
    script = "import django; django.setup()\n" + code
    done = subprocess.run(
        [PYTHON, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"django step failed:\n{done.stderr[-3000:]}")
    return done.stdout


def create_database(server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def round_times(conn: Any, ids: list[int]) -> list[tuple[str, int, float, float]]:
    """(status, attempts, started, finished) of each run of sessions ``ids``: read with plain
    SQL on one connection, so polling costs the machine next to nothing while the workers
    replay (one transaction a poll)."""
    rows = conn.execute(
        "SELECT status, attempts, extract(epoch FROM started_at), "
        "extract(epoch FROM finished_at) FROM runs_run WHERE transcript_id = ANY(%s)",
        (ids,),
    ).fetchall()
    return [(str(s), int(a), float(b or 0), float(e or 0)) for s, a, b, e in rows]


def run_spans(server: str, database: str, ids: list[int]) -> dict[int, tuple[float, float]]:
    """Each run's (claimed, finished) times, by run id."""
    import psycopg

    with psycopg.connect(f"{server}/{database}") as conn:
        rows = conn.execute(
            "SELECT id, extract(epoch FROM started_at), extract(epoch FROM finished_at) "
            "FROM runs_run WHERE transcript_id = ANY(%s)",
            (ids,),
        ).fetchall()
    return {int(i): (float(b or 0), float(e or 0)) for i, b, e in rows}


def between_runs(log: str, spans: dict[int, tuple[float, float]]) -> float:
    """Seconds a worker host spent between finishing one run and claiming its next (its log
    says which runs it took, in order): the task's own work after the result is stored (the
    search index), its acknowledgement, and taking the next message from the broker."""
    taken = [int(run_id) for run_id in CLAIM_LINE.findall(log)]
    return sum(
        spans[later][0] - spans[earlier][1]
        for earlier, later in itertools.pairwise(taken)
        if earlier in spans and later in spans
    )


def idle_edges(
    log: str, spans: dict[int, tuple[float, float]], first_claim: float, last_finish: float
) -> tuple[float, float]:
    """(seconds from the batch's first claim to this host's first, seconds from this host's
    last finish to the batch's last): the batch's edges when the host had no run. With two
    hosts, the tail is what one host's core (and half the machine) spent with nothing left
    to take while the other finished its last run."""
    taken = [spans[int(run_id)] for run_id in CLAIM_LINE.findall(log) if int(run_id) in spans]
    if not taken:
        return (0.0, 0.0)
    return (
        round(min(b for b, _ in taken) - first_claim, 2),
        round(last_finish - max(e for _, e in taken), 2),
    )


#: moves every message of list KEYS[1] onto list KEYS[2], oldest first (kombu pushes on the
#: left and pops on the right), in one step: hosts blocked on KEYS[2] are woken together
MOVE_BACK = """
local moved = 0
while redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT') do moved = moved + 1 end
return moved
"""


def release(env: dict[str, str], queue: str, workers: int, timeout: float = 60) -> None:
    """Every worker of the round takes work from ``queue`` from now on (Celery's remote
    control, one broadcast, sent with the stack's own Celery settings): the hosts start
    together, however long each took to come up. Returns when each has said yes and the
    batch's messages are on ``queue`` again.

    A worker's Redis transport waits in a blocking pop on the queues it had (up to kombu's
    ``brpop_timeout``, 1 s) and pops from a queue added meanwhile only from its next pop on:
    each host would start 0-1 s after the broadcast, and with two hosts one replayed alone
    for that long inside the batch's time (0.06-0.65 s measured, a second core idle but for
    the servers). So the batch's messages are set aside until every host pops from ``queue``,
    then put back in one step."""
    import redis
    from kombu.transport.redis import Transport

    broker = redis.Redis.from_url(env["CELERY_BROKER_URL"])
    held = f"{queue}-held"
    if broker.exists(queue):
        broker.rename(queue, held)
    deadline = time.monotonic() + timeout
    while True:
        done = subprocess.run(
            [*CELERY, "control", "--timeout", "5", "--json", "add_consumer", queue],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        said_yes = done.stdout.count('"ok"')
        if said_yes >= workers:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"{said_yes} of {workers} workers took queue {queue}:\n{done}")
    time.sleep(Transport.brpop_timeout + 0.2)  # every host's next pop includes ``queue``
    broker.eval(MOVE_BACK, 2, held, queue)
    broker.close()


def transactions(server: str, database: str) -> int:
    """Transactions PostgreSQL counted in ``database`` so far (each autocommit statement is
    one): the database round trips of the batch, near enough (a backend reports its counts
    within a second or so of going idle)."""
    import psycopg

    with psycopg.connect(f"{server}/postgres") as conn:
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
            (database,),
        ).fetchone()
    return int(row[0]) if row else 0


def store_requests(log: Path) -> int:
    """Requests the object store (moto_server) has answered so far, one log line each."""
    return log.read_text(errors="replace").count(" HTTP/1.1")


def run_round(
    network: hosts.Network,
    stack: dict[str, str],
    local: dict[str, str],
    server: str,
    database: str,
    url: str,
    token: str,
    batch: list[Path],
    workers: int,
    label: str,
    timeout: float,
    pin: bool,
    store_log: Path,
) -> dict[str, object]:
    import psycopg

    from contextlab import upload_client

    ids = [upload_client.upload(p, url=url, token=token).session_id for p in batch]
    servers = [host for host in network.hosts if host.name in SERVER_HOSTS]
    cores = os.cpu_count() or 1
    worker_hosts = [
        network.add_host(f"{label}-w{i}", cpus=[i % cores] if pin else None) for i in range(workers)
    ]
    launched = time.time()
    # each host comes up on a queue of its own and takes the batch's queue once all are up
    procs = [
        hosts.start_worker(h, stack, wait=False, queues=[f"{label}-w{i}-idle"])
        for i, h in enumerate(worker_hosts)
    ]
    for host, proc in zip(worker_hosts, procs, strict=True):
        hosts.wait_worker(host, proc)
    watched = [*worker_hosts, *servers]
    relays = list(network.relayed.values())
    cpu_at_ready = {host.name: host.cpu_seconds() for host in watched}
    # the machine's PostgreSQL and Redis (--servers machine): their relays, and PostgreSQL
    # itself (every backend on the machine, other users' too: an upper bound)
    cpu_at_ready["relays"] = hosts.cpu_seconds(relays)
    postgres_at_ready = {
        pid: hosts.cpu_seconds([pid], children=False) for pid in hosts.named("postgres")
    }
    sched_at_ready = {host.name: hosts.sched_seconds(host.pids()) for host in worker_hosts}
    requests_at_ready, transactions_at_ready = (
        store_requests(store_log),
        transactions(server, database),
    )
    release(local, stack["CELERY_TASK_DEFAULT_QUEUE"], workers)
    deadline = time.monotonic() + timeout
    polls = 0
    with psycopg.connect(f"{server}/{database}", autocommit=True) as db:
        while True:
            times = round_times(db, ids)
            polls += 1
            if len(times) == len(ids) and all(s in {"done", "failed"} for s, *_ in times):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"{label}: runs not finished after {timeout}s: {times}")
            time.sleep(0.5)
    now = {host.name: host.cpu_seconds() for host in watched}
    if relays:
        now["relays"] = hosts.cpu_seconds(relays)
    sched = {host.name: hosts.sched_seconds(host.pids()) for host in worker_hosts}
    requests = store_requests(store_log) - requests_at_ready
    if relays:
        # backends that started during the batch count whole (the workers' connections)
        now["postgres (all)"] = sum(
            hosts.cpu_seconds([pid], children=False) - postgres_at_ready.get(pid, 0)
            for pid in hosts.named("postgres")
        )
        cpu_at_ready["postgres (all)"] = 0
    cpu = {name: round(used - cpu_at_ready[name], 1) for name, used in now.items()}
    for host in worker_hosts:
        host.stop()
    time.sleep(1)  # the workers' backends report their last transactions as they end
    database_transactions = transactions(server, database) - transactions_at_ready - polls
    failed = [t for t in times if t[0] != "done"]
    if failed:
        raise SystemExit(f"{label}: {len(failed)} runs failed")
    first_claim = min(t[2] for t in times)
    last_finish = max(t[3] for t in times)
    batch_seconds = max(last_finish - first_claim, 1e-9)
    per_host = {h.name: h.log("worker").count(": done (") for h in worker_hosts}
    spans = run_spans(server, database, ids)
    return {
        "workers": workers,
        "sessions": len(ids),
        "pinned": {h.name: list(h.cpus or ()) for h in worker_hosts},
        "batch_seconds": round(last_finish - first_claim, 2),
        "from_launch_seconds": round(last_finish - launched, 2),
        "runs_per_host": per_host,
        # CPU seconds each host (workers, web, object store) used during the batch, and the
        # share of a core it got: a worker well under 1 waited (for a core, or a server)
        "worker_cpu_seconds": cpu,
        "worker_core_share": {name: round(used / batch_seconds, 2) for name, used in cpu.items()},
        # where a worker host's batch went, by the scheduler's accounting (its threads): on a
        # core, runnable but waiting for a core (the machine's other work), and the rest of
        # the batch (waiting on the servers, the network, its next task; or done early)
        "worker_seconds_on_cpu_waiting_rest": {
            name: [
                round(sched[name][0] - sched_at_ready[name][0], 1),
                round(sched[name][1] - sched_at_ready[name][1], 1),
                round(
                    batch_seconds
                    - (sched[name][0] - sched_at_ready[name][0])
                    - (sched[name][1] - sched_at_ready[name][1]),
                    1,
                ),
            ]
            for name in sched
        },
        # round trips to the servers per run (the beat's periodic recovery included)
        "store_requests_per_run": round(requests / len(ids), 1),
        "database_transactions_per_run": round(database_transactions / len(ids), 1),
        "seconds_between_runs": {
            h.name: round(between_runs(h.log("worker"), spans), 2) for h in worker_hosts
        },
        "seconds_idle_at_start_end": {
            h.name: idle_edges(h.log("worker"), spans, first_claim, last_finish)
            for h in worker_hosts
        },
        "replays_per_run": sorted({t[1] for t in times}),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--size-kb", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=1, help="rounds of each: 1 host, 2 hosts")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="worker host i runs on core i (modulo the cores): one host, one core (default)",
    )
    parser.add_argument("--logs", type=Path, help="copy the hosts' logs to this folder")
    parser.add_argument(
        "--servers",
        choices=("own", "machine"),
        default="own",
        help="own (default): PostgreSQL and Redis started fresh on hosts of their own; "
        "machine: the machine's, on 127.0.0.1, relayed onto the bridge",
    )
    args = parser.parse_args(argv)

    batch = sessions(args.sessions, args.size_kb)
    tag = f"bench_hosts_{os.getpid()}"
    started_load = [round(x, 2) for x in os.getloadavg()]
    # a stopped bench still removes its hosts and its database (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results: list[dict[str, object]] = []
    server = "postgresql://postgres@127.0.0.1:5432"
    with (
        tempfile.TemporaryDirectory(prefix="bench-hosts-") as tmp,
        # PostgreSQL's own folder: its user cannot enter the root-only temporary folder
        tempfile.TemporaryDirectory(prefix="bench-hosts-db-") as db_folder,
    ):
        network = hosts.Network(Path(tmp) / "hosts")
        made = False
        try:
            if args.servers == "own":
                db, broker = network.add_host("db"), network.add_host("broker")
                server = hosts.start_postgres(db, Path(db_folder)).rsplit("/", 1)[0]
                broker_url = hosts.start_redis(broker)
            else:
                broker_url = "redis://127.0.0.1:6379/11"
            local = django_env(f"{server}/{tag}", broker_url, tag)
            create_database(server, tag)
            made = True
            print("migrating the bench database ...", file=sys.stderr)
            subprocess.run(
                [PYTHON, "manage.py", "migrate", "--noinput"],
                env=local,
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            # a user per round: the same session sent again by its owner would be taken for
            # the same session grown (and replayed from its checkpoint), not a new one
            labels = [f"r{r}h{w}" for r in range(1, args.rounds + 1) for w in (1, 2)]
            tokens = dict(
                zip(
                    labels,
                    manage(
                        local,
                        "from django.contrib.auth.models import User\n"
                        "from contextlab.accounts.services import create_api_token\n"
                        f"for name in {labels!r}:\n"
                        "    User.objects.create_user(name, password=None)\n"
                        "    print(create_api_token(username=name)[1])",
                    ).split(),
                    strict=True,
                )
            )
            store, web = network.add_host("store"), network.add_host("web")
            s3 = start_s3(Path(tmp), host=store.address, argv_prefix=store.exec_prefix())
            # the hosts reach the machine's servers through relays; their own, directly
            reach = network.remote_url if args.servers == "machine" else str
            stack = {
                **django_env(reach(local["DATABASE_URL"]), reach(local["CELERY_BROKER_URL"]), tag),
                **s3.env(),
                # a task lost on the way (a Redis database flushed by someone else) is sent
                # again soon; a second message for a run already claimed does nothing
                "RUN_QUEUED_RESEND_AFTER": "30",
                "RUN_RECOVER_EVERY": "5",
                # as docker-compose.worker.yml runs a worker host: one database connection
                # kept across tasks (the default, 0, opens one per task: a fresh PostgreSQL
                # backend whose first search-index insert loads the text search dictionaries,
                # ~0.1 s of the server's CPU a run)
                "CONN_MAX_AGE": "60",
            }
            url = hosts.start_web(web, stack)
            hosts.start_beat(web, stack)
            for round_no in range(1, args.rounds + 1):
                for workers in (1, 2):
                    folder = Path(tmp) / f"round{round_no}-{workers}"
                    folder.mkdir()
                    marker = 2 * round_no + workers  # a different blank-line count per round
                    copies = [variant(p, folder, marker) for p in batch]
                    label = f"r{round_no}h{workers}"
                    print(f"round {round_no}: {workers} worker host(s) ...", file=sys.stderr)
                    result = run_round(
                        network,
                        stack,
                        local,
                        server,
                        tag,
                        url,
                        tokens[label],
                        copies,
                        workers,
                        label,
                        args.timeout,
                        args.pin,
                        s3.log,
                    )
                    print(json.dumps(result), file=sys.stderr)
                    results.append(result)
        finally:
            if args.logs:
                args.logs.mkdir(parents=True, exist_ok=True)
                for log in [*(Path(tmp) / "hosts").glob("*.log"), *Path(tmp).glob("*.log")]:
                    shutil.copy(log, args.logs / log.name)
            if made and args.servers == "machine":
                drop_database(server, tag)
            network.close()

    seconds: dict[int, list[float]] = {1: [], 2: []}
    for result in results:
        seconds[int(str(result["workers"]))].append(float(str(result["batch_seconds"])))
    one, two = statistics.median(seconds[1]), statistics.median(seconds[2])
    ratio = two / one
    summary = {
        "sessions": args.sessions,
        "size_kb": args.size_kb,
        "cpus": os.cpu_count(),
        "servers": args.servers,
        "pinned": args.pin,
        "load_average_at_start": started_load,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "one_host_seconds": one,
        "two_hosts_seconds": two,
        "ratio": round(ratio, 3),
        "target": TARGET_RATIO,
        "met": ratio <= TARGET_RATIO,
        "rounds": results,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(summary, indent=2))
    print(
        f"{args.sessions} sessions of ~{args.size_kb} KB: one host {one:.1f} s, two hosts "
        f"{two:.1f} s: {ratio:.2f}x (target <= {TARGET_RATIO}x: "
        f"{'met' if ratio <= TARGET_RATIO else 'MISSED'}); load average at start "
        f"{started_load}, at end {summary['load_average_at_end']} on {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
