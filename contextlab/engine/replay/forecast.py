"""Forecast: a session whose recorded figures are read only for the first share of each thread.

``forecast_session(session, F)`` keeps the recorded usage and the ``compactMetadata`` (and
micro-compaction, snip) figures of the first ``ceil(F × n)`` requests of every thread of ``n``
requests, and drops them from every later one, so a replay of it estimates everything after
in the same fields (``raw_tokens``, ``model_tokens``, ``decision_tokens``, the cache estimate,
``cost_usd``): what a what-if does once it can no longer lean on the recording. Nothing a later
record recorded reaches the replay: a later response's output is estimated from its content
with the output model the session's read responses fit (``estimated_output``), its thinking
sized for the view as recorded mode would size it (``_hide``), and Claude Code's own session
cost (``cost-state``) is left out.

The copy shares the original's text blocks (their token counts depend on the text only) and
copies every message and thinking block, so nothing a replay of one sizes reaches the other.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable

from contextlab.engine.input.model import DERIVED_METADATA, SIGNATURE_CHARS, Block, Message
from contextlab.engine.input.session import Session, Thread
from contextlab.engine.measures.anchors import THINKING_GROWTH_SAMPLES
from contextlab.engine.measures.tokens import (
    TokenCounter,
    block_tokens,
    note_thinking_write,
)

#: records whose metadata carries Claude Code's own counts (``preTokens``, ``tokensSaved``)
BOUNDARIES = ("compact_boundary", "microcompact_boundary", "snip_boundary")
#: metadata key of a response whose usage was left out: its estimated output tokens
ESTIMATED_OUTPUT = "estimated_output"
#: metadata key marking a response whose usage was left out
FORECAST = "forecast"
#: output tokens a recorded response holds beyond ratio × its visible tokens (``_OutputModel``),
#: chosen on the corpus forecast's price-free cost of the later requests (mean |error| per
#: session over the corpus: 0 → 9.3 %, 50 → 7.4 %, 75 → 6.8 %, 100 → 7.0 %, 150 → 7.2 %);
#: ``bench/truth.py`` ``FITTED_FORECAST`` chooses it leave-one-source-out
RESPONSE_OVERHEAD_TOKENS = 75
#: thinking output tokens per signature character, at most: the signature encrypts the
#: thinking, so it cannot stand for much more; the recordings with final output counts show
#: 0.26–0.34 (a fit on a few read snapshots can say anything). Chosen as the overhead is, by
#: the mean |cost error| (0.3 → 6.80 %, 0.35 → 6.81 %, 0.5 → 7.07 %, 1.0 → 7.69 %)
SIGNATURE_RATE_MAX = 0.3


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


def forecast_session(
    session: Session,
    usage_until: float,
    counter: TokenCounter,
    *,
    response_overhead: int = RESPONSE_OVERHEAD_TOKENS,
    signature_rate_max: float = SIGNATURE_RATE_MAX,
) -> Session:
    """A copy of ``session`` whose recorded figures are read only for the first
    ``usage_until`` of each thread's requests (rounded up); ``session`` itself at 1.
    ``response_overhead`` and ``signature_rate_max``: the output model's constants
    (``_OutputModel``; ``bench/truth.py`` chooses them leave-one-source-out)."""
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
    # one output model for the session: a thread's read responses are too few to fit one (a
    # subagent's first response, 20 % of a 10-request thread) and its tools the same
    outputs = _OutputModel(response_overhead, signature_rate_max)
    read: set[int] = set()
    for thread in session.threads:
        for msg in thread.messages:
            if id(msg) in hidden or id(msg) in read or msg.role != "assistant" or not msg.usage:
                continue
            read.add(id(msg))
            outputs.add(msg, counter)
    for thread in session.threads:
        for msg in thread.messages:
            if id(msg) in hidden:
                _hide(copies[id(msg)], outputs, counter)
                hidden.discard(id(msg))
    side = dataclasses.replace(session.side, claude_code_cost_usd=None)
    return dataclasses.replace(session, threads=threads, side=side, memo={}, usage_until=share)


def _copy(msg: Message) -> Message:
    metadata = {k: v for k, v in msg.metadata.items() if k not in DERIVED_METADATA}
    blocks = [b.copy(tok=-1) if b.type == "thinking" else b for b in msg.blocks]
    return dataclasses.replace(msg, metadata=metadata, blocks=blocks)


class _OutputModel:
    """A response's recorded output as ``overhead + ratio × visible + rate × signature``.

    ``visible``: the tiktoken count of its visible blocks; ``overhead``: a fixed share per
    response (a tool call's framing: on the corpus a tool call of 13 visible tokens recorded
    70); ``signature``: the length of its thinking blocks' signatures, which encrypt the whole
    thinking (recordings that keep the final output: 0.26–0.34 output tokens a character,
    correlation 0.89–0.99, whether the file keeps the thinking text or not).

    Fitted on the session's read responses, pooled over its threads (a thread's first
    responses are too few): the ratio on those without thinking, the rate on those with a
    signature, after their visible part. Many recordings keep a streaming snapshot of the
    output, far below the response's content (often 1 token), in an unpredictable share of the
    responses: the fit takes that share up on average, which is what a later recording is
    expected to say. A thinking response without a signature, or a session whose read
    responses have none, gets the ratio of the read thinking responses to their visible part,
    as before signatures were read.

    What the view sends back of a later response's thinking is its size, not what a recording
    would say of it: where the read responses recorded final counts, their thinking per
    signature character (``thinking_size``); where they recorded snapshots of thinking whose
    text the file keeps, the text, which the calibration scales as recorded mode does."""

    def __init__(self, overhead: int, rate_max: float) -> None:
        self.overhead = overhead
        self.rate_max = rate_max
        #: Σ output beyond the overhead and Σ visible, by "the response thinks"
        self.output = {True: 0, False: 0}
        self.visible = {True: 0, False: 0}
        #: (output beyond the overhead, visible, signature) of read responses with a signature
        self.signed: list[tuple[int, int, int]] = []
        #: read responses with thinking text: all, and those whose output sized their thinking
        #: (a final count, more than the visible blocks and the text)
        self.with_text = 0
        self.sized = 0
        #: (thinking tokens, signature) of the read responses whose output sized their thinking
        self.sized_thinking: list[tuple[int, int]] = []

    def add(self, msg: Message, counter: TokenCounter) -> None:
        assert msg.usage is not None
        visible = _visible(msg.blocks, counter)
        signature = _signature(msg.blocks)
        if msg.usage.response_output <= 0 or visible + signature <= 0:
            return
        thinks = any(b.type == "thinking" for b in msg.blocks)
        beyond = msg.usage.response_output - self.overhead
        if visible > 0:
            self.output[thinks] += beyond
            self.visible[thinks] += visible
        if signature:
            self.signed.append((beyond, visible, signature))
        text = sum(counter.count(b.text) for b in msg.blocks if b.type == "thinking")
        thinking = msg.usage.response_output - visible
        if text:
            self.with_text += 1
            self.sized += thinking > text
        if signature and thinking > text:
            self.sized_thinking.append((thinking, signature))

    def ratio(self, thinks: bool) -> float:
        if self.visible[thinks]:
            return max(self.output[thinks] / self.visible[thinks], 0.0)
        return 1.0 if not thinks else self.ratio(False)

    def rate(self) -> float | None:
        """Output tokens per signature character beyond the visible part, None without any."""
        signatures = sum(s for _, _, s in self.signed)
        if not signatures:
            return None
        ratio = self.ratio(False)
        rate = sum(out - ratio * vis for out, vis, _ in self.signed) / signatures
        return min(max(rate, 0.0), self.rate_max)

    def thinking_size(self, signature: int) -> int | None:
        """The thinking a signature of ``signature`` characters stands for, at the median
        thinking per signature character of the read responses whose final count sized theirs
        (robust to the few that a visible part off its count puts far out); None with fewer
        than ``THINKING_GROWTH_SAMPLES`` of them."""
        if len(self.sized_thinking) < THINKING_GROWTH_SAMPLES or not signature:
            return None
        rate = statistics.median(tokens / chars for tokens, chars in self.sized_thinking)
        return round(min(rate, self.rate_max) * signature)

    def final_counts(self) -> bool:
        """Whether most read responses with thinking text recorded a final output count (their
        thinking sized from it), not a streaming snapshot."""
        return 2 * self.sized > self.with_text

    def estimate(self, msg: Message, counter: TokenCounter) -> int:
        """The output a recording of ``msg`` is expected to say."""
        visible = _visible(msg.blocks, counter)
        signature = _signature(msg.blocks)
        thinks = any(b.type == "thinking" for b in msg.blocks)
        rate = self.rate()
        if thinks and signature and rate is not None:
            return round(self.overhead + self.ratio(False) * visible + rate * signature)
        return round(self.overhead + self.ratio(thinks) * visible)


def _signature(blocks: Iterable[Block]) -> int:
    return sum(
        int(b.data.get(SIGNATURE_CHARS, 0))
        for b in blocks
        if b.type == "thinking" and isinstance(b.data, dict)
    )


def _visible(blocks: Iterable[Block], counter: TokenCounter) -> int:
    return sum(block_tokens(b, counter) for b in blocks if b.type != "thinking")


def _hide(msg: Message, outputs: _OutputModel, counter: TokenCounter) -> None:
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
    output = outputs.estimate(msg, counter)
    msg.metadata[ESTIMATED_OUTPUT] = output
    if not thinking:
        return
    note_thinking_write()  # a copy's, but every write counts
    msg.metadata["thinking_sized"] = True
    if any(texts) and not outputs.final_counts():
        # the read responses recorded snapshots: sent back at its text's size times what the
        # thread's read requests show thinking costs (``anchors.thinking_growth_factor``), as
        # recorded mode sizes them; the estimated output is the snapshot a recording would say
        msg.metadata["thinking_unsized"] = True
        for block, tok in zip(thinking, texts, strict=True):
            block.tok = tok
    elif (size := outputs.thinking_size(_signature(msg.blocks))) is not None:
        # sized from its signature, at the rate the read final counts show
        weights = texts if sum(texts) else [1] * len(thinking)
        for block, weight, text in zip(thinking, weights, texts, strict=True):
            block.tok = max(round(size * weight / sum(weights)), text)
    elif output > visible + sum(texts):
        # sized as ``tokens.size_thinking`` sizes it from a recorded output
        hidden = output - visible
        weights = texts if sum(texts) else [1] * len(thinking)
        for block, weight in zip(thinking, weights, strict=True):
            block.tok = round(hidden * weight / sum(weights))
