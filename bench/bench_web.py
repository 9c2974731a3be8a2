#!/usr/bin/env python3
"""Web benchmarks for the dashboard, against the real local stack (`make run`'s launcher).

1. Upload → viewable report of the largest corpus file, over HTTP (upload, the worker's replay
   on the embedded broker, the report page with its charts), against `claude-code-log` turning
   the same file into HTML, measured in the same run. Target: ratio ≤ 1.
2. The request explorer for requests across that session against a trivial page (the login
   form) served by the same server in the same run. Target: every request ≤ 3× the trivial one.
3. Storage per request for the smallest and the largest corpus file: the stored result JSON plus
   the session's messages, divided by requests. Target: grows linearly (bytes per request of
   the same order for both).

Usage: .venv/bin/python bench/bench_web.py [--runs 5] [--port 8799] [--samples 15]
Prints a table and writes bench/out/web.json. Standard library only (plus the project itself).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / ".ci"))

from smoke_make_run import Browser, multipart  # noqa: E402 - the CI smoke test's HTTP client

CORPUS = Path(os.environ.get("CONTEXTLAB_CORPUS") or ROOT.parent / "shared" / "corpus")
PYTHON = ROOT / ".venv" / "bin" / "python"
CCL = ROOT / ".venv" / "bin" / "claude-code-log"


def start_server(port: int, var_dir: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    log = var_dir / "server.log"
    env = dict(os.environ, PORT=str(port), VAR_DIR=str(var_dir))
    for key in ("DATABASE_URL", "CELERY_BROKER_URL"):
        env.pop(key, None)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(PYTHON), "-m", "contextlab.devserver", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        match = re.search(r"log in as 'demo' with password '([^']+)'", text)
        if match and "ContextLab on http" in text:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=2)
                return proc, match.group(1), log
            except OSError:
                pass  # printed, not listening yet
        if proc.poll() is not None:
            raise SystemExit(f"server exited:\n{text[-3000:]}")
        time.sleep(0.3)
    raise SystemExit("server did not start")


def login(browser: Browser, password: str) -> None:
    browser.request("GET", "/accounts/login/")
    form = urllib.parse.urlencode(
        {"username": "demo", "password": password, "csrfmiddlewaretoken": browser.csrf()}
    ).encode()
    status, _ = browser.request(
        "POST",
        "/accounts/login/",
        form,
        {"Content-Type": "application/x-www-form-urlencoded"},
    )
    if status != 200:
        raise SystemExit(f"login failed: {status}")


#: seconds of each phase of the last ``upload_to_report``: the upload request, the wait for the
#: worker's replay, the first report page
PHASES: dict[str, float] = {}


def upload_to_report(browser: Browser, path: Path) -> tuple[float, int]:
    """Seconds from the upload request to a rendered report; the session id (``PHASES``: where
    the time went)."""
    data, content_type = multipart("file", path)
    start = time.perf_counter()
    status, body = browser.request(
        "POST", "/api/sessions", data, {"Content-Type": content_type, "X-CSRFToken": browser.csrf()}
    )
    uploaded = time.perf_counter()
    if status not in (200, 201):
        raise SystemExit(f"upload failed {status}: {body[:300]!r}")
    session = json.loads(body)
    run_id = json.loads(browser.request("GET", f"/api/sessions/{session['id']}")[1])["runs"][-1][
        "id"
    ]
    while True:
        run = json.loads(browser.request("GET", f"/api/runs/{run_id}")[1])
        if run["status"] in ("done", "failed"):
            break
        time.sleep(0.02)
    if run["status"] != "done":
        raise SystemExit(f"run failed: {run.get('error')}")
    replayed = time.perf_counter()
    status, page = browser.request("GET", f"/sessions/{session['id']}/")
    end = time.perf_counter()
    elapsed = end - start
    PHASES.update(
        upload_request_s=round(uploaded - start, 2),
        replay_wait_s=round(replayed - uploaded, 2),
        first_report_s=round(end - replayed, 2),
    )
    if status != 200 or b'id="chart-context"' not in page:
        raise SystemExit("report did not render")
    return elapsed, int(session["id"])


def claude_code_log(path: Path, scratch: Path) -> float:
    env = dict(os.environ, HOME=str(scratch))
    start = time.perf_counter()
    subprocess.run(
        [str(CCL), str(path), "-o", str(scratch / "out.html"), "--no-cache"],
        cwd=scratch,
        env=env,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def timed_get(browser: Browser, path: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        status, _ = browser.request("GET", path)
        times.append(time.perf_counter() - start)
        if status != 200:
            raise SystemExit(f"GET {path} answered {status}")
    return statistics.median(times)


def storage_per_request(path: Path) -> dict[str, float]:
    os.environ.setdefault("CONTEXTLAB_CACHE_DIR", tempfile.mkdtemp())
    from contextlab import engine

    session = engine.load_session(str(path))
    config, preset = engine.resolve_config("auto", version=session.version)
    result = engine.replay(session, config, preset_name=preset).to_json()
    requests = max(
        1, len(result["requests"]) + sum(len(s["requests"]) for s in result["subagents"])
    )
    result_bytes = len(json.dumps(result, separators=(",", ":")))
    message_bytes = len(json.dumps(engine.messages_json(session), separators=(",", ":")))
    return {
        "file": path.name,
        "file_bytes": path.stat().st_size,
        "requests": requests,
        "result_bytes_per_request": round(result_bytes / requests),
        "messages_bytes_per_request": round(message_bytes / requests),
        "total_bytes_per_request": round((result_bytes + message_bytes) / requests),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--samples", type=int, default=15, help="explorer requests to time")
    parser.add_argument("-o", "--output", default=str(ROOT / "bench" / "out" / "web.json"))
    args = parser.parse_args()
    files = sorted(CORPUS.rglob("*.jsonl"), key=lambda p: p.stat().st_size)  # recent/ too
    largest, smallest = files[-1], files[0]
    var_dir = Path(tempfile.mkdtemp(prefix="contextlab-bench-web-"))
    scratch = Path(tempfile.mkdtemp(prefix="contextlab-bench-ccl-"))
    proc, password, _log = start_server(args.port, var_dir)
    out: dict[str, object] = {"file": largest.name, "runs": args.runs}
    try:
        os.environ["SMOKE_PORT"] = str(args.port)
        import smoke_make_run

        smoke_make_run.BASE = f"http://127.0.0.1:{args.port}"
        browser = Browser()
        login(browser, password)
        ours, theirs = [], []
        session_id = 0
        for n in range(args.runs):
            # each upload must be new bytes (the same file twice is deduplicated by sha256)
            copy = scratch / f"{largest.stem}-{n}.jsonl"
            copy.write_bytes(largest.read_bytes() + b"\n" * (n + 1))
            elapsed, session_id = upload_to_report(browser, copy)
            ours.append(elapsed)
            theirs.append(claude_code_log(largest, scratch))
        upload = {
            "upload_to_report_s": round(statistics.median(ours), 3),
            "claude_code_log_s": round(statistics.median(theirs), 3),
        }
        upload["ratio"] = round(upload["upload_to_report_s"] / upload["claude_code_log_s"], 3)
        out["upload"] = upload
        print(
            f"upload → report of {largest.name}: {upload['upload_to_report_s']} s vs "
            f"claude-code-log {upload['claude_code_log_s']} s → ratio {upload['ratio']} (target ≤ 1)"
        )
        count = json.loads(browser.request("GET", f"/api/sessions/{session_id}")[1])["requests"]
        trivial = timed_get(browser, "/accounts/login/", args.runs)
        step = max(1, count // args.samples)
        explorer = []
        for index in [*list(range(0, count, step)), count - 1]:
            t = timed_get(browser, f"/sessions/{session_id}/requests/{index}/", args.runs)
            explorer.append({"request": index, "s": round(t, 4), "ratio": round(t / trivial, 2)})
        worst = max(explorer, key=lambda e: e["s"])
        out["explorer"] = {"trivial_s": round(trivial, 4), "requests": explorer, "worst": worst}
        print(
            f"explorer: trivial page {trivial * 1000:.1f} ms; {len(explorer)} requests, worst "
            f"request {worst['request']} {worst['s'] * 1000:.1f} ms → ratio {worst['ratio']} (target ≤ 3)"
        )
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(var_dir, ignore_errors=True)
    storage = [storage_per_request(smallest), storage_per_request(largest)]
    out["storage"] = storage
    for row in storage:
        print(
            f"storage {row['file'][:45]}: {row['requests']} requests, "
            f"{row['total_bytes_per_request']:,} bytes/request "
            f"(result {row['result_bytes_per_request']:,} + messages {row['messages_bytes_per_request']:,})"
        )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
