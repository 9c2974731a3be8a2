"""Summaries looked up in a store first: re-running a session never pays twice.

``StoredSummarizer`` answers from a key–value store (the web app keeps it in its database) by
(backend, model, prompt version, hash of the input). On a miss it raises ``SummaryPending``
with everything needed to ask the backend later, so a worker can hand the call to its own
task and replay again once the summary is stored, instead of waiting on the network.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

from .summarizer import PROMPT_VERSION, SummaryRequest, SummaryResult
from .transcript import Block, Message, MessageKind


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


def request_to_json(request: SummaryRequest) -> dict[str, Any]:
    """A summary request as JSON, so a worker's task can make the call later.

    It keeps every field the backends render (tool ids, inputs, error flags, nested media), so
    a request read back from JSON produces the very prompt the original would have.
    """
    return {
        "messages": [
            {
                "role": m.role,
                "kind": m.kind,
                "blocks": [_block_to_json(b) for b in m.blocks],
            }
            for m in request.messages
        ],
        "kind": request.kind,
        "model": request.model,
        "custom_instructions": request.custom_instructions,
        "prompt": request.prompt,
    }


def request_from_json(data: dict[str, Any]) -> SummaryRequest:
    """Inverse of ``request_to_json``: enough of each message for a summarizer to render it."""
    messages = []
    for n, item in enumerate(data.get("messages") or []):
        blocks = [
            Block(
                type=b.get("type", "text") if b.get("type") in _BLOCK_TYPES else "other",
                text=str(b.get("text") or ""),
                tool_name=_str_or_none(b.get("tool_name")),
                tool_use_id=_str_or_none(b.get("tool_use_id")),
                is_error=b.get("is_error") is True,
                data=b.get("data"),
                media=b["media"] if isinstance(b.get("media"), int) else 0,
            )
            for b in item.get("blocks") or []
        ]
        role: Literal["user", "assistant"] = (
            "assistant" if item.get("role") == "assistant" else "user"
        )
        kind = cast(
            MessageKind, item.get("kind") or ("assistant" if role == "assistant" else "prompt")
        )
        messages.append(Message(uuid=f"summary-input-{n}", role=role, kind=kind, blocks=blocks))
    return SummaryRequest(
        messages=messages,
        kind=str(data.get("kind") or "compact"),
        model=data.get("model"),
        custom_instructions=str(data.get("custom_instructions") or ""),
        prompt=str(data.get("prompt") or ""),
    )


def _block_to_json(block: Block) -> dict[str, Any]:
    out: dict[str, Any] = {"type": block.type, "text": block.text, "tool_name": block.tool_name}
    if block.tool_use_id is not None:
        out["tool_use_id"] = block.tool_use_id
    if block.is_error:
        out["is_error"] = True
    if block.type == "tool_use" and block.data is not None:
        out["data"] = block.data
    if block.media:
        out["media"] = block.media
    return out


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


_BLOCK_TYPES = frozenset(
    {"text", "thinking", "redacted_thinking", "tool_use", "tool_result", "image", "document"}
)


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


class ReplayInterrupted(Exception):
    """Raised by a summarizer to pause or stop the whole replay: never a failed summary, so no
    step degrades it to a fallback or counts it toward a circuit breaker."""


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


class ReplayStopped(ReplayInterrupted):
    """A summarizer stops the whole replay (a spend cap, say)."""


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
