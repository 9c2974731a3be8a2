"""Summaries tests use the engine's LLM stub fixture."""

from tests.engine.conftest import llm_stub

__all__ = ["llm_stub"]
