"""A session parsed once and tokenized once: the engine's session cache, token counts included.

``load_session_cached`` is ``input.session_cache.cached_session`` with every block's token
counts and cache key filled before the session is pickled, so a later replay of the same file
(in this process or another worker) counts nothing again.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import chain
from operator import attrgetter

from contextlab.engine.input.kept_cache import (
    KeptCache,
    Prefix,
    leads,
    prefix_of,
    session_bytes,
    session_lineage,
)
from contextlab.engine.input.model import Block, Message
from contextlab.engine.input.rough import block_rough
from contextlab.engine.input.session import Session
from contextlab.engine.input.session_cache import (
    CacheMirror,
    KeptBeside,
    cached_by_sha,
    cached_session,
    kept_beside,
)
from contextlab.engine.input.upload_chain import EarlierUpload

from .tokens import (
    COUNT_CHUNK_CHARS,
    TiktokenCounter,
    TokenCounter,
    block_key,
    block_tokens,
    count_pieces,
)

#: ``progress(characters counted, characters to count)``; it may raise to stop the counting
#: (a cancelled run), which it can do between any two pieces of ``COUNT_CHUNK_CHARS``.
CountProgress = Callable[[int, int], None]


class _ReportingCounter:
    """``counter`` that reports each piece it has counted, long texts piece by piece (the same
    pieces ``TiktokenCounter`` cuts, so the counts are the same): one 63 MB line takes seconds
    to count, and the run showing 0 % and ignoring a cancel all that time was a finding."""

    def __init__(self, counter: TokenCounter, total: int, progress: CountProgress) -> None:
        self._counter, self._total, self._progress = counter, total, progress
        self.done = 0

    def count(self, text: str) -> int:
        if len(text) <= COUNT_CHUNK_CHARS:
            return self._counted(text, self._counter.count)
        if isinstance(self._counter, TiktokenCounter):
            # the pieces bare, the whole text's kind on their sum: what ``count`` gives
            plain = self._counter.count_plain
            tokens = sum(self._counted(piece, plain) for piece in count_pieces(text))
            return self._counter.kind_ratios.scale(text, tokens)
        return sum(self._counted(piece, self._counter.count) for piece in count_pieces(text))

    def _counted(self, text: str, count: Callable[[str], int]) -> int:
        tokens = count(text)
        self.done += len(text)
        self._progress(self.done, self._total)
        return tokens


def _characters_to_count(session: Session) -> int:
    return sum(
        len(block.text)
        for thread in session.threads
        for message in thread.messages
        for block in message.blocks
        if block.tok < 0 and block.type not in ("image", "document")
    )


def carry_counts(earlier: Session, session: Session) -> int:
    """Copy the token counts and cache keys of ``earlier``'s blocks onto the blocks of
    ``session`` at the same place (thread, message, block) with the same type, media and text:
    a session that grew counts only what is new. Returns the blocks carried."""
    threads = {thread.id: thread for thread in earlier.threads}
    carried = 0
    for thread in session.threads:
        before = threads.get(thread.id)
        if before is None:
            continue
        for old, new in zip(before.messages, thread.messages, strict=False):
            for a, b in zip(old.blocks, new.blocks, strict=False):
                same = a.type == b.type and a.media == b.media and a.text == b.text
                if same and a.tok >= 0 and b.tok < 0:
                    b.tok, b.rough, b.key = a.tok, a.rough, a.key
                    carried += 1
    return carried


@dataclass(frozen=True)
class TokenCounts:
    """A prepared session's token counts, rough estimates and cache keys, by thread: each
    message's number of blocks, then the blocks' figures in order (``array``s: a few bytes a
    block). What a growing session's version keeps beside its parse, and what the next
    version carries over (``carry_token_counts``), instead of a pickle of the whole session."""

    threads: dict[str, tuple[array[int], array[int], array[int], array[int]]]

    @classmethod
    def of(cls, session: Session) -> TokenCounts:
        threads = {}
        for thread in session.threads:
            messages = thread.messages
            listed = _listed_before(thread.id, messages)
            rest = messages[len(listed.prefix) :] if listed is not None else messages
            blocks = list(chain.from_iterable(map(_BLOCKS, rest)))
            figures = (
                array("q", map(len, map(_BLOCKS, rest))),
                array("q", map(_TOK, blocks)),
                array("q", map(_ROUGH, blocks)),
                array("q", map(_KEY, blocks)),
            )
            if listed is not None:
                kept = (listed.per_message, listed.toks, listed.roughs, listed.keys)
                figures = tuple(a + b for a, b in zip(kept, figures, strict=True))  # type: ignore[assignment]
            threads[thread.id] = figures
            _keep_listed(thread.id, messages, figures, listed, session)
        return cls(threads)

    def carry_onto(self, pending: Sequence[tuple[str, int, int, Block]]) -> None:
        """``carry_token_counts`` onto the blocks of ``pending`` only (thread id, message and
        block index, the block: every block of the session it could change), not a walk of
        every block of the session."""
        # per thread: a message index and where its blocks start among the kept figures,
        # moved on to each pending block's message (``pending`` is in order): one sum at C
        # speed up to the first, then the appended part's, not a list of running sums of every
        # message of the thread (a 64 MB session's 4,000: about 0.4 ms a warm update)
        offsets: dict[str, list[int]] = {}
        for thread_id, m, b, block in pending:
            if block.tok >= 0:
                continue
            kept = self.threads.get(thread_id)
            if kept is None:
                continue
            per_message, toks, roughs, keys = kept
            if m >= len(per_message) or b >= per_message[m]:
                continue
            at = offsets.get(thread_id)
            if at is None or at[0] > m:
                at = offsets[thread_id] = [m, sum(per_message[:m])]
            elif at[0] < m:
                at[1] += sum(per_message[at[0] : m])
                at[0] = m
            i = at[1] + b
            if toks[i] >= 0 and keys[i] >= 0 and block_key(block) == keys[i]:
                block.tok, block.rough = toks[i], roughs[i]


_BLOCKS, _TOK, _ROUGH, _KEY = (attrgetter(name) for name in ("blocks", "tok", "rough", "key"))


def carry_token_counts(counts: TokenCounts, session: Session) -> int:
    """``carry_counts`` from an earlier version's ``TokenCounts``: a block at the same place
    (thread, message, block) whose cache key (a digest of its type, text and media) is the one
    kept takes the kept counts. Returns the blocks carried."""
    carried = 0
    for thread in session.threads:
        kept = counts.threads.get(thread.id)
        if kept is None:
            continue
        per_message, toks, roughs, keys = kept
        at = 0
        for message, size in zip(thread.messages, per_message, strict=False):
            for i, block in zip(range(at, at + size), message.blocks, strict=False):
                if block.tok < 0 <= toks[i] and keys[i] >= 0 and block_key(block) == keys[i]:
                    block.tok, block.rough = toks[i], roughs[i]
                    carried += 1
            at += size
    return carried


def tokenize_session(
    session: Session,
    counter: TokenCounter | None = None,
    *,
    progress: CountProgress | None = None,
    seed: Callable[[], Session | TokenCounts | None] | None = None,
) -> int:
    """Fill every block's token counts and cache key; returns the number of blocks.

    ``progress`` hears how many characters are counted, at most ``COUNT_CHUNK_CHARS`` apart.
    ``seed`` gives an earlier version of the session, or its ``TokenCounts`` (or None): its
    counts are carried over (``carry_counts``), so only the blocks that are new or changed
    are counted. It is not asked when every block is counted already."""
    # the blocks not counted yet, in order (a grown session's: its appended ones), found in
    # one walk; the earlier version's counts are carried onto those only
    pending: list[tuple[str, int, int, Block]] = []
    count = 0
    starts: dict[str, Prefix | None] = {}
    for thread in session.threads:
        thread_id = thread.id
        messages = thread.messages
        counted = starts[thread_id] = _counted_before(thread_id, messages)
        start = len(counted) if counted is not None else 0
        count += len(counted.blocks) if counted is not None else 0
        for m in range(start, len(messages)):
            blocks = messages[m].blocks
            count += len(blocks)
            for b, block in enumerate(blocks):
                if block.tok < 0 or block.rough < 0 or block.key < 0:
                    pending.append((thread_id, m, b, block))
    uncounted = any(block.tok < 0 for *_, block in pending)
    earlier = seed() if seed is not None and uncounted else None
    if isinstance(earlier, TokenCounts):
        earlier.carry_onto(pending)
    elif earlier is not None:
        carry_counts(earlier, session)
    counter = counter or TiktokenCounter()
    if progress is not None:
        total = _characters_to_count(session)
        progress(0, total)
        counter = _ReportingCounter(counter, total, progress)
    for *_, block in pending:
        if block.tok >= 0 and block.rough >= 0 and block.key >= 0:
            continue  # carried from an earlier version: not read back
        text = block.text  # read back from its compact form once for the three
        block_tokens(block, counter, text)
        block_rough(block, text)
        block_key(block, text)
    size, lineage = session_bytes(session), session_lineage(session)
    for thread in session.threads:
        _keep_counted(thread.id, thread.messages, starts.get(thread.id), size, lineage)
    return count


@dataclass
class _Counted:
    """A thread's messages (but the last: a grown session's next read may hold a longer copy
    of it) whose blocks ``tokenize_session`` left counted (``kept_cache.Prefix``: each one's
    number of blocks and the blocks too)."""

    prefix: Prefix


#: by (thread id, its first message's id): the threads this process counted last. A growing
#: session's next version holds the same message objects first (``claude_code.extending``),
#: whose blocks need no second look (a walk of every block of a 64 MB session, about 4 ms an
#: append); a block only ever goes from uncounted to counted.
#: Bounded by the size of the sessions counted (``kept_cache``: nothing of a large one).
_COUNTED: KeptCache[tuple[str, int], _Counted] = KeptCache(4)


def _counted_key(thread_id: str, messages: list[Message]) -> tuple[str, int]:
    return thread_id, id(messages[0]) if messages else 0


def _counted_before(thread_id: str, messages: list[Message]) -> Prefix | None:
    """The prefix of ``messages`` known counted: the very objects ``_COUNTED`` holds, with
    the very blocks (``kept_cache.leads``: checked once per read for all the caches)."""
    kept = _COUNTED.get(_counted_key(thread_id, messages))
    if kept is None or len(kept.prefix) >= len(messages) or not leads(kept.prefix, messages):
        return None
    return kept.prefix


def _keep_counted(
    thread_id: str, messages: list[Message], start: Prefix | None, size: int, lineage: int
) -> None:
    """Keep ``messages`` (but the last) as counted; ``start``: the prefix ``_counted_before``
    found at the count's start (counting changed no message's blocks since: not walked
    again)."""
    if len(messages) <= 1:
        return
    prefix = prefix_of(messages, on=start)
    _COUNTED.keep(_counted_key(thread_id, messages), _Counted(prefix), size=size, lineage=lineage)


@dataclass
class _Listed:
    """A thread's messages (but the last) whose figures ``TokenCounts.of`` listed last, all
    counted then (none below 0) (``kept_cache.Prefix``), with those figures, and their
    thinking blocks with the tokens they had then."""

    prefix: Prefix
    per_message: array[int]
    toks: array[int]
    roughs: array[int]
    keys: array[int]
    thinking: list[Block]
    thinking_toks: array[int]


#: by (thread id, its first message's id): the threads this process listed last. A block's
#: figures, once all three are set, change only when a response's thinking is sized (a live
#: continuation sizes the responses after its last version's, and a what-if replay of the
#: same cached session may size them again), so those are compared; a growing session's next
#: version holds the same message objects first, whose figures need not be read again (every
#: block of a 64 MB session, about 3 ms an append).
_LISTED: KeptCache[tuple[str, int], _Listed] = KeptCache(4)


def _listed_before(thread_id: str, messages: list[Message]) -> _Listed | None:
    """What ``_LISTED`` holds of ``messages``' first ones: the very objects, with as many
    blocks, and their thinking blocks' tokens as they were."""
    kept = _LISTED.get(_counted_key(thread_id, messages))
    if kept is None or len(kept.prefix) > len(messages) or not leads(kept.prefix, messages):
        return None
    if array("q", map(_TOK, kept.thinking)) != kept.thinking_toks:
        return None
    return kept


def _keep_listed(
    thread_id: str,
    messages: list[Message],
    figures: tuple[array[int], array[int], array[int], array[int]],
    listed: _Listed | None,
    session: Session,
) -> None:
    per_message, toks, roughs, keys = figures
    n = len(messages) - 1
    if n <= 0:
        return
    # what ``listed`` held was checked when it was kept (every block counted) and when this
    # listing began (its thinking blocks' tokens as they were): only the rest is read here
    if listed is not None and len(listed.prefix) > n:
        listed = None  # the same version listed again: kept as listed from its start
    start = len(listed.prefix) if listed is not None else 0
    done = len(listed.toks) if listed is not None else 0
    b = done + sum(per_message[start:n])
    thinking = list(listed.thinking) if listed is not None else []
    added = len(thinking)
    for message in messages[start:n]:
        thinking += [block for block in message.blocks if block.type == "thinking"]
    thinking_toks = array("q", map(_TOK, thinking[added:]))
    size, lineage = session_bytes(session), session_lineage(session)
    on = listed.prefix if listed is not None else None
    kept = _Listed(
        prefix_of(messages, on=on),
        per_message[:n],
        toks[:b],
        roughs[:b],
        keys[:b],
        thinking,
        listed.thinking_toks + thinking_toks if listed is not None else thinking_toks,
    )
    if b > done and min(min(toks[done:b]), min(roughs[done:b]), min(keys[done:b])) < 0:
        return  # a block not counted yet: counting it changes its figures
    _LISTED.keep(_counted_key(thread_id, messages), kept, size=size, lineage=lineage)


def load_session_cached(
    path: str | os.PathLike[str],
    *,
    cache_dir: str | os.PathLike[str],
    name: str | None = None,
    sha256: str | None = None,
    earlier: Sequence[str | os.PathLike[str] | EarlierUpload] = (),
    mirror: CacheMirror | None = None,
    progress: CountProgress | None = None,
    seed_sha256: str | None = None,
    parsed_first: bool = False,
) -> Session:
    """Like ``load_session`` but served from (and written to) ``cache_dir`` when possible,
    tokenized (``tokenize_session``); ``mirror`` shares the cache with hosts on other disks.

    With ``earlier`` (the uploads this one continues, earliest first), the session is the
    stitched one (``upload_chain.open_upload_chain``), cached under a key made of every file's;
    an earlier file that is gone is left out of both. ``progress`` hears the token counting
    (``tokenize_session``), when the session is not in the cache yet. ``seed_sha256``: the
    digest of an earlier version of this file (a live session that grew), whose cached token
    counts are reused for the blocks it shares. ``parsed_first``: the file's first replay
    (``session_cache.cached_session``: the upload check's parse looked for first).
    A cache file that cannot be read (truncated, written by another engine version) is ignored
    and rewritten; the cache never changes what a replay computes.
    """
    grown = seed_sha256 if not earlier else None
    return cached_session(
        path,
        cache_dir=cache_dir,
        prepare=partial(
            tokenize_session,
            progress=progress,
            seed=partial(_earlier_counts, cache_dir, grown) if grown else None,
        ),
        name=name,
        sha256=sha256,
        earlier=earlier,
        mirror=mirror,
        # a live session's version: its parse and counts kept, not the whole session again
        beside=replace(COUNTS_BESIDE, replaces=grown) if grown else None,
        parsed_first=parsed_first,
    )


#: A growing session's version keeps its ``TokenCounts`` beside its parse.
COUNTS_BESIDE = KeptBeside(
    suffix=".counts.pickle",
    kind=TokenCounts,
    save=TokenCounts.of,
    restore=lambda session, counts: carry_token_counts(counts, session),
)


def _earlier_counts(cache_dir: str | os.PathLike[str], sha256: str) -> Session | TokenCounts | None:
    """The counts an earlier version of a growing session kept (``COUNTS_BESIDE``), else its
    prepared session (a version cached whole: the session's first upload)."""
    counts = kept_beside(cache_dir, sha256, COUNTS_BESIDE)
    return counts if isinstance(counts, TokenCounts) else cached_by_sha(cache_dir, sha256)
