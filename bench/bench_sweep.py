"""Sweep benchmark: a 5-value sweep against one run, on the largest corpus session, 2 workers.

Target: sweep wall-clock <= 2 x one run. Two measurements:

1. **Real Celery workers** (default): two ``celery worker --pool=solo`` processes on Redis and a
   scratch PostgreSQL database (``contextlab_bench``, created and migrated here). Timed from the
   request (``start_run`` / ``tuning.services.create_sweep``) until every run is ``done`` in the
   database, polled every 25 ms. Each round uses sessions no worker has parsed yet (fresh bytes,
   so fresh session-cache keys): one run pays its own parsing and tokenizing, the sweep pays
   them once for its five runs — which is what the target compares. Both workers are warmed up first (tiktoken loaded, code
   imported). Three variants, ``--rounds`` times each with fresh values (so no run is reused):
   - ``one run``: one what-if run through ``runs.services.start_run`` (the single-run task);
   - ``sweep``: ``tuning.services.create_sweep`` with 5 values, queued as 2 batches so each
     worker parses and tokenizes the session once and replays 3 or 2 configs with it;
   - ``5 single runs``: the same 5 configs as 5 independent ``start_run`` runs, each parsing the
     session again (what a sweep would cost without batching), for reference.
2. **Engine only** (``--engine-only`` or when PostgreSQL/Redis are unreachable): the same work in
   plain processes, no database: one process doing load + replay, then a 2-process pool where
   each process loads the session once and replays its share of the 5 configs.

    python bench/bench_sweep.py                 # real workers (needs PostgreSQL and Redis)
    python bench/bench_sweep.py --rounds 5
    python bench/bench_sweep.py --engine-only

Results are printed and written to bench/out/sweep.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
CORPUS = Path(os.environ.get("CONTEXTLAB_CORPUS") or ROOT.parent / "shared" / "corpus")
LARGEST = CORPUS / "entireio__cli__25_730c662552_0_full.jsonl"
OUT_FILE = BENCH_DIR / "out" / "sweep.json"
FIELD = "autocompact_buffer_tokens"
TARGET = 2.0  # sweep / one run
PG = "postgres://postgres@127.0.0.1:5432/contextlab_bench"
REDIS = "redis://127.0.0.1:6379/14"


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def sweep_values(round_: int) -> list[int]:
    """Five values no earlier round used (so nothing is reused), one per 5,000 tokens."""
    return [5_000 + round_ * 7 + 5_000 * k for k in range(5)]


# --- engine only ----------------------------------------------------------------------------


def _replay_share(path: str, values: list[int]) -> float:
    from contextlab import engine

    start = time.perf_counter()
    session = engine.load_session(path)
    for value in values:
        config, preset = engine.resolve_config(
            "auto", {FIELD: value}, version=session.version or None
        )
        engine.replay(session, config, mode="whatif", preset_name=preset).to_json()
    return time.perf_counter() - start


def _warm(_: int) -> None:
    from contextlab import engine

    engine.load_session(str(ROOT / "contextlab" / "demo" / "marot__spotter__short.jsonl"))
    _replay_share(str(ROOT / "contextlab" / "demo" / "marot__spotter__short.jsonl"), [13_000])


def engine_only(path: Path, rounds: int) -> dict[str, Any]:
    one, sweep = [], []
    with ProcessPoolExecutor(max_workers=2) as pool:
        list(pool.map(_warm, range(2)))
        for r in range(rounds):
            start = time.perf_counter()
            pool.submit(_replay_share, str(path), [13_000 + r]).result()
            one.append(time.perf_counter() - start)
            values = sweep_values(r)
            start = time.perf_counter()
            futures = [
                pool.submit(_replay_share, str(path), values[:3]),
                pool.submit(_replay_share, str(path), values[3:]),
            ]
            for future in futures:
                future.result()
            sweep.append(time.perf_counter() - start)
    return {"one_run_s": one, "sweep_s": sweep}


# --- real Celery workers ------------------------------------------------------------------------


def setup_django(tmp: Path) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "contextlab.settings"
    os.environ["DATABASE_URL"] = PG
    os.environ["CELERY_BROKER_URL"] = REDIS
    os.environ["VAR_DIR"] = str(tmp / "var")
    os.environ["MEDIA_ROOT"] = str(tmp / "media")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    # persistent connections, as docker-compose.yml runs the web and the workers
    os.environ.setdefault("CONN_MAX_AGE", "60")
    sys.path.insert(0, str(ROOT))
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = 'contextlab_bench'").fetchone():
            c.execute("CREATE DATABASE contextlab_bench")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import redis

    redis.Redis.from_url(REDIS).flushdb()


def start_workers(tmp: Path, count: int) -> list[subprocess.Popen[bytes]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = []
    for n in range(count):
        log = (tmp / f"worker{n}.log").open("wb")
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "contextlab.celery",
                    "worker",
                    "--pool=solo",
                    "--loglevel=INFO",
                    "--without-mingle",
                    "--without-gossip",
                    f"--hostname=bench{n}@%h",
                ],
                env=env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    deadline = time.monotonic() + 60
    for n in range(count):
        while b"ready." not in (tmp / f"worker{n}.log").read_bytes():
            if time.monotonic() > deadline:
                raise RuntimeError((tmp / f"worker{n}.log").read_text())
            time.sleep(0.1)
    return procs


def wait_done(run_ids: list[int], timeout: float = 600) -> float:
    from contextlab.runs.models import Run

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        statuses = list(Run.objects.filter(pk__in=run_ids).values_list("status", flat=True))
        if all(s in ("done", "failed") for s in statuses):
            if "failed" in statuses:
                errors = Run.objects.filter(pk__in=run_ids, status="failed").values_list("error")
                raise RuntimeError(f"a run failed: {list(errors)}")
            return time.perf_counter()
        time.sleep(0.025)
    raise RuntimeError(f"runs {run_ids} not done after {timeout}s")


_FRESH: list[str] = []


def fresh_transcript(user: Any, path: Path, tmp: Path, label: str) -> Any:
    """A session never parsed by any worker: new bytes (a trailing blank line of its own,
    which the engine skips), stored without queueing the upload's recorded run."""
    from contextlab.runs import services as run_services
    from contextlab.transcripts import services as transcript_services

    copy = tmp / f"{label}-{os.getpid()}.jsonl"
    _FRESH.append(label)
    copy.write_bytes(path.read_bytes() + b"\n" * len(_FRESH))
    real_start_run = run_services.start_run
    run_services.start_run = lambda **_: None  # type: ignore[assignment,return-value]
    try:
        with copy.open("rb") as fh:
            transcript, _ = transcript_services.create_transcript(
                owner=user, name=copy.name, content=fh
            )
    finally:
        run_services.start_run = real_start_run  # type: ignore[assignment]
    return transcript


def real_workers(path: Path, rounds: int, tmp: Path, batches: int | None) -> dict[str, Any]:
    setup_django(tmp)
    from django.contrib.auth.models import User

    from contextlab.runs import services as run_services
    from contextlab.transcripts import services as transcript_services
    from contextlab.tuning import configs as tuning_configs
    from contextlab.tuning import services

    if batches is not None:
        services.PARALLEL_BATCHES = batches

    procs = start_workers(tmp, 2)
    try:
        user, _ = User.objects.get_or_create(username=f"bench-{os.getpid()}")
        with path.open("rb") as fh:
            transcript, _ = transcript_services.create_transcript(
                owner=user, name=path.name, content=fh
            )
        wait_done([transcript.runs.get().pk])  # the upload's recorded run
        # warm both workers (imports, tiktoken) with a 2-value sweep split over them
        warm = services.create_sweep(
            owner=user,
            transcripts=[transcript],
            base=tuning_configs.ConfigSpec(),
            field_name=FIELD,
            values=[14_001, 14_003],
        )
        wait_done([item.run_id for item in warm.items.all()])
        one, sweep, singles, request = [], [], [], []
        for r in range(rounds):
            # Cold sessions, as the target means it: one run pays its own parsing and
            # tokenizing; the sweep pays them once for its five runs. Fresh bytes give fresh
            # session-cache keys, and the upload's own recorded run is not queued for them.
            one_session = fresh_transcript(user, path, tmp, f"one-{r}")
            start = time.perf_counter()
            run = run_services.start_run(
                owner=user, transcript=one_session, mode="whatif", overrides={FIELD: 13_001 + r}
            )
            one.append(wait_done([run.pk]) - start)

            sweep_session = fresh_transcript(user, path, tmp, f"sweep-{r}")
            start = time.perf_counter()
            created = services.create_sweep(
                owner=user,
                transcripts=[sweep_session],
                base=tuning_configs.ConfigSpec(),
                field_name=FIELD,
                values=sweep_values(r),
            )
            ids = [item.run_id for item in created.items.all()]
            request.append(time.perf_counter() - start)
            assert len(set(ids)) == 5
            sweep.append(wait_done(ids) - start)

            start = time.perf_counter()
            runs = [
                run_services.start_run(
                    owner=user,
                    transcript=transcript,
                    mode="whatif",
                    overrides={FIELD: value + 3},
                )
                for value in sweep_values(r)
            ]
            singles.append(wait_done([run.pk for run in runs]) - start)
        requests = transcript.request_count
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        for n in range(len(procs)):  # kept for reading the per-task timings
            OUT_FILE.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(tmp / f"worker{n}.log", OUT_FILE.parent / f"sweep-worker{n}.log")
    return {
        "one_run_s": one,
        "sweep_s": sweep,
        "sweep_request_s": request,
        "five_single_runs_s": singles,
        "requests": requests,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engine-only", action="store_true")
    parser.add_argument(
        "--batches",
        type=int,
        default=None,
        help="split the sweep into this many batches (default: tuning.services.PARALLEL_BATCHES)",
    )
    parser.add_argument("--file", type=Path, default=LARGEST)
    parser.add_argument("-o", "--output", type=Path, default=OUT_FILE)
    args = parser.parse_args()
    path: Path = args.file
    if not path.exists():
        print(f"{path} not found", file=sys.stderr)
        return 2
    out: dict[str, Any] = {
        "file": str(path),
        "size_bytes": path.stat().st_size,
        "values_per_sweep": 5,
        "workers": 2,
        "rounds": args.rounds,
        "target": TARGET,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    services_up = reachable("127.0.0.1", 5432) and reachable("127.0.0.1", 6379)
    if not args.engine_only and not services_up:
        print("PostgreSQL or Redis unreachable: measuring with the engine only", file=sys.stderr)
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    try:
        out["engine_only"] = engine_only(path, args.rounds)
        if not args.engine_only and services_up:
            out["celery"] = real_workers(path, args.rounds, tmp, args.batches)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"{path.name} ({out['size_bytes'] / 1e6:.1f} MB), 5-value sweep of {FIELD}, 2 workers")
    print(f"{'measurement':<44} {'median s':>9} {'ratio':>7}")
    verdict = None
    for key, label in (
        ("celery", "real Celery workers"),
        ("engine_only", "engine only, 2 processes"),
    ):
        if key not in out:
            continue
        data = out[key]
        one = statistics.median(data["one_run_s"])
        sweep = statistics.median(data["sweep_s"])
        ratio = sweep / one
        data["ratio"] = round(ratio, 3)
        print(f"{label + ': one run':<44} {one:>9.3f}")
        print(f"{label + ': 5-value sweep (batched)':<44} {sweep:>9.3f} {ratio:>6.2f}x")
        if "sweep_request_s" in data:
            req = statistics.median(data["sweep_request_s"])
            print(f"{label + ': of which creating the sweep':<44} {req:>9.3f}")
        if "five_single_runs_s" in data:
            singles = statistics.median(data["five_single_runs_s"])
            data["unbatched_ratio"] = round(singles / one, 3)
            print(
                f"{label + ': 5 single runs (no sharing)':<44} {singles:>9.3f} {singles / one:>6.2f}x"
            )
        verdict = verdict if verdict is not None else ratio
    ok = verdict is not None and verdict <= TARGET
    out["ok"] = ok
    print(f"target sweep <= {TARGET}x one run: {'met' if ok else 'NOT met'} ({verdict:.2f}x)")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
