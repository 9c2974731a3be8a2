"""A live update's findings and search index: what each costs per append, going on from the
last version (this branch) against worked out over the whole session (as before), in the same
run, beside the replay of the appended requests alone.

Each size's synthetic session (``gen_synthetic.py``, seed 1) is uploaded cut before its last
``--tail`` + 1 requests (its first replay, whole), grown by one request (the first live
update: its replay state, waste scan and index kept), then grown by the last ``--tail``
requests: the measured update, through the worker's own code (``transcripts.live.append``,
``jobs.replay.execute_run``, in this process, on a fresh PostgreSQL test database). Two
sessions of the same bytes are grown so: "after" as this branch does it, "before" with the
search index read from every stored message (``search.services._appended_pieces`` off),
the waste scan made whole (no kept state, stored or held) and the messages' rows and tools
breakdown worked out whole (``engine.live_findings`` given no kept findings), as before them. The pieces timed
in each update:

* ``replay``: ``engine.continue_live``, the appended requests replayed from the kept state;
* ``findings``: ``jobs.replay.with_live_findings`` (tools breakdown and waste report; on a
  tree before branch livesrv, ``with_findings`` and the scan) and, of it, ``scan``: the waste
  scan with its kept state's read and write (``jobs.replay._live_scan``);
* ``index``: ``search.services.index_session``.

    python bench/bench_live_findings.py [--size-mb 16 64] [--tail 1] [--runs 1]

Results (seconds, the median of ``--runs`` pairs of sessions; the load average is printed)
are written to bench/out/live-findings.json. Target (issue #25): an update costs ≤ 2× the
replay of the appended requests alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH_DIR))
OUT_FILE = BENCH_DIR / "out" / "live-findings.json"

from bench_django import setup_django, test_database  # noqa: E402
from bench_live import cut_before_last_requests  # noqa: E402


def synthetic(size_mb: float) -> bytes:
    path = BENCH_DIR / "data" / f"synth-{size_mb:g}mb-seed1.jsonl"
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                str(BENCH_DIR / "gen_synthetic.py"),
                "--size-mb",
                str(size_mb),
                "--seed",
                "1",
                "-o",
                str(path),
            ],
            check=True,
            capture_output=True,
        )
    return path.read_bytes()


@contextmanager
def timed(owner: Any, name: str, into: dict[str, float]) -> Iterator[None]:
    """Add the seconds each call of ``owner.name`` takes to ``into[name]``."""
    real = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            into[name] = into.get(name, 0.0) + time.perf_counter() - start

    setattr(owner, name, wrapper)
    try:
        yield
    finally:
        setattr(owner, name, real)


@contextmanager
def as_before() -> Iterator[None]:
    """The search index read from every stored message, the waste scan made whole."""
    from contextlab import engine
    from contextlab.search import services

    real_pieces, real_scan = services._appended_pieces, engine.scan_main_thread
    services._appended_pieces = lambda *a, **k: None  # type: ignore[assignment]
    engine.scan_main_thread = lambda session, kept=None: real_scan(session, None)  # type: ignore[assignment]
    real_on = getattr(engine, "scan_main_thread_on", None)
    if real_on is not None:  # (the scan held in memory, since branch livesrv)
        engine.scan_main_thread_on = lambda session, kept=None, held=None: real_on(session)  # type: ignore[assignment]
    real_findings = getattr(engine, "live_findings", None)
    if real_findings is not None:
        engine.live_findings = lambda data, session, kept=None: real_findings(data, session, None)  # type: ignore[assignment]
    try:
        yield
    finally:
        services._appended_pieces = real_pieces  # type: ignore[assignment]
        engine.scan_main_thread = real_scan  # type: ignore[assignment]
        if real_findings is not None:
            engine.live_findings = real_findings  # type: ignore[assignment]
        if real_on is not None:
            engine.scan_main_thread_on = real_on  # type: ignore[assignment]


def update(data: bytes, cuts: tuple[int, int], before: bool) -> dict[str, float]:
    """Upload ``data`` up to ``cuts[0]``, grow it to ``cuts[1]`` (the upload's replay is not
    a live one: this first growth's is whole), then to its end: the last update's timed
    pieces."""
    from django.contrib.auth.models import User

    from contextlab import engine
    from contextlab.jobs import replay as runner
    from contextlab.runs.models import Run
    from contextlab.search import services as search
    from contextlab.transcripts import live
    from contextlab.transcripts import services as transcripts

    # a user (and workspace) of its own: a workspace holds the same bytes once
    user = User.objects.create_user(username=f"bench-{User.objects.count()}", password="pw-b-123")
    session, _ = transcripts.create_transcript(
        owner=user, name="live.jsonl", content=[data[: cuts[0]]]
    )
    run = session.runs.get()
    runner.execute_run(run.pk)
    for start, end in ((cuts[0], cuts[1]), (cuts[1], len(data))):
        live.append(session.pk, offset=start, data=data[start:end])
        last = end == len(data)
        times: dict[str, float] = {}
        # the findings of a live version: one call since branch livesrv (the scan in it)
        findings = (
            "with_live_findings" if hasattr(runner, "with_live_findings") else "with_findings"
        )
        with (
            timed(engine, "continue_live", times),
            timed(runner, findings, times),
            timed(runner, "_live_scan", times),
            timed(search, "index_session", times),
            as_before() if before and last else _nothing(),
        ):
            started = time.perf_counter()
            runner.execute_run(run.pk)
            times["update"] = time.perf_counter() - started
        run.refresh_from_db()
        if run.status != Run.Status.DONE or (last and not run.provisional):
            raise SystemExit(f"the update did not go on provisionally: {run.status} {run.error}")
    return {
        "replay": times["continue_live"],
        "findings": times[findings] + (times["_live_scan"] if findings == "with_findings" else 0),
        "scan": times["_live_scan"],
        "index": times["index_session"],
        "update": times["update"],
    }


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def measure(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for size in args.size_mb:
        data = synthetic(size)
        last = cut_before_last_requests(data, args.tail)
        first = cut_before_last_requests(data[:last], 1)
        figures: dict[str, list[dict[str, float]]] = defaultdict(list)
        for _ in range(args.runs):
            for label in ("before", "after"):
                figures[label].append(update(data, (first, last), label == "before"))
        row = {
            label: {k: round(statistics.median(r[k] for r in rows), 3) for k in rows[0]}
            for label, rows in figures.items()
        }
        row["load"] = os.getloadavg()
        out[f"{size:g}MB"] = row
        print(f"{size:g} MB, load {row['load'][0]:.2f}")
        for label in ("before", "after"):
            print(f"  {label:6}", "  ".join(f"{k} {v:.3f}s" for k, v in row[label].items()))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, nargs="*", default=[16, 64])
    parser.add_argument("--tail", type=int, default=1, help="requests the measured append adds")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    setup_django(name="bench_live_findings")
    with test_database("bench_live_findings"):
        out = measure(args)
    OUT_FILE.parent.mkdir(exist_ok=True)
    OUT_FILE.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
