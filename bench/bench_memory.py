#!/usr/bin/env python3
"""Replay memory against session size (issue #25: a 2 GB session in a worker of ≤ 1.5 GB).

For each size, a synthetic session (``gen_synthetic.py``, seed 1, in ``bench/data/``) is replayed
in a fresh process, and that process's peak RSS is read with ``os.wait4`` (``ru_maxrss``, what
``/usr/bin/time -v`` reports) in two ways:

* ``cli``: ``contextlab replay FILE --json > /dev/null`` (``bench_scale.engine_replay``);
* ``worker``: the engine part of the worker's job (``jobs.replay``), ``load_session_cached``
  (parse, count tokens, pickle the session into a fresh cache folder), the messages stored
  for the explorer (written part by part to a file, as ``jobs.replay`` streams them to
  PostgreSQL), the recorded replay, the tools breakdown and waste findings stored with it
  (worked out from message rows that read each text back when asked for), and its
  JSON (written request by request, as the runner streams it); no database.

Printed: the peaks, the slope between the smallest and the largest size (MB of RSS per MB of
file) and the peak that slope gives at 2,048 MB. Memory only: the times printed beside are one
run each, not a benchmark.

Usage: .venv/bin/python bench/bench_memory.py [--sizes 100 200 400] [--steps worker]
Writes bench/out/memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_scale import PYTHON, engine_replay, synthetic  # noqa: E402

MB = 1024 * 1024
TARGET_SIZE_MB = 2048

#: Run in the child: the worker's engine steps, from ``jobs.replay`` without the database.
WORKER_STEPS = """
import os, sys
from contextlab.engine.measures.tokenized import load_session_cached
from contextlab.engine import messages_json_parts, write_json
from contextlab.engine.config.resolve import resolve_session_config
from contextlab.engine.replay.driver import replay
session = load_session_cached(sys.argv[1], cache_dir=sys.argv[2])
# the explorer's TranscriptMessages parts, streamed part by part as jobs.replay streams them
# to PostgreSQL (COPY); here to a file beside the cache
with open(os.path.join(sys.argv[2], "messages.json"), "w", encoding="utf-8") as sink:
    for part in messages_json_parts(session):
        sink.write(part)
config, preset = resolve_session_config(session)
result = replay(session, config, mode="recorded", preset_name=preset)
data = result.to_json()
# what jobs.replay stores with it: the tools breakdown and the waste findings, from the
# messages whose texts are read back when asked for (the waste findings compare them)
from contextlab import engine
messages = engine.expand_messages(
    engine.messages_json(session, include_originals=True, include_texts=False, texts_on_read=True)
)
data[engine.TOOL_BREAKDOWN_KEY] = engine.tool_breakdown(data, messages)
data["waste"] = {"waste": engine.waste_findings(engine.as_result(data), messages)}
del messages
# its RunResult row, streamed request by request as jobs.lifecycle streams it (COPY)
with open(os.path.join(sys.argv[2], "result.json"), "w", encoding="utf-8") as sink:
    write_json(data, sink)
"""


def worker_replay(path: Path) -> tuple[float, int]:
    """Seconds and peak RSS (bytes) of ``WORKER_STEPS`` on ``path``, with an empty cache."""
    with tempfile.TemporaryDirectory(prefix="contextlab-bench-") as cache:
        start = time.perf_counter()
        proc = subprocess.Popen([str(PYTHON), "-c", WORKER_STEPS, str(path), cache], cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"worker steps on {path} failed")
    return elapsed, usage.ru_maxrss * 1024


def slope(points: list[tuple[int, int]]) -> float:
    """MB of RSS per MB of file between the smallest and the largest size."""
    (small, small_rss), (large, large_rss) = min(points), max(points)
    return (large_rss - small_rss) / MB / (large - small)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 400], help="MiB")
    parser.add_argument(
        "--steps",
        nargs="+",
        choices=("cli", "worker"),
        default=["cli", "worker"],
        help="which replays to measure (default both)",
    )
    parser.add_argument("-o", "--output", default=str(ROOT / "bench" / "out" / "memory.json"))
    args = parser.parse_args()
    if len(set(args.sizes)) < 2:
        parser.error("--sizes needs two sizes or more")
    report: dict[str, dict[str, object]] = {}
    for name, run in (("cli", engine_replay), ("worker", worker_replay)):
        if name not in args.steps:
            continue
        points = []
        for size_mb in sorted(args.sizes):
            seconds, peak = run(synthetic(size_mb))
            points.append((size_mb, peak))
            print(f"{name} {size_mb} MB: peak {peak / MB:.0f} MB ({seconds:.1f} s)", flush=True)
        per_mb = slope(points)
        small, small_rss = min(points)
        at_target = small_rss / MB + per_mb * (TARGET_SIZE_MB - small)
        print(f"{name}: {per_mb:.2f} MB per MB of file, {at_target:.0f} MB at {TARGET_SIZE_MB} MB")
        report[name] = {
            "peaks_mb": {str(s): round(p / MB) for s, p in points},
            "mb_per_mb": round(per_mb, 3),
            f"projected_mb_at_{TARGET_SIZE_MB}": round(at_target),
        }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
