"""A real S3-compatible server for the storage tests: moto's ``moto_server`` (a PyPI package,
installed with the dev dependencies by ``make venv`` and so by ``.ci/run``), started as its own
process on a free port, with the bucket made through the S3 API."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BUCKET = "contextlab-test"


@dataclass
class S3Server:
    proc: subprocess.Popen[bytes]
    endpoint: str
    log: Path

    def env(self) -> dict[str, str]:
        """What a process of the stack needs to use this server as its storage."""
        return {
            "STORAGE_BACKEND": "s3",
            "S3_ENDPOINT_URL": self.endpoint,
            "S3_BUCKET": BUCKET,
            "S3_REGION": "us-east-1",
            "S3_ACCESS_KEY_ID": "contextlab-test",
            "S3_SECRET_ACCESS_KEY": "contextlab-test",
        }

    def storages(self) -> dict[str, Any]:
        """``STORAGES["default"]`` for this test process (as ``settings.py`` builds it)."""
        env = self.env()
        return {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": env["S3_BUCKET"],
                "endpoint_url": env["S3_ENDPOINT_URL"],
                "region_name": env["S3_REGION"],
                "access_key": env["S3_ACCESS_KEY_ID"],
                "secret_key": env["S3_SECRET_ACCESS_KEY"],
                "file_overwrite": True,
                "default_acl": None,
            },
        }

    def client(self) -> Any:
        import boto3

        env = self.env()
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=env["S3_REGION"],
            aws_access_key_id=env["S3_ACCESS_KEY_ID"],
            aws_secret_access_key=env["S3_SECRET_ACCESS_KEY"],
        )

    def keys(self, prefix: str = "") -> list[str]:
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        )
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def moto_server_command() -> str:
    found = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which(
        "moto_server"
    )
    if found is None:
        raise RuntimeError(
            "moto_server not found: install the dev dependencies (make venv; pip install "
            "'moto[server]')"
        )
    return found


def start_s3(tmp: Path, host: str = "127.0.0.1", argv_prefix: list[str] | None = None) -> S3Server:
    port = _free_port(host) if not argv_prefix else 9000
    log = tmp / "moto.log"
    proc = subprocess.Popen(
        [*(argv_prefix or []), moto_server_command(), "-H", host, "-p", str(port)],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"},
    )
    server = S3Server(proc, f"http://{host}:{port}", log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited: {log.read_text()[-2000:]}")
        try:
            server.client().create_bucket(Bucket=BUCKET)
            return server
        except Exception:
            time.sleep(0.3)
    server.stop()
    raise RuntimeError(f"moto_server did not answer at {server.endpoint}")
