"""The model view one pipeline step works on, and the interface every step implements.

A ``View`` is the model's view of one thread at one request: a head of synthetic messages (a
summary, restored files) followed by a range of the thread's messages, with block overrides on
top (a persisted preview, a cleared result, a removed message). Steps never copy messages;
they add or drop overrides, which is also what the results record (with the request interval
over which each holds), so any request's view can be rebuilt without replaying.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from contextlab.engine.input.model import Block, Message
from contextlab.engine.input.rough import block_rough, rough_text
from contextlab.engine.measures.tokens import (
    TokenCounter,
    block_key,
    block_tokens,
    size_thinking,
    text_key,
)

if TYPE_CHECKING:
    from contextlab.engine.config.fields import PipelineConfig
    from contextlab.engine.config.thresholds import Thresholds
    from contextlab.engine.input.session import RequestInfo, Session, Thread
    from contextlab.engine.summarizing import Summarizer

#: Whole-message overrides use this block index.
WHOLE_MESSAGE = -1


class Fenwick:
    """Prefix sums with point updates, for token deltas of overrides by message index."""

    #: whether any point was ever updated; until then every sum is 0 without walking the tree
    #: (a recorded replay without overrides asks twice a request). The class default keeps a
    #: tree unpickled from before this flag existed walking.
    touched = True

    def __init__(self, size: int) -> None:
        self.size = size
        self.tree = [0] * (size + 1)
        self.touched = False

    def add(self, index: int, delta: int) -> None:
        self.touched = True
        i = index + 1
        while i <= self.size:
            self.tree[i] += delta
            i += i & -i

    def prefix(self, end: int) -> int:
        """Sum of positions [0, end)."""
        if not self.touched:
            return 0
        total = 0
        i = min(end, self.size)
        while i > 0:
            total += self.tree[i]
            i -= i & -i
        return total

    def range(self, start: int, end: int) -> int:
        if end <= start or not self.touched:
            return 0
        return self.prefix(end) - self.prefix(start)

    def grown(self, size: int) -> Fenwick:
        """The same sums over ``size`` positions (those past the old size 0): a thread that
        grew."""
        if size >= self.size:
            return self._extended(size)
        # the point values back out of the tree (undoing the linear build, last node first),
        # then the linear build over the new size
        values = self.tree[:]
        for i in range(self.size, 0, -1):
            parent = i + (i & -i)
            if parent <= self.size:
                values[parent] -= values[i]
        out = Fenwick(size)
        out.touched = self.touched
        tree = out.tree
        tree[1 : min(self.size, size) + 1] = values[1 : min(self.size, size) + 1]
        for i in range(1, size + 1):
            parent = i + (i & -i)
            if parent <= size:
                tree[parent] += tree[i]
        return out

    def _extended(self, size: int) -> Fenwick:
        """``grown`` to a larger size: the old nodes as they are, each new node the sum of the
        old points it covers (those past the old size are 0), from the old prefix sums. The
        new nodes' work, not the whole tree's rebuild (a live append adds a few messages to a
        thread of thousands)."""
        out = Fenwick(0)
        out.size = size
        out.touched = self.touched
        tree = self.tree + [0] * (size - self.size)
        out.tree = tree
        if not self.touched:
            return out  # every point is 0
        old = self.size
        total = self.prefix(old)
        for i in range(old + 1, size + 1):
            low = i - (i & -i)
            if low < old:  # the node covers old points (low, old]
                tree[i] = total - self.prefix(low)
        return out


@dataclass(slots=True)
class Override:
    """A change to one block (or, with block -1, a whole message) of the model view."""

    kind: str  # persisted | budget | cleared | snipped | collapsed | hidden
    step: str
    text: str | None  # replacement text; None removes the block or message
    tok: int
    rough: int
    key: int
    first: int  # first request index (within the thread) where it holds
    scope: str = "session"  # "turn": dropped when the next user prompt starts a query
    modeled: bool = False
    #: cached microcompact deletes server-side without changing the cached prefix
    cache_preserving: bool = False
    detail: dict[str, Any] = field(default_factory=dict)
    serial: int = -1


@dataclass(slots=True)
class HeadItem:
    """A message placed before the range: a compact summary or a modeled restoration."""

    message: Message
    ref: str  # "m:<index>" for a thread message, "s:<n>" for a synthetic one
    tok: int
    rough: int


@dataclass
class TransformLog:
    """Every override and synthetic message of a replay, with the interval it holds."""

    transforms: list[dict[str, Any]] = field(default_factory=list)
    synthetic: list[dict[str, Any]] = field(default_factory=list)

    def open(self, thread: str, message: int, block: int, ov: Override) -> None:
        ov.serial = len(self.transforms)
        entry: dict[str, Any] = {
            "thread": thread,
            "message": message,
            "block": block,
            "kind": ov.kind,
            "step": ov.step,
            "first": ov.first,
            "last": None,
            "modeled": ov.modeled,
        }
        if ov.text is not None:
            entry["text"] = ov.text
        if ov.detail:
            entry["detail"] = ov.detail
        self.transforms.append(entry)

    def close(self, ov: Override, last: int) -> None:
        if ov.serial >= 0:
            self.transforms[ov.serial]["last"] = last

    def add_synthetic(
        self, thread: str, kind: str, message: Message, detail: dict[str, Any]
    ) -> str:
        ref = f"s:{len(self.synthetic)}"
        self.synthetic.append(
            {
                "id": ref,
                "thread": thread,
                "kind": kind,
                "role": message.role,
                "text": "".join(b.text for b in message.blocks),
                **detail,
            }
        )
        return ref

    def summaries(self) -> list[dict[str, Any]]:
        """Every summary a Summarizer wrote in this replay, once each, in creation order:
        compactions (synthetic summary messages) and modeled collapse commits. Recorded
        collapse commits are not listed: no summarizer wrote them."""
        found: list[tuple[int, int, dict[str, Any]]] = []
        for n, syn in enumerate(self.synthetic):
            if syn.get("kind") != "summary":
                continue
            found.append((syn.get("request", 0), n, _summary_row(syn["id"], syn, syn["text"])))
        for n, tr in enumerate(self.transforms):
            detail = tr.get("detail") or {}
            if tr.get("step") != "collapse" or tr.get("text") is None or "backend" not in detail:
                continue
            match = _COLLAPSED.match(tr["text"])
            text = match.group(1) if match else tr["text"]
            row = _summary_row(f"c:{detail.get('collapse_id', n)}", detail, text)
            row["request"] = tr["first"]
            row["thread"] = tr["thread"]
            row["kind"] = "collapse"
            found.append((tr["first"], len(self.synthetic) + n, row))
        found.sort(key=lambda item: (item[0], item[1]))
        return [row for _, _, row in found]


_COLLAPSED = re.compile(r'^<collapsed id="[^"]*">([\s\S]*)</collapsed>$')


def _summary_row(ident: str, src: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "id": ident,
        "request": src.get("request"),
        "thread": src.get("thread"),
        # "compact" (full compaction), "session_memory", "preserved_segment" (a full compaction
        # that kept the recorded compaction's preserved segment) or, set by the caller, "collapse"
        "kind": {"full": "compact"}.get(src.get("variant", "full"), src.get("variant")),
        "backend": src.get("backend"),
        "model": src.get("model"),
        "input_tokens": src.get("input_tokens", 0),
        "output_tokens": src.get("output_tokens", 0),
        "cost_usd": src.get("cost_usd", 0.0),
        "latency_s": src.get("latency_s", 0.0),
        "reused": src.get("reused", False),
        "fallback_reason": src.get("fallback_reason"),
        "text": text,
    }


class View:
    """The model view of one thread, maintained incrementally from request to request."""

    #: whether ``base_text`` may give a block a text other than its own (what-if's restored
    #: tool outputs); False skips its call per block (a view pickled without it: True)
    restores = True

    def __init__(
        self,
        thread: Thread,
        counter: TokenCounter,
        log: TransformLog,
        base_text: Callable[[int, int, Block], str | None],
        hidden: set[int],
        text_tokens: dict[int, int] | None = None,
        measured: View | None = None,
        restores: bool = True,
    ) -> None:
        self.thread = thread
        self.messages = thread.messages
        self.counter = counter
        self.log = log
        self.base_text = base_text
        self.restores = restores
        self.hidden = hidden
        self._restored: dict[tuple[int, int], tuple[int, int, int]] = {}
        #: counts of synthetic texts by content; shared by the views of one session's replays
        #: (both passes, every config) when the caller hands one in
        self._text_tokens: dict[int, int] = {} if text_tokens is None else text_tokens
        n = len(self.messages)
        # machine integers, not lists of int objects: a live session's replay state pickles
        # the view at every append, and reading a 64 MB session's 17,000 int objects, each
        # where it was allocated, was a millisecond of cache misses; an array is copied whole
        self.cum_tok = array("q", [0])
        self.cum_rough = array("q", [0])
        self.msg_tok = array("q")
        self.msg_rough = array("q")
        if measured is None:
            self._measure_from(0)
        else:
            # an earlier view of the thread measured the same base texts (the caller checks):
            # its sizes, not a second walk over every block of the thread
            # (copies: this view appends its own; a state with lists is refused by its version)
            self.cum_tok, self.cum_rough = measured.cum_tok[:], measured.cum_rough[:]
            self.msg_tok, self.msg_rough = measured.msg_tok[:], measured.msg_rough[:]
        self.head: list[HeadItem] = []
        self.head_tok = 0
        self.head_rough = 0
        self.start = 0
        self.end = 0
        self.overrides: dict[tuple[int, int], Override] = {}
        self.fen_tok = Fenwick(n)
        self.fen_rough = Fenwick(n)
        #: first message index whose blocks changed since the cache list was built
        self.dirty_from: int | None = 0

    def __getstate__(self) -> dict[str, Any]:
        # a checkpoint keeps the thread by reference, its message list with it: the list the
        # view reads is the thread's (a live session's append grows that very list)
        state = self.__dict__.copy()
        del state["messages"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.messages = self.thread.messages

    def _measure_from(self, first: int) -> None:
        """Base sizes of messages ``first:`` (those before are measured already)."""
        hidden, base_text, base_block = self.hidden, self.base_text, self.base_block
        restores = self.restores
        messages, counter = self.messages, self.counter
        # the lists' appends bound once, the running sums kept here (a loop over every
        # message of the thread, twice a replay)
        msg_tok, msg_rough = self.msg_tok.append, self.msg_rough.append
        cum_tok, cum_rough = self.cum_tok.append, self.cum_rough.append
        total_tok, total_rough = self.cum_tok[first], self.cum_rough[first]
        for i in range(first, len(messages)):
            msg = messages[i]
            tok = rough = 0
            if i not in hidden and msg.role != "system":
                if msg.role == "assistant":
                    size_thinking(msg, counter)
                for j, block in enumerate(msg.blocks):
                    t, r = block.tok, block.rough
                    # a block measured before (the calibration's pass, an earlier config) and
                    # not restored: its sizes as they are, without ``base_block``'s call
                    if (
                        t < 0
                        or r < 0
                        or block.key < 0
                        or (restores and base_text(i, j, block) is not None)
                    ):
                        t, r, _ = base_block(i, j, block)
                    tok += t
                    rough += r
            msg_tok(tok)
            msg_rough(rough)
            total_tok += tok
            total_rough += rough
            cum_tok(total_tok)
            cum_rough(total_rough)

    def grow(self, first: int) -> None:
        """Measure again the messages from ``first`` on, and those the thread gained since the
        view was made (a live session's append; ``self.messages`` is the thread's list). No
        request may have seen a message from ``first`` on (none has an override)."""
        del self.msg_tok[first:], self.msg_rough[first:]
        del self.cum_tok[first + 1 :], self.cum_rough[first + 1 :]
        self._measure_from(first)
        n = len(self.messages)
        self.fen_tok = self.fen_tok.grown(n)
        self.fen_rough = self.fen_rough.grown(n)

    # -- base content -------------------------------------------------------------------

    def base_block(self, i: int, j: int, block: Block) -> tuple[int, int, int]:
        """Tokens, rough tokens and key of a block's base text (restored in what-if mode)."""
        text = self.base_text(i, j, block) if self.restores else None
        if text is None:
            tok, rough, key = block.tok, block.rough, block.key
            if tok < 0 or rough < 0 or key < 0:
                # measured once per block (the sizes stay on it): its text read back once
                plain = block.text
                tok = block_tokens(block, self.counter, plain)
                rough = block_rough(block, plain)
                key = block_key(block, plain)
            return tok, rough, key
        cached = self._restored.get((i, j))
        if cached is None:
            cached = (
                self.counter.count(text),
                rough_text(text),
                text_key(block.type + "\x00" + text),
            )
            self._restored[(i, j)] = cached
        return cached

    def block_state(self, i: int, j: int) -> tuple[str, Override | None]:
        """Effective text of block j of message i in the view, and its override if any."""
        whole = self.overrides.get((i, WHOLE_MESSAGE))
        if whole is not None:
            return (whole.text or "") if j == 0 else "", whole
        ov = self.overrides.get((i, j))
        if ov is not None:
            return ov.text or "", ov
        block = self.messages[i].blocks[j]
        restored = self.base_text(i, j, block)
        return (block.text if restored is None else restored), None

    # -- sizes ----------------------------------------------------------------------------

    def raw_tokens(self) -> int:
        """Uncalibrated tiktoken count of the messages in the view."""
        return (
            self.head_tok
            + self.cum_tok[self.end]
            - self.cum_tok[self.start]
            + self.fen_tok.range(self.start, self.end)
        )

    def rough_range(self, start: int, end: int) -> int:
        if end <= start:
            return 0
        return self.cum_rough[end] - self.cum_rough[start] + self.fen_rough.range(start, end)

    def rough_total(self) -> int:
        return self.head_rough + self.rough_range(self.start, self.end)

    def is_removed(self, i: int) -> bool:
        if i in self.hidden:
            return True
        ov = self.overrides.get((i, WHOLE_MESSAGE))
        return ov is not None and ov.text is None

    def in_view(self, i: int) -> bool:
        return self.start <= i < self.end and not self.is_removed(i)

    def view_indices(self) -> Iterator[int]:
        for i in range(self.start, self.end):
            if not self.is_removed(i):
                yield i

    # -- changes --------------------------------------------------------------------------

    def set_override(self, i: int, j: int, ov: Override) -> None:
        """Apply an override (replacing any earlier one on the same block)."""
        key = (i, j)
        old = self.overrides.get(key)
        if old is not None:
            self.drop_override(i, j, ov.first - 1)
        msg = self.messages[i]
        if j == WHOLE_MESSAGE:
            # a whole-message override also hides the block overrides under it
            base_tok = self.msg_tok[i] + self._block_delta(i, "tok")
            base_rough = self.msg_rough[i] + self._block_delta(i, "rough")
        else:
            base_tok, base_rough, _ = self.base_block(i, j, msg.blocks[j])
            under = self.overrides.get((i, WHOLE_MESSAGE))
            if under is not None:
                base_tok = base_rough = 0
        self.fen_tok.add(i, ov.tok - base_tok)
        self.fen_rough.add(i, ov.rough - base_rough)
        self.overrides[key] = ov
        self.log.open(self.thread.id, i, j, ov)
        self._touch(i)

    def _block_delta(self, i: int, what: str) -> int:
        total = 0
        for (mi, bj), ov in self.overrides.items():
            if mi == i and bj != WHOLE_MESSAGE:
                base_tok, base_rough, _ = self.base_block(i, bj, self.messages[i].blocks[bj])
                total += (ov.tok - base_tok) if what == "tok" else (ov.rough - base_rough)
        return total

    def drop_override(self, i: int, j: int, last_request: int) -> None:
        ov = self.overrides.pop((i, j), None)
        if ov is None:
            return
        msg = self.messages[i]
        if j == WHOLE_MESSAGE:
            base_tok = self.msg_tok[i] + self._block_delta(i, "tok")
            base_rough = self.msg_rough[i] + self._block_delta(i, "rough")
        else:
            base_tok, base_rough, _ = self.base_block(i, j, msg.blocks[j])
        self.fen_tok.add(i, base_tok - ov.tok)
        self.fen_rough.add(i, base_rough - ov.rough)
        self.log.close(ov, last_request)
        self._touch(i)

    def drop_turn_overrides(self, last_request: int) -> int:
        """Drop turn-scoped overrides (time-based clearing) at the start of a new query."""
        keys = [k for k, ov in self.overrides.items() if ov.scope == "turn"]
        for i, j in keys:
            self.drop_override(i, j, last_request)
        return len(keys)

    def compact(self, head: list[HeadItem], new_start: int, last_request: int) -> None:
        """Replace everything before ``new_start`` by ``head`` (a compaction)."""
        for i, j in [k for k in self.overrides if k[0] < new_start]:
            self.drop_override(i, j, last_request)
        self.head = head
        self.head_tok = sum(h.tok for h in head)
        self.head_rough = sum(h.rough for h in head)
        self.start = new_start
        self.end = max(self.end, new_start)
        self.dirty_from = -1  # the head changed: rebuild the whole cache block list

    def _touch(self, i: int) -> None:
        if self.dirty_from is None or i < self.dirty_from:
            self.dirty_from = i

    def make_override(
        self,
        kind: str,
        step: str,
        text: str | None,
        first: int,
        *,
        block_type: str = "tool_result",
        scope: str = "session",
        modeled: bool = False,
        cache_preserving: bool = False,
        detail: dict[str, Any] | None = None,
    ) -> Override:
        if text is None:
            tok = rough = key = 0
        else:
            tok = self.count_text(text)
            rough = rough_text(text)
            key = text_key(block_type + "\x00" + text)
        return Override(
            kind=kind,
            step=step,
            text=text,
            tok=tok,
            rough=rough,
            key=key,
            first=first,
            scope=scope,
            modeled=modeled,
            cache_preserving=cache_preserving,
            detail=detail or {},
        )

    def count_text(self, text: str) -> int:
        """tiktoken count of a synthetic text, memoized by content (restorations repeat)."""
        key = text_key(text)
        tok = self._text_tokens.get(key)
        if tok is None:
            tok = self._text_tokens[key] = self.counter.count(text)
        return tok

    def head_item(self, message: Message, ref: str) -> HeadItem:
        for block in message.blocks:
            if block.tok < 0:
                block.tok = self.count_text(block.text)
        tok = sum(block_tokens(b, self.counter) for b in message.blocks)
        rough = sum(block_rough(b) for b in message.blocks)
        return HeadItem(message=message, ref=ref, tok=tok, rough=rough)


@dataclass
class StepContext:
    """What a step sees for one request."""

    k: int
    request: RequestInfo
    view: View
    config: PipelineConfig
    thresholds: Thresholds
    mode: str
    new_range: tuple[int, int]
    turn_start: bool
    now: float  # epoch seconds of the request
    state: dict[str, Any]
    events: list[dict[str, Any]]
    decision_count: Callable[[], int]
    #: calibrated size of the current view (what the next usage would report)
    prompt_estimate: Callable[[], int]
    session: Session
    summarizer: Summarizer
    snip_freed: int = 0
    compacted: bool = False
    recorded_compaction: dict[str, Any] | None = None
    blocked: bool = False
    #: the decision count the blocking check took, while no step has applied since (the
    #: request's row shows the same count: the replay takes it instead of counting again)
    blocking_count: int | None = None
    #: False in a pass that only measures the view (the calibration's probe): a check that
    #: only labels the request (blocking) has nothing to do there
    with_results: bool = True

    def event(self, step: str, action: str, **detail: Any) -> None:
        self.events.append({"step": step, "action": action, **detail})

    def step_state(self, name: str) -> dict[str, Any]:
        state: dict[str, Any] = self.state.setdefault(name, {})
        return state


class Step(Protocol):
    """One stage of Claude Code's pipeline; ``apply`` changes the view through overrides."""

    name: str
    modeled: bool

    def apply(self, ctx: StepContext) -> None: ...
