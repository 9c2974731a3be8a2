"""How provisional a live session's provisional result is: a session grown append by append
(cut every ``--every`` lines of its second half, as ``contextlab watch``'s polls cut it, at any
line), each update going on from the last replay's state (``engine.continue_live``, a whole
``engine.replay_live`` when the state does not fit), then compared with a whole replay of the
finished file: how often an update went on, why it did not, what one took, and how far each
update's new rows (as first shown, provisional) are from the final rows of the same requests
(recorded figures must be equal).

    python bench/live_provisional.py [--session PATH]... [--every 7] [--refit-percent 25]

Prints one block per session. Engine only (no web, no worker), one process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

from bench_live import DEFAULTS  # noqa: E402

from contextlab import engine  # noqa: E402


def walk(source: Path, every: int, refit: float | None) -> None:
    data = source.read_bytes()
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    cuts = [starts[i] for i in range(len(starts) // 2, len(starts) - 1, every)] + [len(data)]
    folder = Path(tempfile.mkdtemp())

    def version(n: int, end: int) -> engine.Session:
        path = folder / f"v{n}.jsonl"
        path.write_bytes(data[:end])
        return engine.load_session(str(path), name=source.name)

    first = version(0, cuts[0])
    config, preset = engine.resolve_session_config(first)
    result, state = engine.replay_live(first, config, preset_name=preset)
    seconds: list[float] = []
    whole_because: Counter[str] = Counter()
    #: the rows each update that went on added, as it first showed them
    shown: dict[int, dict[str, object]] = {}
    #: the last row of each such update (its response may still have been written)
    last_shown: set[int] = set()
    for n, end in enumerate(cuts[1:], start=1):
        grown = version(n, end)
        start = time.perf_counter()
        known = len(result.main_requests())
        try:
            result, state = engine.continue_live(state, grown, refit_share=refit)
            seconds.append(time.perf_counter() - start)
            added = result.to_json()["requests"][known:]
            for row in added:
                shown[row["index"]] = dict(row)
            if added:
                last_shown.add(added[-1]["index"])
        except ValueError as exc:
            whole_because[str(exc).split(": ")[-1].split(",")[0]] += 1
            result, state = engine.replay_live(grown, config, preset_name=preset)
    final = engine.replay(version(len(cuts), len(data)), config, preset_name=preset)
    rows = final.to_json()["requests"]
    assert len(result.to_json()["requests"]) == len(rows)
    pairs = [(row, rows[k]) for k, row in shown.items()]
    gap = [
        abs(int(a["model_tokens"]) - b["model_tokens"]) / max(1, b["model_tokens"])  # type: ignore[call-overload]
        for a, b in pairs
    ] or [0.0]
    differ = [
        k
        for k, a in shown.items()
        if (a["recorded"], a["recorded_cost_usd"])
        != (rows[k]["recorded"], rows[k]["recorded_cost_usd"])
    ]
    recorded_equal = (
        f"{len(differ)} rows differ, {sum(k in last_shown for k in differ)} of them the last row"
        " of their update (a response still being written)"
    )
    print(f"{source.name}: {len(data) / 1e6:.1f} MB, {len(rows)} requests, {len(cuts) - 1} appends")
    print(f"  went on from the state: {len(seconds)}; replayed whole: {dict(whole_because)}")
    if seconds:
        print(f"  an update that went on: median {statistics.median(seconds):.4f} s")
    print(
        f"  {len(pairs)} rows first shown provisional; their model view tokens against the"
        f" final rows: median {statistics.median(gap):.2%}, largest {max(gap):.2%};"
        f" recorded usage and cost: {recorded_equal}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", type=Path, action="append", default=None)
    parser.add_argument("--every", type=int, default=7, help="lines between two appends")
    parser.add_argument(
        "--refit-percent",
        type=float,
        default=25,
        help="replay whole once the session has this many percent more requests than the fit "
        "(LIVE_REFIT_PERCENT); 0: never",
    )
    args = parser.parse_args()
    corpus = Path(os.environ.get("CONTEXTLAB_CORPUS") or "")
    for source in args.session or DEFAULTS:
        if source.exists():
            walk(source, args.every, args.refit_percent / 100 if args.refit_percent else None)
        else:
            print(f"{source}: not found (CONTEXTLAB_CORPUS={corpus})")


if __name__ == "__main__":
    main()
