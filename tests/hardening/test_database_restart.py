"""PostgreSQL dropping every connection under load (what a restart does to the web processes):
the requests caught in flight answer a clean 503 (the error page or JSON, a Retry-After, no
traceback), and the next requests reconnect and succeed, with persistent connections too."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from tests.conftest import worker_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PAGES = ["/sessions/", "/api/sessions"]


#: the web server's connections are named so: only they are terminated (this process's own
#: connections, in other threads and contexts, are left alone)
APPLICATION = "contextlab-db-restart-test"


def _terminate_server_connections() -> int:
    """End every backend of the web server on this test database, as a server restart does."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %s",
            [APPLICATION],
        )
        row = cursor.fetchone()
        return int(row[0]) if row else 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode(errors="replace")


@pytest.mark.parametrize("max_age", [0, 60])
def test_requests_fail_cleanly_while_the_database_drops_connections_and_recover(
    max_age: int, tmp_path: Path, user: Any, api_token: str, make_transcript: Any, short_jsonl: Any
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("terminates PostgreSQL backends")
    make_transcript(short_jsonl)
    browser = Client()
    browser.force_login(user)  # a session row the server reads
    port = _free_port()
    url = f"{worker_env()['DATABASE_URL']}?application_name={APPLICATION}"
    env = worker_env(
        DATABASE_URL=url,
        CONN_MAX_AGE=str(max_age),
        ALLOWED_HOSTS="127.0.0.1",
        STATIC_MANIFEST="0",
        CACHE_URL="locmem://",
    )
    log = (tmp_path / "gunicorn.log").open("wb")
    # the production server: gunicorn, two processes of two threads
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "contextlab.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "--threads",
            "2",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    headers = {
        "Authorization": f"Bearer {api_token}",
        "Cookie": f"sessionid={browser.cookies['sessionid'].value}",
    }
    seen: Counter[int] = Counter()
    bad: list[str] = []
    after: list[int] = []
    stop = threading.Event()
    recovered = threading.Event()

    def load() -> None:
        while not stop.is_set():
            for page in PAGES:
                status, response_headers, body = _get(base + page, headers)
                seen[status] += 1
                if recovered.is_set():
                    after.append(status)
                if status == 503:
                    if response_headers.get("Retry-After") != "30" or "Traceback" in body:
                        bad.append(f"{page}: {response_headers} {body[:300]}")
                    said = (
                        "detail" in json.loads(body)
                        if page.startswith("/api/")
                        else "database is unavailable" in body
                    )
                    if not said:
                        bad.append(f"{page}: {body[:300]}")
                elif status != 200:
                    bad.append(f"{page}: {status} {body[:300]}")

    threads = [threading.Thread(target=load) for _ in range(4)]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if _get(base + "/healthz", {})[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        for thread in threads:
            thread.start()
        time.sleep(1)
        terminated = 0
        deadline = time.monotonic() + 30
        # keep dropping connections until some requests were caught mid-way
        while time.monotonic() < deadline and seen[503] < 3:
            terminated += _terminate_server_connections()
            time.sleep(0.02)
        time.sleep(0.5)  # requests caught by the last termination end
        recovered.set()
        time.sleep(2)  # the database is back: everything must succeed again
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        server.terminate()
        server.wait(timeout=30)
        log.close()
    output = (tmp_path / "gunicorn.log").read_text(errors="replace")
    assert not bad, bad[:3]
    assert seen[503] >= 3, (seen, terminated, output[-2000:])
    assert set(seen) <= {200, 503}, seen
    # every request after the last termination succeeded (the connections came back)
    assert len(after) >= len(threads), output[-3000:]
    assert set(after) == {200}, (Counter(after), output[-3000:])
    print(f"max_age={max_age}: {dict(seen)} ({terminated} backends terminated)")
