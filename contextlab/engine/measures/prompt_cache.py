"""Prompt-cache simulator: estimates cache read / write / uncached tokens per API request.

Models the documented Anthropic server behaviour (pipeline-spec §6, facts §11): entries keyed by
the hash of the prompt prefix at each ``cache_control`` breakpoint, a TTL refreshed on every hit,
a lookback of 20 block positions before each breakpoint, a per-model minimum cacheable prefix,
and a global-scope system prefix that other sessions keep warm. It is an estimate: eviction
under load and server-side cache isolation are not modelled.

Block identity comes from the caller as rolling prefix hashes (see ``rolling_hashes``), so a
request costs O(blocks) at C speed plus O(breakpoints × lookback) dictionary look-ups.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

__all__ = [
    "TTL_SECONDS",
    "CacheReason",
    "CacheResult",
    "CacheSimulator",
    "block_key",
    "rolling_hashes",
]

#: The two TTLs the API accepts for ``cache_control`` (seconds).
TTL_SECONDS: dict[str, float] = {"5m": 300.0, "1h": 3600.0}

CacheReason = Literal[
    "first_request",
    "hit",
    "ttl_expired",
    "prefix_changed",
    "lookback_exceeded",
    "below_minimum",
    "model_changed",
    "no_breakpoint",
    "caching_off",
]

_INF = float("inf")


class CacheResult(NamedTuple):
    """Estimated usage of one request, mirroring the API usage fields.

    ``read`` ↔ ``cache_read_input_tokens``, ``write`` ↔ ``cache_creation_input_tokens``
    (split into ``write_5m`` / ``write_1h``), ``uncached`` ↔ ``input_tokens``. The three add up
    to the request's total input. ``hit_block`` is the number of leading blocks read from cache
    (0 = nothing read); ``reason`` says why the read stopped there and ``detail`` says it in
    one sentence for the UI.

    A named tuple, not a frozen dataclass: one is made per request, and a frozen dataclass's
    ``__init__`` sets each of its eight fields through ``object.__setattr__`` (three times
    the cost); it is as immutable, and never stored.
    """

    read: int
    write: int
    write_5m: int
    write_1h: int
    uncached: int
    hit_block: int
    reason: CacheReason
    detail: str

    @property
    def total(self) -> int:
        """Total input tokens of the request (read + write + uncached)."""
        return self.read + self.write + self.uncached


@dataclass(slots=True)
class _Entry:
    """One stored cache entry (the prefix up to a breakpoint)."""

    tokens: int
    expiry: float
    ttl: str
    writer: str
    #: an entry is readable only once the writing request's response has begun (docs)
    ready: float = float("-inf")


@dataclass(slots=True)
class _Last:
    """What the previous request of a model left in the cache, kept to explain the next one."""

    name: str
    time: float
    #: the position of its last breakpoint: the longest prefix it left in the store
    top: int
    expiry: float
    ttl: str
    #: its prefix hashes (items past ``top`` may be a later request's: ``hashes_append_only``)
    hashes: Sequence[int]


class CacheSimulator:
    """Replays requests in time order against a simulated prompt-cache store.

    One instance per session (and per cache scope: parallel sessions of one workspace share
    entries on the real server, which the caller can model by feeding them to one instance in
    time order). ``lookback_blocks`` is the documented 20-block window: each breakpoint position
    and up to that many earlier positions are checked, so a previous write 20 blocks back is
    found and one 21 blocks back is not (the docs' "20 or more blocks past the last write
    misses" reads one shorter; use 19 to model that). ``lookback_enabled=False`` makes the
    lookback unlimited, to compare both rules against recorded usage (spec §6.4 step 6).
    """

    def __init__(self, *, lookback_blocks: int = 20, lookback_enabled: bool = True) -> None:
        if lookback_blocks < 0:
            raise ValueError(f"lookback_blocks must be >= 0, got {lookback_blocks}")
        self.lookback_blocks = lookback_blocks
        self.lookback_enabled = lookback_enabled
        # One dict per model rather than (model, hash) keys: entries are never shared between
        # models, and an int key is cheaper to hash than a tuple in the hot loop.
        self._stores: dict[str, dict[int, _Entry]] = {}
        self._last: dict[str, _Last] = {}
        self._last_model: str | None = None
        self._count = 0
        self._entries = 0
        self._sweep_at = 4096

    def __getstate__(self) -> dict[str, Any]:
        """Its entries as columns: a live session's replay state pickles the simulator at every
        append, and its thousands of entries pickled as objects (a Python call each, in and
        out) were most of the state's pickling time besides its rows."""
        state = self.__dict__.copy()
        state["_stores"] = {
            model: (
                list(store),
                [e.tokens for e in store.values()],
                [e.expiry for e in store.values()],
                [e.ttl for e in store.values()],
                [e.writer for e in store.values()],
                [e.ready for e in store.values()],
            )
            for model, store in self._stores.items()
        }
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        stores = state["_stores"]
        # a state pickled before the columns holds its entries as they are
        state["_stores"] = {
            model: (
                dict(zip(store[0], map(_Entry, *store[1:]), strict=True))
                if isinstance(store, tuple)
                else store
            )
            for model, store in stores.items()
        }
        self.__dict__.update(state)

    def request(
        self,
        *,
        time: float,
        model: str,
        prefix_hashes: Sequence[int],
        block_tokens: Sequence[int],
        breakpoints: Sequence[int],
        ttl: str = "5m",
        min_cacheable_tokens: int = 1024,
        warm_blocks: int = 0,
        label: str = "",
        ready_time: float | None = None,
        total_tokens: int | None = None,
        hashes_append_only: bool = False,
    ) -> CacheResult:
        """Simulate one API request and update the store.

        ``time`` is in seconds (e.g. a Unix timestamp); requests should come in time order.
        ``prefix_hashes[i]`` identifies the whole prompt up to and including block ``i`` (build
        it with ``rolling_hashes``); ``block_tokens[i]`` is block ``i``'s token count (>= 0).
        ``breakpoints`` are the block indices carrying ``cache_control``. ``ttl`` is "5m" or
        "1h" for every marker of the request (Claude Code never mixes them). ``warm_blocks``
        leading blocks are treated as cached by other sessions (the global-scope system
        prompt). ``label`` names this request in later ``detail`` sentences (default
        "request N"). ``ready_time`` is when this request's response began: its writes are
        invisible to requests sent before then (parallel subagents), default ``time``.

        A caller that keeps its prompt between requests saves the two passes over it that
        would make a request cost O(prompt): ``total_tokens`` is ``sum(block_tokens)`` as it
        keeps it, and ``hashes_append_only`` says it never changes an item of a
        ``prefix_hashes`` list it passed (it appends, or hands in a new list), so the list is
        kept to explain the next request instead of a copy of it.
        """
        n = len(block_tokens)
        if len(prefix_hashes) != n:
            raise ValueError(
                f"prefix_hashes has {len(prefix_hashes)} items but block_tokens has {n}"
            )
        ttl_s = TTL_SECONDS.get(ttl)
        if ttl_s is None:
            raise ValueError(f"ttl must be one of {sorted(TTL_SECONDS)}, got {ttl!r}")
        if not 0 <= warm_blocks <= n:
            raise ValueError(f"warm_blocks must be in 0..{n}, got {warm_blocks}")
        # the estimator hands them in order and distinct: kept as they are (no set, no sort)
        bps: Sequence[int] = (
            breakpoints
            if len(breakpoints) == 2 and breakpoints[0] < breakpoints[1]
            else sorted(set(breakpoints))
        )
        if bps and (bps[0] < 0 or bps[-1] >= n):
            raise ValueError(f"breakpoints must be block indices in 0..{n - 1}, got {list(bps)}")

        self._count += 1
        name = label or f"request {self._count}"
        last_model = self._last_model
        self._last_model = model

        if not bps:
            return CacheResult(
                0,
                0,
                0,
                0,
                sum(block_tokens),
                0,
                "no_breakpoint",
                "the request has no cache_control breakpoint, so nothing is cached",
            )

        # Prefix token sums at the few positions we need. One sum() over the whole list, then
        # short slices: positions in the first half are summed from the left, the others are
        # the total minus their suffix (breakpoints sit near the start and at the very end).
        warm_pos = warm_blocks - 1
        # the warm prefix ends at a breakpoint (or there is none): the breakpoints themselves
        known_pos = bps if warm_pos < 0 or warm_pos in bps else sorted({*bps, warm_pos} - {-1})
        total = sum(block_tokens) if total_tokens is None else total_tokens
        last_bp = bps[-1]
        if (
            total_tokens is not None
            and len(known_pos) == 2
            and last_bp == n - 1
            and 2 * known_pos[0] < n - 1
        ):
            # a caller that keeps its prompt (the estimator): one breakpoint in the first half,
            # one on the last block; the sums the two walks below would take, without walking
            first = known_pos[0]
            known: dict[int, int] = {
                -1: 0,
                first: sum(block_tokens[: first + 1]) if first else block_tokens[0],
                last_bp: total,
            }
        else:
            known = {-1: 0}
            half = n // 2
            acc, start = 0, 0
            for p in known_pos:
                if p >= half:
                    break
                acc += sum(block_tokens[start : p + 1])
                known[p], start = acc, p + 1
            acc, end = total, n
            for p in reversed(known_pos):
                if p < half:
                    break
                acc -= sum(block_tokens[p + 1 : end])
                known[p], end = acc, p + 1
        prefix_at_last = known[last_bp]

        if prefix_at_last < min_cacheable_tokens:
            # The API caches nothing below the model minimum and returns no error.
            return CacheResult(
                0,
                0,
                0,
                0,
                total,
                0,
                "below_minimum",
                f"prompt up to the last breakpoint is {prefix_at_last:,} tokens, below the "
                f"{min_cacheable_tokens:,}-token minimum, so nothing is cached",
            )

        store = self._stores.get(model)
        if store is None:
            store = self._stores[model] = {}
        warm_ok = warm_pos >= 0 and known[warm_pos] >= min_cacheable_tokens

        # Longest stored prefix within the lookback window of any breakpoint. Breakpoints are
        # scanned last first and positions downwards, so the first match is the largest; windows
        # that overlap are not scanned twice.
        hit = -1
        hit_entry: _Entry | None = None
        floor = n
        for p in reversed(bps):
            # (``max``/``min`` as comparisons: this runs for every request)
            lo = p - self.lookback_blocks if self.lookback_enabled else 0
            lo = lo if lo > 0 else 0
            for i in range(p if p < floor - 1 else floor - 1, lo - 1, -1):
                e = store.get(prefix_hashes[i])
                if e is not None and e.expiry > time and e.ready <= time:
                    hit, hit_entry = i, e
                    break
                if i == warm_pos and warm_ok:
                    hit = i
                    break
            if hit >= 0:
                break
            floor = min(floor, lo)

        read = self._prefix_tokens(known, block_tokens, hit) if hit >= 0 else 0
        if hit_entry is not None:
            hit_entry.expiry = time + TTL_SECONDS[hit_entry.ttl]
        # Also refresh the entries at earlier breakpoints inside the read prefix: their content
        # was used, and this keeps the system-prompt entry warm during a long conversation, so a
        # later prefix change (e.g. a compaction) still reads tools + system (facts §11).
        for p in bps:
            if p >= hit:
                break
            e = store.get(prefix_hashes[p])
            if e is not None and e.expiry > time:
                e.expiry = time + TTL_SECONDS[e.ttl]

        expiry = time + ttl_s
        # A read of the warm prefix (cached by another session, no entry of ours) still puts
        # it under this request's breakpoints: a later request whose messages changed reads
        # the system prompt back from that entry (marot/spotter tool_heavy, an /mcp reconnect
        # two minutes after the file's warm start read 18k of 26k)
        warm_hit = hit_entry is None and hit >= 0
        for p in bps:
            h = prefix_hashes[p]
            if known[p] >= min_cacheable_tokens and (p > hit or (warm_hit and h not in store)):
                if h not in store:
                    self._entries += 1
                store[h] = _Entry(
                    known[p], expiry, ttl, name, time if ready_time is None else ready_time
                )
        write = prefix_at_last - read
        uncached = total - prefix_at_last

        prev = self._last.get(model)
        reason: CacheReason
        if (
            hit_entry is not None
            and prev is not None
            and hit >= (last_bp if last_bp < prev.top else prev.top)  # (``min``, inline)
        ):
            # ``_explain``'s "hit" of a stored entry, the reason of most requests, without the call
            reason = "hit"
            detail = (
                f"read blocks 0-{hit} (entry from {hit_entry.writer}), wrote {write:,} new tokens"
            )
        else:
            reason, detail = self._explain(
                prev, last_model, model, time, prefix_hashes, hit, hit_entry, last_bp, write
            )

        if hit == last_bp:
            top_expiry = hit_entry.expiry if hit_entry is not None else _INF
            top_ttl = hit_entry.ttl if hit_entry is not None else ttl
        else:
            top_expiry, top_ttl = expiry, ttl
        kept = prefix_hashes if hashes_append_only else tuple(prefix_hashes)
        if prev is None:
            self._last[model] = _Last(name, time, last_bp, top_expiry, top_ttl, kept)
        else:  # the model's one record, brought up to this request (nothing else holds it)
            prev.name, prev.time, prev.top = name, time, last_bp
            prev.expiry, prev.ttl, prev.hashes = top_expiry, top_ttl, kept

        if self._entries > self._sweep_at:
            self._sweep(time)

        w5, w1 = (write, 0) if ttl == "5m" else (0, write)
        return CacheResult(read, write, w5, w1, uncached, hit + 1, reason, detail)

    def snapshot(self) -> dict[str, Any]:
        """The store and per-model state as plain data, for debugging."""
        return {
            "requests": self._count,
            "last_model": self._last_model,
            "lookback_blocks": self.lookback_blocks if self.lookback_enabled else None,
            "models": {
                model: {
                    "entries": [
                        {
                            "hash": h,
                            "tokens": e.tokens,
                            "expiry": e.expiry,
                            "ttl": e.ttl,
                            "writer": e.writer,
                        }
                        for h, e in store.items()
                    ],
                    "last": (
                        {
                            "name": last.name,
                            "time": last.time,
                            "top_block": last.top,
                            "expiry": last.expiry,
                        }
                        if (last := self._last.get(model)) is not None
                        else None
                    ),
                }
                for model, store in self._stores.items()
            },
        }

    @staticmethod
    def _prefix_tokens(known: dict[int, int], tokens: Sequence[int], pos: int) -> int:
        """Tokens of blocks 0..pos, summing only the gap to the nearest already-known sum.

        In steady state the hit sits a few blocks before the last breakpoint, so this is a
        short slice rather than a second pass over the whole request.
        """
        # the nearest known position, the first of equals in ``known``'s order (as ``min``)
        k, best = pos, -1
        for q in known:
            d = q - pos if q >= pos else pos - q
            if best < 0 or d < best:
                k, best = q, d
        if k <= pos:
            return known[k] + sum(tokens[k + 1 : pos + 1])
        return known[k] - sum(tokens[pos + 1 : k + 1])

    def _explain(
        self,
        prev: _Last | None,
        last_model: str | None,
        model: str,
        time: float,
        hashes: Sequence[int],
        hit: int,
        hit_entry: _Entry | None,
        last_bp: int,
        write: int,
    ) -> tuple[CacheReason, str]:
        """Why the read stopped at ``hit``, relative to what the previous request left."""
        if hit < 0:
            got = "nothing read"
        elif hit_entry is None:
            got = f"read the warm global prefix (blocks 0-{hit})"
        else:
            got = f"read blocks 0-{hit} (entry from {hit_entry.writer})"

        if prev is None:
            if last_model is not None and last_model != model:
                return (
                    "model_changed",
                    f"model changed from {last_model} to {model}; cache entries are per model, "
                    f"so {got}",
                )
            return "first_request", f"no earlier cache entry for {model}; {got}"

        # The previous request cached its prompt up to prev.top; this request can read at most
        # up to its own last breakpoint.
        target = min(prev.top, last_bp)
        if hit >= target:
            return "hit", f"{got}, wrote {write:,} new tokens"

        diff = _first_difference(prev.hashes, hashes, target)
        if time >= prev.expiry:
            gap = _format_duration(time - prev.time)
            also = f"; the prefix also changed at block {diff}" if diff is not None else ""
            return (
                "ttl_expired",
                f"cache entry from {prev.name} expired after {prev.ttl} (gap {gap}){also}; {got}",
            )
        if diff is not None:
            return (
                "prefix_changed",
                f"block {diff} differs from {prev.name}'s prompt, so its entry at block "
                f"{prev.top} no longer matches; {got}",
            )
        if prev.top > last_bp:
            return (
                "lookback_exceeded",
                f"the entry from {prev.name} ends at block {prev.top}, after this request's last "
                f"breakpoint (block {last_bp}), and the lookback only searches backwards; {got}",
            )
        window = self.lookback_blocks
        return (
            "lookback_exceeded",
            f"the entry from {prev.name} at block {prev.top} is {last_bp - prev.top} blocks "
            f"before the breakpoint at block {last_bp}, beyond the {window}-block lookback; {got}",
        )

    def _sweep(self, time: float) -> None:
        """Drop expired entries; runs when the store has doubled, so it is amortised O(1)."""
        for store in self._stores.values():
            for h in [h for h, e in store.items() if e.expiry <= time]:
                del store[h]
        self._entries = sum(len(s) for s in self._stores.values())
        self._sweep_at = max(4096, 2 * self._entries)


def _first_difference(old: Sequence[int], new: Sequence[int], upto: int) -> int | None:
    """First block index <= ``upto`` where two prompts differ, or None if they agree.

    Prefix hashes agree up to the first changed block and differ from there on, so a binary
    search over them finds it in O(log n).
    """
    if old[upto] == new[upto]:
        return None
    lo, hi = 0, upto
    while lo < hi:
        mid = (lo + hi) // 2
        if old[mid] == new[mid]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _format_duration(seconds: float) -> str:
    """'7m 12s', '1h 5m', '45s'."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    parts = [f"{h}h"] if h else []
    if m or (h and sec):
        parts.append(f"{m}m")
    if sec:
        parts.append(f"{sec}s")
    return " ".join(parts)


def rolling_hashes(block_keys: Sequence[int], seed: int) -> list[int]:
    """Prefix hashes for ``CacheSimulator.request``: item i identifies blocks 0..i.

    ``block_keys`` must be stable ints per block content, e.g. ``block_key(text)``: Python's
    ``hash()`` of a str is randomised per process, so never pass ``hash(text)``. The result is
    deterministic within one Python version (tuples of ints hash without randomisation). To
    extend the hashes of a growing prompt without rehashing it, pass the new blocks' keys with
    ``seed=previous[-1]``. Put anything that changes the whole prefix (tool set, thinking
    flags) in ``seed``; the simulator already keeps models apart.
    """
    out: list[int] = []
    append = out.append
    h = seed
    for key in block_keys:
        h = hash((h, key))
        append(h)
    return out


def block_key(text: str) -> int:
    """Stable 64-bit content key of one block (BLAKE2b), the same in every process."""
    # surrogatepass: transcripts can carry lone surrogates from JSON \\ud800 escapes.
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")
