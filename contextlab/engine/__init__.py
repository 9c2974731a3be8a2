"""ContextLab engine: replay Claude Code's context pipeline on a recorded transcript.

Framework-free (standard library + tiktoken). Django, Celery and the CLI import only names from
this module, never the sub-modules, so the engine can be refactored freely behind it.

Typical use::

    from contextlab import engine

    session = engine.load_session("session.jsonl")        # raises engine.TranscriptError
    config = engine.resolve_config("auto", session=session)
    result = engine.replay(session, config, mode="recorded")
    data = result.to_json()                                 # {"session", "requests", "summary", ...}
"""

from __future__ import annotations

from .parsing import Session, Thread, build_session, load_session
from .transcript import Block, Message, Problem, TranscriptError, Usage

__all__ = [
    "Block",
    "Message",
    "Problem",
    "Session",
    "Thread",
    "TranscriptError",
    "Usage",
    "build_session",
    "load_session",
]
