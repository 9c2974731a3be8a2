#!/usr/bin/env python3
"""Scale through the web: a 100 MB (and, with ``--sizes 100 500``, a 500 MB) session uploaded
over HTTP to the real local stack (`make run`'s launcher: web server and a real Celery worker),
against the engine's own replay of the same file, measured in the same run.

Printed per size, with its target (issue #13, "Scale through the web"):

* upload → viewable report (upload request, the worker's replay, the report page) against
  ``contextlab replay FILE --json`` of the same file: ratio ≤ 1.5;
* peak RSS of the web server and of the worker (``VmHWM`` of every process of the stack, read
  from ``/proc`` while the stack runs; the replay's own peak beside it): worker ≤ 1.5 GB;
* bytes stored per request (the result JSON and the session's messages, from the database);
* the report and the request explorer (first, middle and last request) against a trivial page
  (the login form) served by the same server: explorer ≤ 3×, report ≤ 3×.

Usage: .venv/bin/python bench/bench_scale.py [--sizes 100] [--runs 3] [--uploads 3] [--port 8797]
Writes bench/out/scale.json. Synthetic inputs are generated into bench/data/ when missing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / ".ci"))

from bench_web import PHASES, login, start_server, timed_get, upload_to_report  # noqa: E402
from smoke_make_run import Browser  # noqa: E402

PYTHON = ROOT / ".venv" / "bin" / "python"
DATA = ROOT / "bench" / "data"


def synthetic(size_mb: int) -> Path:
    target = DATA / f"synth-{size_mb}mb.jsonl"
    if not target.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                str(PYTHON),
                str(ROOT / "bench" / "gen_synthetic.py"),
                "--size-mb",
                str(size_mb),
                "--seed",
                "1",
                "-o",
                str(target),
            ],
            check=True,
        )
    return target


def with_newlines(path: Path, n: int) -> Path:
    """A copy of ``path`` with ``n`` blank lines appended: the same session, other bytes."""
    copy = path.with_name(f"{path.stem}-copy{n}{path.suffix}")
    with path.open("rb") as src, copy.open("wb") as out:
        while chunk := src.read(1 << 24):
            out.write(chunk)
        out.write(b"\n" * n)
    return copy


def engine_replay(path: Path) -> tuple[float, int]:
    """Seconds and peak RSS (bytes) of ``contextlab replay FILE --json > /dev/null``."""
    env = dict(os.environ, CONTEXTLAB_CACHE_DIR=tempfile.mkdtemp(prefix="contextlab-bench-"))
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        proc = subprocess.Popen(
            [str(PYTHON), "-m", "contextlab.cli", "replay", str(path), "--json"],
            stdout=sink,
            cwd=ROOT,
            env=env,
        )
        _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"contextlab replay {path} failed")
    return elapsed, usage.ru_maxrss * 1024


#: the word in the command line of the web server's and the worker's processes
ROLE_MARKERS = {"web": "runserver", "worker": "celery"}


class PeakMemory:
    """The largest ``VmHWM`` seen for each process descending from ``root`` (the launcher's
    children run in sessions of their own), sampled while they run: a pool process that exits
    keeps the figure it last showed. A process started by the web server or the worker (the
    worker's upload check in a child process) counts as theirs; ``tree_peak`` is the largest
    sum of the current RSS of a role's processes seen in one sample (what they held together)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.peaks: dict[int, tuple[str, int]] = {}
        self.tree_peaks: dict[str, int] = dict.fromkeys(ROLE_MARKERS, 0)
        self.subtree_peaks: dict[str, int] = dict.fromkeys(ROLE_MARKERS, 0)
        self._roles: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sample()
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(0.25):
            self.sample()

    def _descendants(self) -> dict[int, int]:
        """Each process descending from ``root`` (and ``root``) with its parent."""
        parent: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    # the field after the parenthesised command name is the state, then the ppid
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                parent[int(entry.name)] = int(fields[1])
        found = {self.root}
        grew = True
        while grew:
            more = {pid for pid, ppid in parent.items() if ppid in found} - found
            found |= more
            grew = bool(more)
        return {pid: parent.get(pid, 0) for pid in found}

    def sample(self) -> None:
        tree = self._descendants()
        commands: dict[int, str] = {}
        sizes: dict[int, tuple[int, int]] = {}
        for pid in tree:
            entry = Path("/proc") / str(pid)
            try:
                status = (entry / "status").read_text()
                commands[pid] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            values = {
                line.split(":")[0]: int(line.split()[1]) * 1024
                for line in status.splitlines()
                if line.startswith(("VmHWM:", "VmRSS:"))
            }
            sizes[pid] = (values.get("VmHWM", 0), values.get("VmRSS", 0))
        totals = dict.fromkeys(ROLE_MARKERS, 0)
        for pid, (hwm, rss) in sizes.items():
            role = self._role(pid, tree, commands)
            if role is None:
                continue
            self._roles[pid] = role
            totals[role] += rss
            if hwm > self.peaks.get(pid, ("", 0))[1]:
                self.peaks[pid] = (commands[pid], hwm)
        for role, total in totals.items():
            self.tree_peaks[role] = max(self.tree_peaks[role], total)
        # a process the role's first process started (a pool process), with its own children
        for pid in sizes:
            role = self._roles.get(pid)
            if role is None or self._roles.get(tree.get(pid, 0)) != role:
                continue  # not the role's, or its first process (the sum of all, above)
            below = {pid}
            grew = True
            while grew:
                more = {p for p, ppid in tree.items() if ppid in below} - below
                below |= more
                grew = bool(more)
            held = sum(sizes[p][1] for p in below if p in sizes)
            self.subtree_peaks[role] = max(self.subtree_peaks[role], held)

    def _role(self, pid: int, tree: dict[int, int], commands: dict[int, str]) -> str | None:
        """The role of the nearest process up from ``pid`` whose command names one."""
        while pid in tree:
            if pid in self._roles:
                return self._roles[pid]
            command = commands.get(pid, "")
            for role, marker in ROLE_MARKERS.items():
                if marker in command:
                    return role
            pid = tree[pid]
        return None

    def peak(self, role: str) -> int:
        """The largest peak among the web server's (``runserver``) or the worker's processes
        (and the processes they started)."""
        return max(
            (hwm for pid, (_, hwm) in self.peaks.items() if self._roles.get(pid) == role), default=0
        )

    def tree_peak(self, role: str) -> int:
        """The largest RSS the role's processes held together in one sample."""
        return self.tree_peaks[role]

    def subtree_peak(self, role: str) -> int:
        """The largest RSS one process the role's first process started (a pool process) held
        together with the processes it started (the upload check's child), in one sample."""
        return self.subtree_peaks[role]


def stored_bytes(var_dir: Path, session_id: int) -> dict[str, int]:
    with sqlite3.connect(var_dir / "db.sqlite3") as db:
        # the result's row and its requests' parts (``RunResultPart``)
        result = db.execute(
            "SELECT length(r.data) + coalesce((SELECT sum(length(p.data)) FROM runs_runresultpart p"
            " WHERE p.result_id = r.run_id), 0) FROM runs_runresult r JOIN runs_run u"
            " ON u.id = r.run_id WHERE u.transcript_id = ? ORDER BY u.id DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        messages = db.execute(
            "SELECT length(data) FROM transcripts_transcriptmessages WHERE transcript_id = ?",
            (session_id,),
        ).fetchone()
    return {
        "result": int(result[0] if result else 0),
        "messages": int(messages[0] if messages else 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100], help="MiB")
    parser.add_argument("--runs", type=int, default=3, help="timings of each page")
    parser.add_argument(
        "--uploads",
        type=int,
        default=1,
        help="upload→report and engine replay pairs, alternated (medians; a busy machine slows both)",
    )
    parser.add_argument("--port", type=int, default=8797)
    parser.add_argument("-o", "--output", default=str(ROOT / "bench" / "out" / "scale.json"))
    args = parser.parse_args()
    out: list[dict[str, object]] = []
    for size in args.sizes:
        path = synthetic(size)
        var_dir = Path(tempfile.mkdtemp(prefix="contextlab-bench-scale-"))
        proc, password, _log = start_server(args.port, var_dir)
        try:
            import smoke_make_run

            smoke_make_run.BASE = f"http://127.0.0.1:{args.port}"
            browser = Browser()
            login(browser, password)
            replays: list[float] = []
            uploads: list[float] = []
            phases: list[dict[str, float]] = []
            replay_rss = 0
            with PeakMemory(proc.pid) as memory:
                for n in range(args.uploads):
                    # new bytes for each upload (the same file twice is deduplicated by sha256)
                    copy = path if n == 0 else with_newlines(path, n)
                    seconds, rss = engine_replay(copy)
                    replays.append(seconds)
                    replay_rss = max(replay_rss, rss)
                    upload_s, session_id = upload_to_report(browser, copy)
                    uploads.append(upload_s)
                    phases.append(dict(PHASES))
                    if copy != path:
                        copy.unlink()
                replay_s, upload_s = statistics.median(replays), statistics.median(uploads)
                requests = json.loads(browser.request("GET", f"/api/sessions/{session_id}")[1])[
                    "requests"
                ]
                trivial = timed_get(browser, "/accounts/login/", args.runs)
                report = timed_get(browser, f"/sessions/{session_id}/", args.runs)
                explorer = {
                    index: timed_get(
                        browser, f"/sessions/{session_id}/requests/{index}/", args.runs
                    )
                    for index in (0, requests // 2, requests - 1)
                }
            stored = stored_bytes(var_dir, session_id)
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        row: dict[str, object] = {
            "size_mb": size,
            "file_bytes": path.stat().st_size,
            "requests": requests,
            "engine_replay_s": round(replay_s, 2),
            "engine_replay_peak_rss_mb": round(replay_rss / 2**20),
            "upload_to_report_s": round(upload_s, 2),
            "ratio": round(upload_s / replay_s, 2),
            "upload_phases": phases,
            "engine_replays_s": [round(x, 2) for x in replays],
            "uploads_to_report_s": [round(x, 2) for x in uploads],
            "web_peak_rss_mb": round(memory.peak("web") / 2**20),
            "worker_peak_rss_mb": round(memory.peak("worker") / 2**20),
            "stored_bytes_per_request": round(
                (stored["result"] + stored["messages"]) / max(1, requests)
            ),
            "trivial_page_ms": round(trivial * 1000, 1),
            "report_ms": round(report * 1000, 1),
            "report_ratio": round(report / trivial, 2),
            "explorer_ms": {str(k): round(v * 1000, 1) for k, v in explorer.items()},
            "explorer_worst_ratio": round(max(explorer.values()) / trivial, 2),
        }
        out.append(row)
        print(
            f"{size} MiB ({requests} requests): upload→report {row['upload_to_report_s']} s vs "
            f"engine replay {row['engine_replay_s']} s → ratio {row['ratio']} (target ≤ 1.5; "
            f"medians of {args.uploads}; last upload: "
            f"{', '.join(f'{k} {v}' for k, v in PHASES.items())}); "
            f"peak RSS web {row['web_peak_rss_mb']} MB, worker {row['worker_peak_rss_mb']} MB "
            f"(target ≤ 1536), engine alone {row['engine_replay_peak_rss_mb']} MB; "
            f"{row['stored_bytes_per_request']:,} bytes stored/request; "
            f"report {row['report_ms']} ms = {row['report_ratio']}× the trivial page "
            f"({row['trivial_page_ms']} ms; target ≤ 3), explorer worst "
            f"{row['explorer_worst_ratio']}× (target ≤ 3)"
        )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
