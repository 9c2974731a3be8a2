from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.multihost.hosts import NetnsUnavailable, Network


@pytest.fixture
def network(tmp_path: Path) -> Iterator[Network]:
    """A bridge to put hosts on; torn down (every process killed, namespaces removed) however
    the test ends. No network namespaces here fails the test, loudly: CI runs as root on a
    machine like this one, so a skip would hide a broken setup."""
    try:
        net = Network(tmp_path / "hosts")
    except NetnsUnavailable as exc:
        message = f"separate hosts need network namespaces: {exc}"
        if os.environ.get("CONTEXTLAB_SKIP_INTEGRATION") == "1" and os.environ.get("CI") != "true":
            pytest.skip(message)
        pytest.fail(message, pytrace=False)
    try:
        yield net
    finally:
        net.close()
