"""Summaries tests use the engine's LLM stub fixture, and start with no open breaker."""

from collections.abc import Iterator

import pytest

from contextlab.engine.summarizing.fallback import reset_breakers
from tests.engine.conftest import llm_stub

__all__ = ["llm_stub"]


@pytest.fixture(autouse=True)
def _fresh_breakers() -> Iterator[None]:
    """A worker's breakers live for the process: no test may inherit another's open one."""
    reset_breakers()
    yield
    reset_breakers()
