"""Summaries looked up in a store first: re-running a session never pays twice.

``StoredSummarizer`` answers from a key–value store (the web app keeps it in its database) by
(backend, model, prompt version, hash of the input). On a miss it raises ``SummaryPending``
with everything needed to ask the backend later, so a worker can hand the call to its own
task and replay again once the summary is stored, instead of waiting on the network.

``summary_key`` is the identity of every stored summary: changing what it hashes (or
``PROMPT_VERSION``) orphans the whole store.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from contextlab.engine.input.model import Message

from .interface import ReplayInterrupted, SummaryRequest, SummaryResult
from .prompts import PROMPT_VERSION


def render_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The summarized messages as plain JSON (role, kind, blocks): the input of a summary."""
    return [
        {
            "role": m.role,
            "kind": m.kind,
            "blocks": [
                {"type": b.type, "text": b.text, "tool_name": b.tool_name} for b in m.blocks
            ],
        }
        for m in messages
    ]


def summary_key(request: SummaryRequest, backend: str, model: str | None) -> str:
    """Cache key: backend, model, prompt version, kind and a hash of the exact input."""
    payload = json.dumps(
        {
            "messages": render_messages(request.messages),
            "kind": request.kind,
            "instructions": request.custom_instructions,
            "prompt": request.prompt,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )
    digest = hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{backend}|{model or ''}|{PROMPT_VERSION}|{request.kind}|{digest}"


class SummaryPending(ReplayInterrupted):
    """A summary is not in the store yet; ``key`` and ``request`` say which one to fetch.

    ``retry_after`` (seconds) says the summary is being written elsewhere: look again later
    instead of fetching it too.
    """

    def __init__(self, key: str, request: SummaryRequest, *, retry_after: float = 0.0) -> None:
        super().__init__(f"summary {key[:60]}… is not available yet")
        self.key = key
        self.request = request
        self.retry_after = retry_after
        #: the replay's state where it stopped, when it was asked to checkpoint (``resume``)
        self.checkpoint: bytes | None = None


@dataclass
class StoredSummarizer:
    """Serves summaries from ``lookup(key)``; on a miss asks ``fetch(key, request)`` when given
    (the worker fetching that one summary), and raises ``SummaryPending`` if still missing."""

    backend: str
    model: str | None
    lookup: Callable[[str], SummaryResult | None]
    name: str = "stored"
    fetch: Callable[[str, SummaryRequest], SummaryResult | None] | None = None

    def __post_init__(self) -> None:
        self.name = self.backend

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        key = summary_key(request, self.backend, self.model)
        found = self.lookup(key)
        if found is None and self.fetch is not None:
            found = self.fetch(key, request)
        if found is None:
            raise SummaryPending(key, request)
        return found
