"""Advice benchmark: advice over 20 real sessions against replaying them once, 2 workers.

Target: advice wall-clock <= 3 x replaying the 20 sessions once. The sessions are the 20
largest main-conversation transcripts of the corpus (``recent/`` and ``recent2/`` included;
subagent files left out, as a team's uploads are sessions). Two measurements:

1. **Real Celery workers** (default): two ``celery worker --pool=solo`` processes on Redis and
   the scratch PostgreSQL database ``contextlab_bench`` (as bench_sweep.py). Each side gets
   fresh copies of the sessions (new bytes, so no worker has parsed them and no run is reused):
   - ``replay once``: one what-if run of each session with its own settings
     (``runs.services.start_run``), timed until all 20 are ``done``;
   - ``advice``: ``advice.services.create_advice`` with the default knobs (the sessions' own
     settings, ``autocompact_pct_override`` 60/70/80/90 and ``cache_ttl`` 5m/1h: 7 configs per
     session, queued as batches that parse each session once), timed until every run is done
     and the recommendations are computed (``advice.reports.recommend``).
2. **Engine only** (``--engine-only`` or when PostgreSQL/Redis are unreachable): the same work
   in a 2-process pool with no database: load + one replay per session, against load once +
   7 replays per session.

    python bench/bench_advice.py                # real workers (needs PostgreSQL and Redis)
    python bench/bench_advice.py --engine-only
    python bench/bench_advice.py --rounds 3     # three alternating rounds, median ratio
    python bench/bench_advice.py --sessions 10  # fewer sessions (a quicker look)

Results are printed and written to bench/out/advice.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from bench_sweep import (  # noqa: E402  (the sweep benchmark's worker helpers)
    CORPUS,
    fresh_transcript,
    reachable,
    start_workers,
    wait_done,
)

OUT_FILE = BENCH_DIR / "out" / "advice.json"
#: its own database and Redis db, so it can run beside bench_sweep.py
DB_NAME = "contextlab_bench_advice"
PG = f"postgres://postgres@127.0.0.1:5432/{DB_NAME}"
REDIS = "redis://127.0.0.1:6379/13"
TARGET = 3.0  # advice / replaying once
CONFIGS = [
    {},
    *({"autocompact_pct_override": v} for v in (60, 70, 80, 90)),
    *({"cache_ttl": v} for v in ("5m", "1h")),
]


def corpus_sessions(count: int) -> list[Path]:
    """The ``count`` largest main-conversation transcripts of the corpus."""
    files = [
        p
        for folder in (CORPUS, CORPUS / "recent", CORPUS / "recent2")
        if folder.is_dir()
        for p in folder.glob("*.jsonl")
        if "_subagents_" not in p.name
    ]
    return sorted(files, key=lambda p: (-p.stat().st_size, p.name))[:count]


# --- engine only ----------------------------------------------------------------------------


def _replay(path: str, configs: list[dict[str, Any]]) -> float:
    from contextlab import engine

    start = time.perf_counter()
    session = engine.load_session(path)
    for overrides in configs:
        config, preset = engine.resolve_config("auto", overrides, version=session.version or None)
        engine.replay(session, config, mode="whatif", preset_name=preset).to_json()
    session.close()
    return time.perf_counter() - start


def engine_only(paths: list[Path]) -> dict[str, Any]:
    with ProcessPoolExecutor(max_workers=2) as pool:
        pool.submit(_replay, str(paths[-1]), [{}]).result()  # imports, tiktoken
        start = time.perf_counter()
        list(pool.map(_replay, [str(p) for p in paths], [[{}]] * len(paths)))
        once = time.perf_counter() - start
        start = time.perf_counter()
        list(pool.map(_replay, [str(p) for p in paths], [CONFIGS] * len(paths)))
        advice = time.perf_counter() - start
    return {"replay_once_s": once, "advice_s": advice}


# --- real Celery workers ------------------------------------------------------------------------


def setup_django(tmp: Path) -> None:
    """bench_sweep.setup_django with this benchmark's own database and Redis db."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "contextlab.settings"
    os.environ["DATABASE_URL"] = PG
    os.environ["CELERY_BROKER_URL"] = REDIS
    os.environ["VAR_DIR"] = str(tmp / "var")
    os.environ["MEDIA_ROOT"] = str(tmp / "media")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("CONN_MAX_AGE", "60")
    os.environ.setdefault("SECRET_KEY", "bench-only-" + "x" * 40)
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,)).fetchone():
            c.execute(f"CREATE DATABASE {DB_NAME}")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import redis

    redis.Redis.from_url(REDIS).flushdb()


def real_workers(paths: list[Path], tmp: Path, rounds: int = 1) -> dict[str, Any]:
    setup_django(tmp)
    from django.contrib.auth.models import User

    from contextlab.advice import reports, services
    from contextlab.runs import services as run_services

    procs = start_workers(tmp, 2)
    try:
        user, _ = User.objects.get_or_create(username=f"bench-advice-{os.getpid()}")
        # warm both workers (imports, tiktoken) on the smallest session
        warm = [
            run_services.start_run(
                owner=user,
                transcript=fresh_transcript(user, paths[-1], tmp, f"warm-{n}"),
                mode="whatif",
                overrides={},
            )
            for n in range(2)
        ]
        wait_done([run.pk for run in warm])

        # the two sides alternate, round after round (a busy machine slows both), each on
        # fresh copies (nothing parsed, nothing reused)
        once_s: list[float] = []
        advice_s: list[float] = []
        recommend_s: list[float] = []
        ratios: list[float] = []
        for r in range(rounds):
            once_sessions = [
                fresh_transcript(user, p, tmp, f"once-{r}-{i}") for i, p in enumerate(paths)
            ]
            start = time.perf_counter()
            runs = [
                run_services.start_run(owner=user, transcript=t, mode="whatif", overrides={})
                for t in once_sessions
            ]
            once_s.append(wait_done([run.pk for run in runs], timeout=3600) - start)

            advice_sessions = [
                fresh_transcript(user, p, tmp, f"advice-{r}-{i}") for i, p in enumerate(paths)
            ]
            start = time.perf_counter()
            advice = services.create_advice(
                owner=user,
                transcripts=advice_sessions,
                goal="lowest_cost",
                cost_cap=None,
                knobs=None,
            )
            ids = list(advice.items.values_list("run_id", flat=True))
            runs_done = wait_done(ids, timeout=3600)
            result = reports.recommend(advice)
            advice_s.append(time.perf_counter() - start)
            recommend_s.append(time.perf_counter() - runs_done)
            ratios.append(advice_s[-1] / once_s[-1])
            print(
                f"round {r + 1}: once {once_s[-1]:.2f} s, advice {advice_s[-1]:.2f} s "
                f"({ratios[-1]:.2f}x)",
                flush=True,
            )
        best = result["recommendations"][0] if result["recommendations"] else None
        return {
            "replay_once_s": statistics.median(once_s),
            "advice_s": statistics.median(advice_s),
            "rounds": {"replay_once_s": once_s, "advice_s": advice_s, "ratios": ratios},
            "of_which_recommend_s": statistics.median(recommend_s),
            "advice_runs": len(ids),
            "distinct_runs": len(set(ids)),
            "requests": sum(t.request_count for t in once_sessions),
            "recommended": best
            and {
                k: best[k]
                for k in (
                    "label",
                    "settings",
                    "saving_usd",
                    "saving_low_usd",
                    "saving_high_usd",
                    "history_kept_delta",
                    "compactions_delta",
                )
            },
            "hurts": len(best["hurts"]) if best else None,
        }
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except Exception:
                proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--engine-only", action="store_true")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds (medians)")
    parser.add_argument("-o", "--output", type=Path, default=OUT_FILE)
    args = parser.parse_args()
    paths = corpus_sessions(args.sessions)
    if len(paths) < args.sessions:
        print(f"only {len(paths)} sessions in {CORPUS}", file=sys.stderr)
        return 2
    out: dict[str, Any] = {
        "sessions": [str(p.relative_to(CORPUS)) for p in paths],
        "bytes": sum(p.stat().st_size for p in paths),
        "configs_per_session": len(CONFIGS),
        "workers": 2,
        "target": TARGET,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    services_up = reachable("127.0.0.1", 5432) and reachable("127.0.0.1", 6379)
    tmp = Path(tempfile.mkdtemp(prefix="bench-advice-"))
    try:
        if args.engine_only or not services_up:
            if not args.engine_only:
                print("PostgreSQL or Redis unreachable: engine only", file=sys.stderr)
            out["engine_only"] = engine_only(paths)
        else:
            out["celery"] = real_workers(paths, tmp, args.rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    key = "celery" if "celery" in out else "engine_only"
    data = out[key]
    # the median of the rounds' own ratios (each round's two sides ran back to back)
    rounds = data.get("rounds", {}).get("ratios")
    ratio = statistics.median(rounds) if rounds else data["advice_s"] / data["replay_once_s"]
    data["ratio"] = round(ratio, 3)
    out["ok"] = ratio <= TARGET
    print(
        f"{len(paths)} sessions ({out['bytes'] / 1e6:.1f} MB), {len(CONFIGS)} configs each, "
        f"2 workers ({key})"
    )
    print(f"replay each once: {data['replay_once_s']:.2f} s")
    print(f"advice:           {data['advice_s']:.2f} s  ({ratio:.2f}x)")
    if "of_which_recommend_s" in data:
        print(f"  of which the recommendations: {data['of_which_recommend_s']:.2f} s")
    if data.get("recommended"):
        print(f"recommended: {json.dumps(data['recommended'])}")
    print(f"target advice <= {TARGET}x replaying once: {'met' if out['ok'] else 'NOT met'}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
