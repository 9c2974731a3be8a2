from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.storage.s3 import S3Server, start_s3


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = start_s3(tmp_path_factory.mktemp("s3"))
    yield server
    server.stop()


@pytest.fixture
def s3_storage(s3_server: S3Server, settings, tmp_path) -> S3Server:
    """This test process stores through the S3 server, with a scratch folder of its own."""
    settings.STORAGES = {**settings.STORAGES, "default": s3_server.storages()}
    settings.WORKER_DIR = tmp_path / "web-host"
    return s3_server
