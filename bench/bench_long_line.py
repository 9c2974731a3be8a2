"""One huge single-line message: replay time and peak memory (issue #23: "a 63 MB line takes
3.6 GB and 73 s").

    PYTHONPATH=. python bench/bench_long_line.py              # 63 MB, as the audit found it
    PYTHONPATH=. python bench/bench_long_line.py --mb 8       # smaller

Builds ``bench/data/long-line-<kind>-<N>mb.jsonl``: a short real session (the bundled demo)
whose last tool result is one line of N MB with no whitespace: one letter repeated (``run``, the
default: the worst case for a tokenizer, one piece as long as the line) or random base64
(``base64``), then runs ``contextlab replay --json`` on it in a child
process and prints the child's wall time and peak RSS (``ru_maxrss`` of the child, read with
``os.wait4``). Targets: peak ≤ 600 MB, replay ≤ 20 s for 63 MB.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
SESSION = ROOT / "contextlab" / "demo" / "marot__spotter__tool_heavy.jsonl"


def build(mb: int, kind: str) -> Path:
    path = DATA / f"long-line-{kind}-{mb}mb.jsonl"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    lines = SESSION.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    last_result = max(
        i
        for i, r in enumerate(records)
        if r.get("type") == "user"
        and isinstance(r["message"].get("content"), list)
        and any(b.get("type") == "tool_result" for b in r["message"]["content"])
    )
    rng = random.Random(1)
    size = mb * 1024 * 1024
    blob = (
        base64.b64encode(rng.randbytes(size * 3 // 4)).decode()
        if kind == "base64"
        else "x" * size  # one letter repeated: one pre-tokenizer piece as long as the line
    )
    for block in records[last_result]["message"]["content"]:
        if block.get("type") == "tool_result":
            block["content"] = blob
            break
    with path.open("w") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
    return path


def run(path: Path) -> tuple[float, int, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "contextlab.engine.cli", "replay", "--json", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    return elapsed, usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=63)
    parser.add_argument("--kind", choices=("base64", "run"), default="run")
    args = parser.parse_args()
    path = build(args.mb, args.kind)
    elapsed, peak, code = run(path)
    print(
        f"{path.name}: {path.stat().st_size / 1e6:.1f} MB, replay {elapsed:.1f} s, "
        f"peak {peak / 1e6:.0f} MB, exit {code}"
    )


if __name__ == "__main__":
    main()
