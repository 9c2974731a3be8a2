"""The settings module: env parsing and the production guard."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from contextlab import settings as project_settings

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def _import_settings(**env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    full.update(env)
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import contextlab.settings as s; print(s.DEBUG, s.CELERY_BROKER_URL)",
        ],
        env=full,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_dev_secret_key_is_refused_when_debug_is_off(tmp_path):
    proc = _import_settings(DEBUG="false", VAR_DIR=str(tmp_path))
    assert proc.returncode != 0
    assert "SECRET_KEY must be set" in proc.stderr


def test_production_settings_start_with_a_real_secret(tmp_path):
    proc = _import_settings(
        DEBUG="false",
        SECRET_KEY="x" * 50,
        VAR_DIR=str(tmp_path),
        CELERY_BROKER_URL="redis://r:6379/0",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "redis://r:6379/0"]


def test_default_broker_is_embedded_filesystem(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CELERY_BROKER_URL"}
    env["VAR_DIR"] = str(tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import contextlab.settings as s; print(s.CELERY_BROKER_URL, s.CELERY_BROKER_TRANSPORT_OPTIONS['data_folder_in'])",
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    url, folder = proc.stdout.split()
    assert url == "filesystem://"
    assert folder.startswith(str(tmp_path))


@pytest.mark.parametrize("value", ["maybe", "2"])
def test_env_bool_rejects_garbage(monkeypatch, value):
    monkeypatch.setenv("SOME_FLAG", value)
    with pytest.raises(ImproperlyConfigured, match="SOME_FLAG"):
        project_settings.env_bool("SOME_FLAG", False)


def test_env_int_rejects_garbage_and_negatives(monkeypatch):
    monkeypatch.setenv("SOME_INT", "12MB")
    with pytest.raises(ImproperlyConfigured, match="integer"):
        project_settings.env_int("SOME_INT", 1)
    monkeypatch.setenv("SOME_INT", "-1")
    with pytest.raises(ImproperlyConfigured, match=">= 0"):
        project_settings.env_int("SOME_INT", 1)


def test_upload_limit_defaults_to_512_mb(monkeypatch):
    assert project_settings.env_int("NOT_SET_ANYWHERE", 512 * 1024 * 1024) == 536870912
