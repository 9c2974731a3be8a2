"""Deployment posture: check --deploy, DEBUG default, the local key file, security headers,
/healthz and the worker heartbeat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.test import Client

from contextlab import health
from contextlab.local_secret import ensure_secret_key_file, read_secret_key_file, secret_key_file

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
#: what the environment of a test run sets that a production process would not
_TEST_ONLY = (
    "DEBUG",
    "SECRET_KEY",
    "SECRET_KEY_FILE",
    "DJANGO_SETTINGS_MODULE",
    "HTTPS",
    "DJANGO_ALLOW_ASYNC_UNSAFE",
)


def _run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in _TEST_ONLY}
    full.update(env)
    return subprocess.run(
        argv, env=full, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


def _production_env(tmp_path: Path) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "contextlab.settings",
        "DEBUG": "false",
        "SECRET_KEY": "k" * 20 + "-production-like-secret-" + "q" * 20,
        "HTTPS": "true",
        "SECURE_PROXY_SSL": "true",
        "ALLOWED_HOSTS": "contextlab.example.com",
        "CSRF_TRUSTED_ORIGINS": "https://contextlab.example.com",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "CELERY_BROKER_URL": "redis://redis:6379/0",
        "VAR_DIR": str(tmp_path),
        "PYTHONPATH": str(ROOT),
    }


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    proc = _run([sys.executable, "manage.py", "check", "--deploy"], **_production_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    output = proc.stdout + proc.stderr
    assert "WARNINGS" not in output
    assert "System check identified no issues" in output


def test_check_deploy_names_what_is_missing_without_https(tmp_path):
    env = _production_env(tmp_path)
    env["HTTPS"] = "false"
    proc = _run([sys.executable, "manage.py", "check", "--deploy"], **env)
    output = proc.stdout + proc.stderr
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in output


def test_debug_is_off_unless_asked_for(tmp_path):
    code = "import contextlab.settings as s; print(s.DEBUG, s.SESSION_COOKIE_SECURE)"
    off = _run([sys.executable, "-c", code], SECRET_KEY="s" * 50, VAR_DIR=str(tmp_path))
    assert off.returncode == 0, off.stderr
    assert off.stdout.split() == ["False", "False"]
    on = _run([sys.executable, "-c", code], DEBUG="true", VAR_DIR=str(tmp_path))
    assert on.returncode == 0, on.stderr
    assert on.stdout.split() == ["True", "False"]


def test_https_turns_on_secure_cookies_redirect_and_hsts(tmp_path):
    code = (
        "import contextlab.settings as s; print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE,"
        " s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS)"
    )
    proc = _run([sys.executable, "-c", code], **_production_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True", "True", "31536000", "True"]


def test_the_key_file_of_a_local_checkout_is_private_and_stable(tmp_path):
    path = secret_key_file({"VAR_DIR": str(tmp_path)}, ROOT)
    assert path == tmp_path / "secret_key"
    assert read_secret_key_file(path) is None
    ensure_secret_key_file(path)
    key = read_secret_key_file(path)
    assert key is not None
    assert len(key) >= 50
    assert path.stat().st_mode & 0o777 == 0o600
    ensure_secret_key_file(path)
    assert read_secret_key_file(path) == key  # created once, then kept


def test_settings_read_the_key_file_when_no_secret_key_is_set(tmp_path):
    ensure_secret_key_file(tmp_path / "secret_key")
    code = "import contextlab.settings as s; print(s.SECRET_KEY)"
    proc = _run([sys.executable, "-c", code], VAR_DIR=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == read_secret_key_file(tmp_path / "secret_key")


# --- headers -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_every_page_carries_the_security_headers(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    assert "camera=()" in response["Permissions-Policy"]
    assert "Strict-Transport-Security" not in response  # no TLS declared


@pytest.mark.django_db
def test_with_https_declared_http_redirects_and_https_gets_hsts(settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    client = Client()
    plain = client.get("/accounts/login/")
    assert plain.status_code == 301
    assert plain["Location"].startswith("https://")
    secure = client.get("/accounts/login/", secure=True)
    assert secure.status_code == 200
    assert secure["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
    # the container probe speaks plain HTTP and is never redirected
    assert client.get("/healthz").status_code == 200


# --- /healthz --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_healthz_checks_the_database_without_login_or_host_check(client):
    response = client.get("/healthz", HTTP_HOST="container-probe.internal")
    assert response.status_code == 200
    assert json.loads(response.content) == {"status": "ok", "database": "ok"}
    assert response["Cache-Control"] == "no-store"
    assert client.head("/healthz").status_code == 200


@pytest.mark.django_db
def test_healthz_answers_503_when_the_database_is_down(client, monkeypatch):
    def broken_cursor() -> None:
        raise RuntimeError("connection refused")

    monkeypatch.setattr(health.connection, "cursor", broken_cursor)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert json.loads(response.content) == {"status": "error", "database": "unreachable"}
    assert b"connection refused" not in response.content


# --- worker heartbeat ----------------------------------------------------------------------


def test_check_worker_wants_a_fresh_heartbeat(tmp_path):
    path = tmp_path / "beat"
    ok, message = health.check_worker(path, 60)
    assert not ok
    assert "no worker heartbeat" in message
    health.touch_heartbeat(path)
    assert health.check_worker(path, 60)[0]
    old = time.time() - 120
    os.utime(path, (old, old))
    ok, message = health.check_worker(path, 60)
    assert not ok
    assert "old" in message


def test_the_worker_health_command_exits_non_zero_without_a_heartbeat(tmp_path):
    path = tmp_path / "beat"
    argv = [sys.executable, "-m", "contextlab.health", "worker"]
    env = {"WORKER_HEARTBEAT_FILE": str(path), "SECRET_KEY": "s" * 50, "VAR_DIR": str(tmp_path)}
    missing = _run(argv, **env)
    assert missing.returncode == 1
    assert "no worker heartbeat" in missing.stderr
    health.touch_heartbeat(path)
    fresh = _run(argv, **env)
    assert fresh.returncode == 0, fresh.stderr


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_running_worker_touches_its_heartbeat_and_removes_it_on_exit(tmp_path):
    from tests.conftest import require_services, start_worker

    require_services()
    path = tmp_path / "worker-heartbeat"
    worker = start_worker(tmp_path, "heartbeat", WORKER_HEARTBEAT_FILE=str(path))
    try:
        deadline = time.monotonic() + 30
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert path.exists(), worker.output()
        assert health.check_worker(path, 60)[0]
    finally:
        worker.stop()
    assert not path.exists()
