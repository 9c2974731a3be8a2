"""Source adapters: one per agent, each turning that agent's transcripts into the engine's ``Session``.

Every adapter is a folder here (``claude_code/``) holding all that is specific to its agent's
format, behind the one interface below; ``registry`` lists them and picks the one that
recognises an upload's content (never its file name). Adapters do not import one another
(an import-linter contract checks it). docs/engine-adapters.md says how to add one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from contextlab.engine.input.loading import Upload
from contextlab.engine.input.session import Session


class SourceAdapter(Protocol):
    """One agent's transcript format."""

    #: the adapter's id (its folder's name)
    name: str
    #: the agent's name as people know it
    label: str

    def detect(self, head: Sequence[Any]) -> float:
        """How sure the adapter is, from 0 (not its format) to 1, that these first records of
        an upload (JSON values of its first lines, in order; undecodable lines left out) are
        its agent's. Cheap and side-effect free: it reads only ``head``."""
        ...

    def parse(self, upload: Upload) -> Session:
        """The upload as a ``Session``; ``model.TranscriptError`` when nothing in it is usable
        (problems it can read past go on ``Session.problems``, never raised)."""
        ...
