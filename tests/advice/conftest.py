"""Advice tests finish queued runs as the tuning tests do (the worker's batch task, no broker)."""

from tests.tuning.conftest import finish

__all__ = ["finish"]
