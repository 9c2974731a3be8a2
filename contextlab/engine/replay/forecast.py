"""Forecast: a session whose recorded figures are read only for the first share of each thread.

``forecast_session(session, F)`` keeps the recorded usage and the ``compactMetadata`` (and
micro-compaction, snip) figures of the first ``ceil(F × n)`` requests of every thread of ``n``
requests, and drops them from every later one, so a replay of it estimates everything after
in the same fields (``raw_tokens``, ``model_tokens``, ``decision_tokens``, the cache estimate,
``cost_usd``): what a what-if does once it can no longer lean on the recording. Nothing a later
record recorded reaches the replay: a later response's output is estimated from its content
with the ratio the thread's read responses show (``estimated_output``), its thinking sized from
that estimate, and Claude Code's own session cost (``cost-state``) is left out.

The copy shares the original's text blocks (their token counts depend on the text only) and
copies every message and thinking block, so nothing a replay of one sizes reaches the other.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

from contextlab.engine.input.model import Block, Message
from contextlab.engine.input.session import Session, Thread
from contextlab.engine.measures.tokens import TokenCounter, block_tokens

#: metadata a replay derives from the recorded output (``tokens.size_thinking``): recomputed
DERIVED = ("thinking_sized", "thinking_unsized", "thinking_scaled_by")
#: records whose metadata carries Claude Code's own counts (``preTokens``, ``tokensSaved``)
BOUNDARIES = ("compact_boundary", "microcompact_boundary", "snip_boundary")
#: metadata key of a response whose usage was left out: its estimated output tokens
ESTIMATED_OUTPUT = "estimated_output"
#: metadata key marking a response whose usage was left out
FORECAST = "forecast"


def check_usage_until(value: object) -> float:
    """``value`` as a share of requests, 0 < F ≤ 1; ``ValueError`` saying why otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"usage_until must be a number in (0, 1], not {value!r}")
    try:
        share = float(value)
    except ValueError:
        raise ValueError(
            f"usage_until must be a number in (0, 1], not {str(value)[:40]!r}"
        ) from None
    if not math.isfinite(share) or not 0 < share <= 1:
        raise ValueError(
            f"usage_until must be in (0, 1] (a share of each thread's requests), not {share:g}"
        )
    return share


def forecast_session(session: Session, usage_until: float, counter: TokenCounter) -> Session:
    """A copy of ``session`` whose recorded figures are read only for the first
    ``usage_until`` of each thread's requests (rounded up); ``session`` itself at 1."""
    share = check_usage_until(usage_until)
    if session.usage_until < 1 and share not in (1, session.usage_until):
        raise ValueError(
            f"this session is already a forecast copy (usage_until {session.usage_until:g})"
        )
    if share >= 1 or session.usage_until < 1:
        return session
    copies: dict[int, Message] = {}
    hidden: set[int] = set()
    threads: list[Thread] = []
    for thread in session.threads:
        # a message shared by several threads (a branch's main-chain head) is decided by the
        # first thread holding it: the main conversation
        positions = [i for i, m in enumerate(thread.messages) if m.role == "assistant"]
        keep = math.ceil(share * len(positions))
        cutoff = positions[keep - 1] if keep else -1
        for i, msg in enumerate(thread.messages):
            if id(msg) not in copies:
                copies[id(msg)] = _copy(msg)
                if i > cutoff:
                    hidden.add(id(msg))
        threads.append(
            dataclasses.replace(thread, messages=[copies[id(m)] for m in thread.messages])
        )
    pooled = _OutputRatios()
    per_thread: list[_OutputRatios] = []
    for thread in session.threads:
        ratios = _OutputRatios()
        for msg in thread.messages:
            if id(msg) not in hidden and msg.role == "assistant" and msg.usage is not None:
                ratios.add(msg, counter)
                pooled.add(msg, counter)
        per_thread.append(ratios)
    for thread, ratios in zip(session.threads, per_thread, strict=True):
        for msg in thread.messages:
            if id(msg) in hidden:
                _hide(copies[id(msg)], ratios, pooled, counter)
                hidden.discard(id(msg))
    side = dataclasses.replace(session.side, claude_code_cost_usd=None)
    return dataclasses.replace(session, threads=threads, side=side, memo={}, usage_until=share)


def _copy(msg: Message) -> Message:
    metadata = {k: v for k, v in msg.metadata.items() if k not in DERIVED}
    blocks = [b.copy(tok=-1) if b.type == "thinking" else b for b in msg.blocks]
    return dataclasses.replace(msg, metadata=metadata, blocks=blocks)


class _OutputRatios:
    """Recorded output against the tiktoken count of the visible blocks, responses with
    thinking and without apart (thinking's size is what the output holds beyond them)."""

    def __init__(self) -> None:
        self.output = {True: 0, False: 0}
        self.visible = {True: 0, False: 0}

    def add(self, msg: Message, counter: TokenCounter) -> None:
        assert msg.usage is not None
        visible = _visible(msg.blocks, counter)
        if visible <= 0 or msg.usage.response_output <= 0:
            return
        thinks = any(b.type == "thinking" for b in msg.blocks)
        self.output[thinks] += msg.usage.response_output
        self.visible[thinks] += visible

    def ratio(self, thinks: bool) -> float | None:
        return self.output[thinks] / self.visible[thinks] if self.visible[thinks] else None


def _visible(blocks: Iterable[Block], counter: TokenCounter) -> int:
    return sum(block_tokens(b, counter) for b in blocks if b.type != "thinking")


def _hide(
    msg: Message, ratios: _OutputRatios, pooled: _OutputRatios, counter: TokenCounter
) -> None:
    """Leave out what ``msg`` recorded; a response gets an estimated output instead."""
    if msg.kind in BOUNDARIES:
        msg.metadata = {
            k: v
            for k, v in msg.metadata.items()
            if isinstance(v, bool) or not isinstance(v, int | float)
        }
    if msg.role != "assistant":
        return
    msg.usage = None
    msg.metadata[FORECAST] = True
    thinking = [b for b in msg.blocks if b.type == "thinking"]
    visible = _visible(msg.blocks, counter)
    texts = [counter.count(b.text) for b in thinking]
    ratio = ratios.ratio(bool(thinking)) or pooled.ratio(bool(thinking)) or 1.0
    # the ratio as the read responses recorded it (their output is often a streaming
    # snapshot, below what the response holds): what the recording would have said
    output = round(ratio * visible)
    msg.metadata[ESTIMATED_OUTPUT] = output
    if thinking and output > visible + sum(texts):
        # sized as ``tokens.size_thinking`` sizes it from a recorded output
        hidden = output - visible
        weights = texts if sum(texts) else [1] * len(thinking)
        for block, weight in zip(thinking, weights, strict=True):
            block.tok = max(round(hidden * weight / sum(weights)), 0)
        msg.metadata["thinking_sized"] = True
