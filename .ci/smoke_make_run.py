#!/usr/bin/env python3
"""Run `make run` as a newcomer would, drive it over HTTP, then stop it with Ctrl-C.

Checks: the printed demo login works, a corpus file uploads, its replay finishes on the
embedded broker's worker, the report renders, and SIGINT stops every process it started.
Standard library only.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PORT = int(os.environ.get("SMOKE_PORT", "8765"))
BASE = f"http://127.0.0.1:{PORT}"
# The corpus as the tests find it; a clone without it uploads a committed fixture instead.
CORPUS = Path(os.environ.get("CONTEXTLAB_CORPUS") or ROOT.parent / "shared" / "corpus")
UPLOAD = (
    CORPUS / "marot__spotter__subagent.jsonl"
    if (CORPUS / "marot__spotter__subagent.jsonl").exists()
    # a committed real session that is not one of the demo sessions, so the upload is new
    else ROOT / "tests" / "fixtures" / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl"
)


def fail(message: str, log: Path | None = None) -> None:
    print(f"SMOKE FAILED: {message}", flush=True)
    if log is not None and log.exists():
        print("---- make run output (tail) ----")
        print(log.read_text(errors="replace")[-6000:])
    sys.exit(1)


class Browser:
    def __init__(self) -> None:
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def csrf(self) -> str:
        return next((c.value for c in self.jar if c.name == "csrftoken"), "")

    def request(
        self,
        method: str,
        path: str,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        req = urllib.request.Request(BASE + path, data=data, method=method, headers=headers or {})
        try:
            with self.opener.open(req, timeout=30) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()


def multipart(field: str, path: Path) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{path.name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + path.read_bytes()
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


def main() -> None:
    var_dir = Path(tempfile.mkdtemp(prefix="contextlab-smoke-"))
    log = var_dir / "make-run.log"
    env = dict(os.environ, PORT=str(PORT), VAR_DIR=str(var_dir))
    for key in ("DATABASE_URL", "CELERY_BROKER_URL"):
        env.pop(key, None)  # the newcomer path: SQLite and the embedded broker
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["make", "run"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 600  # first run may build the virtualenv
        password = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                fail(f"make run exited with {proc.returncode}", log)
            text = log.read_text(errors="replace")
            match = re.search(r"log in as 'demo' with password '([^']+)'", text)
            if match and "ContextLab on http" in text:
                password = match.group(1)
                try:
                    urllib.request.urlopen(BASE + "/accounts/login/", timeout=2)
                    break
                except OSError:
                    pass
            time.sleep(0.5)
        else:
            fail("the server did not come up", log)
        print(f"up; demo password printed: {password}")

        browser = Browser()
        status, _ = browser.request("GET", "/accounts/login/")
        form = urllib.parse.urlencode(
            {"username": "demo", "password": password, "csrfmiddlewaretoken": browser.csrf()}
        ).encode()
        status, body = browser.request(
            "POST",
            "/accounts/login/",
            form,
            {
                "Content-Type": "application/x-www-form-urlencoded",
                "Referer": BASE + "/accounts/login/",
            },
        )
        if status != 200 or b"Your sessions" not in body:
            fail(f"login with the printed password failed ({status})", log)
        status, body = browser.request("GET", "/api/sessions")
        demo = json.loads(body)
        if status != 200 or len(demo) < 2:
            fail(f"expected the two demo sessions, got {status} {body[:300]!r}", log)
        print(f"logged in; {len(demo)} demo sessions")

        data, content_type = multipart("file", UPLOAD)
        status, body = browser.request(
            "POST",
            "/api/sessions",
            data,
            {
                "Content-Type": content_type,
                "X-CSRFToken": browser.csrf(),
                "Referer": BASE + "/sessions/",
            },
        )
        if status not in (200, 201):
            fail(f"upload of {UPLOAD.name} answered {status}: {body[:500]!r}", log)
        session = json.loads(body)
        print(f"uploaded {UPLOAD.name}: session {session['id']}, {session['requests']} requests")
        status, body = browser.request("GET", f"/api/sessions/{session['id']}")
        run_id = json.loads(body)["runs"][-1]["id"]
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            run = json.loads(browser.request("GET", f"/api/runs/{run_id}")[1])
            if run["status"] in ("done", "failed"):
                break
            time.sleep(0.5)
        if run["status"] != "done":
            fail(f"run {run_id} ended {run['status']}: {run.get('error')}", log)
        print(f"run {run_id} done: {run['summary'].get('requests')} requests")
        status, body = browser.request("GET", f"/sessions/{session['id']}/")
        if status != 200 or b'id="chart-context"' not in body or b"Fidelity" not in body:
            fail(f"report page answered {status} without charts", log)
        status, body = browser.request("GET", f"/sessions/{session['id']}/requests/0/")
        if status != 200 or b'id="explorer"' not in body:
            fail(f"request explorer answered {status}", log)
        print("report and request explorer render")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal sends
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                fail("make run did not stop within 60 s of Ctrl-C", log)
    time.sleep(1)
    leftovers = subprocess.run(
        ["pgrep", "-g", str(proc.pid)], capture_output=True, text=True
    ).stdout.split()
    if leftovers:
        fail(f"processes left running after Ctrl-C: {leftovers}", log)
    try:
        urllib.request.urlopen(BASE + "/accounts/login/", timeout=2)
        fail("the web server still answers after Ctrl-C", log)
    except OSError:
        pass
    print("SMOKE OK: make run started, served, replayed and stopped cleanly")


if __name__ == "__main__":
    main()
