#!/usr/bin/env python3
"""Page-load benchmark in real headless Chromium: the session report against the login page.

For each session (the largest corpus file, skipped without a corpus, and a synthetic session of
``--requests`` requests) the report page is loaded on a **first visit**: a new browser context,
so nothing is in the browser cache, logged in through its cookies only. The login page is
loaded the same way in the same run, alternately, so a busy machine slows both. Each figure is
the median of ``--runs`` loads, from Playwright's navigation timing:

* ``load_ms``: navigation start to the end of the load event;
* ``charts_ms``: navigation start to the first chart drawn (``#chart-context .main-svg``);
* ``ttfb_ms``: navigation start to the first byte of the page (the server's share);
* ``js_bytes``: JavaScript bytes over the wire (the encoded bodies of every script response),
  ``html_bytes`` the page's own.

Target (issue #12): report ``load_ms`` within 4× the login page's and at most 1.5 MB of
JavaScript over the wire.

A Codex rollout of the same requests (the same prompts, calls and outputs, in Codex's shapes:
issue #24, "pages as fast as Claude Code's") is loaded beside the synthetic Claude Code session:
its report and its request explorer (the middle request; first visit too), each against the
Claude Code session's same page in the same run, alternately: ``codex_ratio`` (target ≤ 1, with
the run's noise).

Static files are served as in production (``--static manifest``: ``collectstatic`` into the run's
own folder, hashed and compressed by whitenoise) or as ``make run`` serves them
(``--static source``: straight from ``static/``).

Usage: python bench/bench_pages.py [--runs 5] [--requests 3800] [--static manifest|source]
Prints a table and writes bench/out/pages.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("CONTEXTLAB_CORPUS") or ROOT.parent / "shared" / "corpus")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
#: report targets of issue #12
MAX_LOAD_RATIO = 4.0
MAX_JS_BYTES = 1_500_000


def write_synthetic(path: Path, requests: int, seed: int = 1) -> None:
    """A main session of ``requests`` API requests: prompts, Bash calls and their results.

    Small blocks on purpose: the page's cost grows with the number of requests (chart points,
    rows), which is what this session measures; bench/gen_synthetic.py makes big ones.
    """
    rng = random.Random(seed)
    session = "00000000-0000-4000-8000-000000000001"
    clock = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    parent: str | None = None
    prompt_tokens = 12_000
    n = 0

    def record(kind: str, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
        nonlocal parent, clock, n
        n += 1
        clock += timedelta(seconds=rng.uniform(1, 20))
        uid = f"00000000-0000-4000-9000-{n:012d}"
        row = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/project",
            "sessionId": session,
            "version": "2.1.39",
            "gitBranch": "main",
            "type": kind,
            "message": message,
            "uuid": uid,
            "timestamp": clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{clock.microsecond // 1000:03d}Z",
            **extra,
        }
        parent = uid
        return row

    with path.open("w") as out:
        done = 0
        while done < requests:
            out.write(
                json.dumps(
                    record("user", {"role": "user", "content": f"Step {done}: run the tests"})
                )
                + "\n"
            )
            for call in range(rng.randint(1, 6)):
                if done >= requests:
                    break
                done += 1
                added = rng.randint(200, 900)
                usage = {
                    "input_tokens": 3,
                    "cache_creation_input_tokens": added,
                    "cache_read_input_tokens": prompt_tokens,
                    "output_tokens": rng.randint(20, 300),
                }
                prompt_tokens += added
                tool_id = f"toolu_{done:08d}"
                message = {
                    "id": f"msg_{done:08d}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5-20250929",
                    "content": [
                        {"type": "text", "text": f"Running check {call} of step {done}."},
                        {
                            "type": "tool_use",
                            "id": tool_id,
                            "name": "Bash",
                            "input": {"command": f"pytest -k case_{done}"},
                        },
                    ],
                    "stop_reason": "tool_use",
                    "usage": usage,
                }
                out.write(
                    json.dumps(record("assistant", message, requestId=f"req_{done:08d}")) + "\n"
                )
                result = "\n".join(
                    f"tests/test_{done}.py::case_{i} PASSED" for i in range(rng.randint(3, 30))
                )
                content = [{"type": "tool_result", "tool_use_id": tool_id, "content": result}]
                out.write(json.dumps(record("user", {"role": "user", "content": content})) + "\n")
            if prompt_tokens > 150_000:
                prompt_tokens = 12_000  # as if compacted: keeps the recorded usage plausible


def write_synthetic_codex(path: Path, requests: int, seed: int = 1) -> None:
    """``write_synthetic``'s session as a Codex rollout (0.104 shapes): the same random draws, so
    the same prompts, calls, outputs and recorded figures."""
    rng = random.Random(seed)
    clock = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    keys = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")
    total = dict.fromkeys((*keys, "total_tokens"), 0)
    prompt_tokens = 12_000

    def tick() -> None:
        # where write_synthetic draws a record's time, so that every other draw is the same
        nonlocal clock
        clock += timedelta(seconds=rng.uniform(1, 20))

    def line(kind: str, payload: dict[str, Any]) -> str:
        stamp = clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{clock.microsecond // 1000:03d}Z"
        return json.dumps({"timestamp": stamp, "type": kind, "payload": payload}) + "\n"

    def count(last: dict[str, int]) -> str:
        for key in total:
            total[key] += last[key]
        info = {"total_token_usage": dict(total), "last_token_usage": last}
        return line(
            "event_msg", {"type": "token_count", "info": info | {"model_context_window": 258_400}}
        )

    def item(payload: dict[str, Any]) -> str:
        return line("response_item", payload)

    with path.open("w") as out:
        meta = {"id": "00000000-0000-4000-8000-0000000c0de5", "cwd": "/home/dev/project"}
        out.write(
            line("session_meta", meta | {"originator": "codex_cli_rs", "cli_version": "0.104.0"})
        )
        out.write(line("turn_context", {"model": "gpt-5.3-codex", "cwd": "/home/dev/project"}))
        done = 0
        while done < requests:
            text = f"Step {done}: run the tests"
            content = [{"type": "input_text", "text": text}]
            tick()
            out.write(item({"type": "message", "role": "user", "content": content}))
            for call in range(rng.randint(1, 6)):
                if done >= requests:
                    break
                done += 1
                added = rng.randint(200, 900)
                output = rng.randint(20, 300)
                inp = 3 + added + prompt_tokens
                last = {"input_tokens": inp, "cached_input_tokens": prompt_tokens}
                last |= {"output_tokens": output, "reasoning_output_tokens": 0}
                prompt_tokens += added
                call_id = f"call_{done:08d}"
                tick()
                said = [{"type": "output_text", "text": f"Running check {call} of step {done}."}]
                out.write(item({"type": "message", "role": "assistant", "content": said}))
                arguments = json.dumps({"cmd": f"pytest -k case_{done}"})
                function = {"type": "function_call", "name": "exec_command", "call_id": call_id}
                out.write(item(function | {"arguments": arguments}))
                out.write(count(last | {"total_tokens": inp + output}))
                result = "\n".join(
                    f"tests/test_{done}.py::case_{i} PASSED" for i in range(rng.randint(3, 30))
                )
                tick()
                output_item = {"type": "function_call_output", "call_id": call_id}
                out.write(item(output_item | {"output": result}))
            if prompt_tokens > 150_000:
                prompt_tokens = 12_000  # as write_synthetic does: no compaction record either


@contextmanager
def server(port: int, var_dir: Path, static: str) -> Iterator[str]:
    """``python -m contextlab.devserver`` (SQLite, embedded broker); yields the demo password."""
    env = dict(os.environ, PORT=str(port), VAR_DIR=str(var_dir), DEBUG="false")
    for key in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"):
        env.pop(key, None)
    env["PYTHONPATH"] = str(ROOT)
    if static == "manifest":
        env["STATIC_MANIFEST"] = "true"
        env["STATIC_ROOT"] = str(var_dir / "static")
        env.setdefault("SECRET_KEY", "bench-only-secret-key-" + "x" * 40)
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
            cwd=ROOT,
            env=env,
            check=True,
        )
    else:
        env["STATIC_MANIFEST"] = "false"
    log = var_dir / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "contextlab.devserver", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while True:
            text = log.read_text(errors="replace")
            match = re.search(r"log in as 'demo' with password '([^']+)'", text)
            if match and "ContextLab on http" in text:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=2)
                    break
                except OSError:
                    pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"server did not start:\n{text[-3000:]}")
            time.sleep(0.3)
        yield match.group(1)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def log_in(context: Any, base: str, password: str) -> None:
    page = context.new_page()
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "demo")
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/sessions/$"))
    page.close()


def upload(context: Any, base: str, path: Path) -> int:
    """Upload through the API; wait for the recorded replay; the session id."""
    csrf = next(c["value"] for c in context.cookies() if c["name"] == "csrftoken")
    api = context.request
    answer = api.post(
        f"{base}/api/sessions",
        multipart={
            "file": {
                "name": path.name,
                "mimeType": "application/octet-stream",
                "buffer": path.read_bytes(),
            }
        },
        headers={"X-CSRFToken": csrf},
        timeout=600_000,
    )
    if answer.status not in (200, 201):
        raise SystemExit(f"upload of {path.name} failed: {answer.status} {answer.text()[:300]}")
    session = answer.json()
    run_id = api.get(f"{base}/api/sessions/{session['id']}").json()["runs"][-1]["id"]
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        run = api.get(f"{base}/api/runs/{run_id}").json()
        if run["status"] == "done":
            return int(session["id"])
        if run["status"] == "failed":
            raise SystemExit(f"replay of {path.name} failed: {run.get('error')}")
        time.sleep(0.5)
    raise SystemExit(f"replay of {path.name} did not finish")


TIMING_JS = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  return {load: nav.loadEventEnd, dom: nav.domContentLoadedEventEnd, ttfb: nav.responseStart, html: nav.encodedBodySize};
}"""


def first_visit(
    browser: Any, url: str, cookies: list[dict[str, Any]], chart: bool
) -> dict[str, float]:
    """One load in a new context (empty cache): load event, first chart, JS bytes over the wire."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies(cookies)
    page = context.new_page()
    js_bytes = 0
    sizes: list[Any] = []

    def on_response(response: Any) -> None:
        if response.request.resource_type == "script":
            sizes.append(response)

    page.on("response", on_response)
    page.goto(url, wait_until="load")
    charts_ms = None
    if chart:
        page.wait_for_selector("#chart-context .main-svg", timeout=60_000)
        charts_ms = page.evaluate("performance.now()")
    timing = page.evaluate(TIMING_JS)
    for response in sizes:
        # encoded (over-the-wire) body size: compressed when the server compressed it
        js_bytes += int(response.request.sizes()["responseBodySize"])
    context.close()
    out = {
        "load_ms": float(timing["load"]),
        "dom_ms": float(timing["dom"]),
        "ttfb_ms": float(timing["ttfb"]),
        "html_bytes": float(timing["html"]),
        "js_bytes": js_bytes,
    }
    if charts_ms is not None:
        out["charts_ms"] = float(charts_ms)
    return out


def median_of(samples: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(s[key] for s in samples), 1) for key in samples[0]}


def codex_against_claude(
    browser: Any, cookies: Any, base: str, pair: tuple[int, int], middle: int, runs: int
) -> dict[str, Any]:
    """The Codex session's report and request explorer against the Claude Code session's of
    the same requests: first visits, the four pages in turn in each run; medians, ratios."""
    # page → (path under the session, whether the page draws the context chart)
    pages = {"report": ("", True), "explorer": (f"requests/{middle}/", False)}
    samples: dict[tuple[str, int], list[dict[str, float]]] = {}
    for turn in range(runs + 1):  # the first turn warms the server side
        for page, (path, chart) in pages.items():
            for pk in pair:
                visit = first_visit(browser, f"{base}/sessions/{pk}/{path}", cookies, chart)
                if turn:
                    samples.setdefault((page, pk), []).append(visit)
    claude, codex = pair
    out: dict[str, Any] = {}
    for page in pages:
        mine, theirs = median_of(samples[(page, codex)]), median_of(samples[(page, claude)])
        ratio = round(mine["load_ms"] / theirs["load_ms"], 2)
        out[page] = {"codex": mine, "claude_code": theirs, "codex_ratio": ratio}
        print(
            f"Codex {page}: {mine['load_ms']:.0f} ms (first byte {mine['ttfb_ms']:.0f} ms) "
            f"against Claude Code's {theirs['load_ms']:.0f} ms (first byte "
            f"{theirs['ttfb_ms']:.0f} ms) for the same {middle * 2} requests → {ratio}×"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--port", type=int, default=8797)
    parser.add_argument(
        "--requests", type=int, default=3800, help="requests of the synthetic session"
    )
    parser.add_argument("--static", choices=("manifest", "source"), default="manifest")
    parser.add_argument("--skip-corpus", action="store_true")
    parser.add_argument("-o", "--output", default=str(ROOT / "bench" / "out" / "pages.json"))
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    var_dir = Path(tempfile.mkdtemp(prefix="contextlab-bench-pages-"))
    sessions: list[Path] = []
    files = (
        sorted(CORPUS.rglob("*.jsonl"), key=lambda p: p.stat().st_size) if CORPUS.is_dir() else []
    )
    if files and not args.skip_corpus:
        sessions.append(files[-1])
    else:
        print("no corpus: the largest-corpus-session case is skipped")
    synthetic = var_dir / f"synthetic-{args.requests}-requests.jsonl"
    write_synthetic(synthetic, args.requests)
    sessions.append(synthetic)
    codex = var_dir / f"rollout-synthetic-{args.requests}-requests.jsonl"
    write_synthetic_codex(codex, args.requests)
    base = f"http://127.0.0.1:{args.port}"
    out: dict[str, Any] = {"static": args.static, "runs": args.runs, "sessions": []}
    try:
        with server(args.port, var_dir, args.static) as password, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            setup = browser.new_context()
            log_in(setup, base, password)
            ids = [(path, upload(setup, base, path)) for path in sessions]
            codex_id = upload(setup, base, codex)
            cookies = setup.cookies()
            setup.close()
            for path, session_id in ids:
                report_url = f"{base}/sessions/{session_id}/"
                logins, reports = [], []
                first_visit(browser, report_url, cookies, chart=True)  # warm the server side
                for _ in range(args.runs):
                    logins.append(first_visit(browser, f"{base}/accounts/login/", [], chart=False))
                    reports.append(first_visit(browser, report_url, cookies, chart=True))
                login, report = median_of(logins), median_of(reports)
                row = {
                    "session": path.name,
                    "login": login,
                    "report": report,
                    "load_ratio": round(report["load_ms"] / login["load_ms"], 2),
                    "charts_ratio": round(report["charts_ms"] / login["load_ms"], 2),
                }
                out["sessions"].append(row)
                verdict = (
                    "ok"
                    if row["load_ratio"] <= MAX_LOAD_RATIO and report["js_bytes"] <= MAX_JS_BYTES
                    else "OVER TARGET"
                )
                print(
                    f"{path.name[:50]}: report load {report['load_ms']:.0f} ms (first byte {report['ttfb_ms']:.0f} ms), first chart "
                    f"{report['charts_ms']:.0f} ms, JS {report['js_bytes'] / 1e6:.2f} MB over the wire; "
                    f"login {login['load_ms']:.0f} ms → ratio {row['load_ratio']} "
                    f"(chart {row['charts_ratio']}) [{verdict}: ≤ {MAX_LOAD_RATIO}×, ≤ 1.5 MB]"
                )
            out["codex"] = codex_against_claude(
                browser, cookies, base, (ids[-1][1], codex_id), args.requests // 2, args.runs
            )
            browser.close()
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
