"""Storing a live session's updated result: the whole result written again (as every append
did before branch livestore) against the provisional store that keeps the parts the last
append's store left unchanged (``lifecycle._store_result(..., live=True)``), in the same run.

A synthetic session of ``--synthetic-mb`` MB (``gen_synthetic.py``, seed 1) is replayed once;
its result less its last request is stored as the last append's, then the whole result as the
append's update, each way, alternating, the median of ``--runs``. The database is a test
database of its own on the settings' server (PostgreSQL by default; ``--database sqlite``).

    python bench/bench_live_store.py [--synthetic-mb 16 64] [--runs 5] [--database sqlite]

Results are printed and written to bench/out/live-store.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH_DIR))
OUT_FILE = BENCH_DIR / "out" / "live-store.json"

from bench_django import setup_django, test_database  # noqa: E402


def replayed(megabytes: float, folder: Path) -> tuple[Path, dict[str, Any]]:
    """A synthetic session and its recorded replay's result JSON (as a worker stores it)."""
    from gen_synthetic import generate

    from contextlab import engine

    path = folder / f"synthetic-{megabytes:g}mb.jsonl"
    generate(path, int(megabytes * 1024**2), seed=1)
    session = engine.load_session(str(path))
    config, preset = engine.resolve_session_config(session)
    result = engine.replay(session, config, mode="recorded", preset_name=preset).to_json()
    session.close()
    return path, result


def measure(megabytes: float, runs: int, folder: Path) -> dict[str, Any]:
    from django.contrib.auth.models import User

    from contextlab.jobs import lifecycle
    from contextlab.transcripts import services

    path, data = replayed(megabytes, folder)
    earlier = {**data, "requests": data["requests"][:-1]}
    owner, _ = User.objects.get_or_create(username=f"bench-{megabytes:g}")
    with path.open("rb") as fh:
        transcript, _ = services.create_transcript(owner=owner, name=path.name, content=fh)
    run_id = transcript.runs.get().pk
    times: dict[str, list[float]] = {"whole": [], "live": []}
    for _ in range(runs):
        lifecycle._store_result(run_id, earlier)
        start = time.perf_counter()
        lifecycle._store_result(run_id, data)
        times["whole"].append(time.perf_counter() - start)
        # the last append's store, by this worker (outside a transaction: remembered at once)
        lifecycle._store_result(run_id, earlier, live=True)
        start = time.perf_counter()
        lifecycle._store_result(run_id, data, live=True)
        times["live"].append(time.perf_counter() - start)
    median = {k: statistics.median(v) for k, v in times.items()}
    return {
        "session": path.name,
        "requests": len(data["requests"]),
        "requests_json_bytes": len(json.dumps(data["requests"])),
        "seconds": median,
        "live_vs_whole": median["live"] / median["whole"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic-mb", type=float, nargs="*", default=[16, 64])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--database", choices=("postgres", "sqlite"), default="postgres")
    args = parser.parse_args()
    setup_django(args.database, name="bench_live_store")
    results = []
    with test_database("bench_live_store"), tempfile.TemporaryDirectory() as tmp:
        for megabytes in args.synthetic_mb:
            out = measure(megabytes, args.runs, Path(tmp))
            results.append(out)
            print(
                f"{out['session']}: {out['requests']} requests"
                f" ({out['requests_json_bytes'] / 1e6:.2f} MB of JSON): store whole"
                f" {out['seconds']['whole']:.3f} s, live store"
                f" {out['seconds']['live']:.3f} s ({out['live_vs_whole']:.2f}x)"
            )
    OUT_FILE.parent.mkdir(exist_ok=True)
    OUT_FILE.write_text(
        json.dumps({"database": args.database, "load": os.getloadavg(), "results": results})
    )


if __name__ == "__main__":
    main()
