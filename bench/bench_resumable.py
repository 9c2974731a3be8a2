#!/usr/bin/env python3
"""A large session through a resumable (tus) upload whose connection is cut at 50 %, against
the engine's replay of the same file, measured in the same run.

Starts `make run`'s launcher (web server and a real Celery worker, SQLite, embedded broker,
filesystem storage) on a scratch VAR_DIR, sends the synthetic session with `contextlab upload`
(tus, 16 MiB pieces) through a TCP relay that drops the connection once half of the bytes have
passed, waits for the worker to store it and for its recorded replay, and prints, with the
targets of issue #25:

* bytes sent against the file's size (resumed, not restarted: at most one piece more);
* peak RSS of the web server during the upload (≤ 300 MB) and of the worker (≤ 1.5 GB): the
  largest process's (a pool process, the upload check's child), a pool process's with its
  children's (the check's child) and all the worker's processes' (its main process, the
  embedded beat's, the pool's), summed in one sample;
* upload → replay done against ``contextlab replay FILE --json`` of the same file (≤ 1.5×).

Usage: .venv/bin/python bench/bench_resumable.py [--size-mb 200] [--port 8798]
Writes bench/out/resumable.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from bench_scale import PeakMemory, engine_replay, synthetic  # noqa: E402
from bench_web import PYTHON, start_server  # noqa: E402

from contextlab import upload_client  # noqa: E402
from tests.storage.netcut import CuttingProxy  # noqa: E402

OUT = ROOT / "bench" / "out"
MB = 1024 * 1024


def api_token(var_dir: Path) -> str:
    env = dict(os.environ, VAR_DIR=str(var_dir))
    for key in ("DATABASE_URL", "CELERY_BROKER_URL"):
        env.pop(key, None)
    out = subprocess.run(
        [str(PYTHON), "manage.py", "create_api_token", "demo"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1]


def wait_for_replay(base: str, token: str, session_id: int, timeout: float = 7200) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        request = urllib.request.Request(
            f"{base}/api/sessions/{session_id}", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            runs = json.load(response)["runs"]
        if runs and runs[0]["status"] in ("done", "failed"):
            if runs[0]["status"] == "failed":
                raise SystemExit(f"replay failed: {runs[0]['error']}")
            return
        time.sleep(0.5)
    raise SystemExit("replay not done in time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--port", type=int, default=8798)
    args = parser.parse_args()
    path = synthetic(args.size_mb)
    size = path.stat().st_size
    replay_s, replay_rss = engine_replay(path)
    print(f"engine replay of {size / MB:.0f} MB: {replay_s:.1f} s, peak {replay_rss / MB:.0f} MB")

    var_dir = Path(tempfile.mkdtemp(prefix="contextlab-bench-resumable-"))
    proc, _password, log = start_server(args.port, var_dir)
    try:
        token = api_token(var_dir)
        base = f"http://127.0.0.1:{args.port}"
        proxy = CuttingProxy(("127.0.0.1", args.port), size // 2)
        os.environ["CONTEXTLAB_CACHE_DIR"] = str(var_dir / "client-cache")
        with PeakMemory(proc.pid) as upload_memory:
            start = time.perf_counter()
            sent = upload_client.upload(path, url=proxy.url, token=token, timeout=600)
            stored_s = time.perf_counter() - start
        web_peak = upload_memory.peak("web")
        with PeakMemory(proc.pid) as memory:
            wait_for_replay(base, token, sent.session_id)
            total_s = time.perf_counter() - start
        proxy.close()
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    # the largest process's peak (a pool process, or the upload check's child process), and
    # what the worker's processes held together (the check's child beside its pool process)
    worker_peak = max(memory.peak("worker"), upload_memory.peak("worker"))
    worker_tree_peak = max(memory.tree_peak("worker"), upload_memory.tree_peak("worker"))
    pool_tree_peak = max(memory.subtree_peak("worker"), upload_memory.subtree_peak("worker"))
    result = {
        "file_bytes": size,
        "sent_bytes": proxy.sent,
        "cuts": proxy.cuts,
        "engine_replay_s": round(replay_s, 2),
        "engine_replay_peak_mb": round(replay_rss / MB),
        "upload_stored_s": round(stored_s, 2),
        "upload_to_replay_done_s": round(total_s, 2),
        "ratio": round(total_s / replay_s, 2),
        "web_peak_mb_during_upload": round(web_peak / MB),
        "worker_peak_mb": round(worker_peak / MB),
        "worker_tree_peak_mb": round(worker_tree_peak / MB),
        "pool_process_tree_peak_mb": round(pool_tree_peak / MB),
        # the same by phase: the upload and its check (the check's child beside the pool
        # process waiting for it), then the replay
        "pool_process_tree_peak_mb_upload": round(upload_memory.subtree_peak("worker") / MB),
        "pool_process_tree_peak_mb_replay": round(memory.subtree_peak("worker") / MB),
        "worker_processes": {
            f"{pid}: {command[:80]}": round(hwm / MB)
            for peaks in (upload_memory.peaks, memory.peaks)
            for pid, (command, hwm) in peaks.items()
        },
        "server_log": str(log),
    }
    print(
        f"sent {proxy.sent / MB:.1f} MB for a {size / MB:.1f} MB file ({proxy.cuts} cut); "
        f"stored after {stored_s:.1f} s; upload → replay done {total_s:.1f} s = "
        f"{total_s / replay_s:.2f}× the engine's replay (target ≤ 1.5); web peak "
        f"{web_peak / MB:.0f} MB during the upload (target ≤ 300); worker peak "
        f"{worker_peak / MB:.0f} MB (target ≤ 1536); a pool process with its children "
        f"{pool_tree_peak / MB:.0f} MB (during the upload and its check "
        f"{upload_memory.subtree_peak('worker') / MB:.0f} MB); all the worker's processes together "
        f"{worker_tree_peak / MB:.0f} MB"
    )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "resumable.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
