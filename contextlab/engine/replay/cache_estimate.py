"""The prompt cache of one thread's requests: what each read, wrote and sent uncached.

The cache model (``measures.prompt_cache``) is fed the request's flat prompt as blocks
(``cache_blocks``), calibrated, with the unseen system prefix first; what the recording shows
and the transcript cannot explain is taken from it: what the file's first request found warm,
and the server-side misses of recorded mode (met again at the same request in what-if).
"""

from __future__ import annotations

from functools import lru_cache

from contextlab.engine.config.fields import PipelineConfig
from contextlab.engine.input.model import Usage
from contextlab.engine.input.session import RequestInfo, Thread
from contextlab.engine.input.timestamps import epoch_seconds as parse_time
from contextlab.engine.measures.anchors import ThreadAnchors
from contextlab.engine.measures.model_limits import model_info
from contextlab.engine.measures.prompt_cache import CacheResult, CacheSimulator
from contextlab.engine.measures.tokens import Calibration, text_key
from contextlab.engine.pipeline.base import View
from contextlab.engine.results import CacheRow

from .cache_blocks import CacheBlocks

#: Recorded requests, none reading or writing the cache, that show caching was off.
CACHING_OFF_EVIDENCE = 3


@lru_cache(maxsize=256)
def model_key(model: str) -> int:
    """A model's key: the seed of its prompts' block hashes (hashed once, not per request)."""
    return text_key(model)


def _caching_off(thread: Thread) -> bool:
    """Whether ``thread``'s recorded requests (at least ``CACHING_OFF_EVIDENCE``) never read
    or wrote the cache; the scan stops at the first that did (most threads: their first)."""
    recorded = 0
    for m in thread.messages:
        usage = m.usage
        if usage is None or usage.prompt_total <= 0:
            continue
        if usage.cache_read or usage.cache_write:
            return False
        recorded += 1
    return recorded >= CACHING_OFF_EVIDENCE


class CacheEstimator:
    """The prompt cache as one thread's requests meet it, request after request."""

    #: per model: its prompts' hash seed, its cache scope and its minimum cacheable prefix (what
    #: ``estimate`` needs of the model, found once, not per request); made on first use, so an
    #: estimator pickled before it existed (a checkpoint, a live state) makes its own
    _model_terms: dict[str | None, tuple[int, str, int]] | None = None

    def __init__(
        self,
        *,
        thread: Thread,
        view: View,
        config: PipelineConfig,
        mode: str,
        sim: CacheSimulator | None,
        anchors: ThreadAnchors | None,
        server_misses: dict[int, int],
    ) -> None:
        self.thread = thread
        self.view = view
        self.config = config
        self.mode = mode
        # a compaction fork sends the main conversation's system prompt, tools and model
        self.prompt_family = (
            "main" if thread.kind in ("main", "branch") or thread.compaction_fork else "agent"
        )
        #: the session's cache (threads sharing a prompt share entries), or this thread's own
        self.sim = sim or CacheSimulator(
            lookback_blocks=config.cache_lookback_blocks,
            lookback_enabled=config.cache_lookback_enabled,
        )
        # Threads of one family share a system prompt: a subagent can read the prefix an
        # earlier subagent of the same session wrote moments before (it cannot see the main's).
        self.blocks = CacheBlocks(
            [
                text_key(f"system-static:{self.prompt_family}"),
                text_key(f"system-dynamic:{thread.id}"),
            ]
        )
        self.anchors = anchors
        #: what-if: message index → the cache read the recording fell to there with nothing
        #: changed before it (a server-side miss, measured in recorded mode and carried over)
        self.server_misses = server_misses
        #: the recording never read or wrote the prompt cache over several requests: caching
        #: was off (``DISABLE_PROMPT_CACHING``, a provider without it), every token uncached
        self.caching_off = _caching_off(thread)
        self.segment = 0
        #: the thread's first recorded cache read: an upper bound of the static system part
        self.system_level: int | None = None
        #: the recorded cache read of the thread's previous request with usage
        self.previous_read: int | None = None
        #: the highest recorded read that broke off inside the unseen prefix: where this
        #: session's own system-prompt entry ends (``_learn_session_level``)
        self.session_level: int | None = None
        #: the largest unseen prefix (tools, system prompt, user context) the thread's
        #: calibration has given a request: a restarted segment's calibration can shrink it
        self.unseen_bound = 0
        #: when the thread's previous request was sent (None before its first)
        self.previous_sent: float | None = None

    def ttl(self, usage: Usage | None, previous: str) -> str:
        """The cache TTL a request wrote with: the config's, else what its usage shows, else the
        previous request's."""
        setting = self.config.cache_ttl
        if setting in ("5m", "1h"):
            return setting
        if usage is not None:
            if usage.cache_write_1h:
                return "1h"
            if usage.cache_write_5m:
                return "5m"
        return previous

    def system_tokens(self, cal: Calibration) -> int:
        """The static system prompt's tokens as ``estimate`` models them (what stays cached
        across requests, bounded by the thread's first recorded read)."""
        prefix = round(cal.prefix_tokens)
        prefix = prefix if prefix > 0 else 0  # (``max(0, …)``: a call per request)
        system = round(prefix * self.config.cache_system_prefix_share)
        if self.system_level is None:
            return system
        # a read that ends inside the unseen prefix came from another session's entry, and
        # such an entry ends at the system breakpoint: there it is the static part itself
        return self.system_level if self.system_level <= prefix else min(system, self.system_level)

    def system_survives(self, gap: float | None) -> bool:
        """Whether the static system prompt is still cached for a request sent ``gap`` seconds
        after the thread's previous one (None: its first), whatever the thread's own entries did
        (always with ``cache_global_prefix_warm``).

        A thread whose first request read a warm prefix shares it with the user's other
        sessions, which keep it alive while the user works. In the corpus, of the requests sent
        after their thread's own entries expired, those of threads that started warm read the
        system prompt back in 3 of 4 cases after a break under an hour and 2 of 5 past it;
        those of threads that started cold, in 1 of 15. ``cache_system_survival_seconds``
        (an hour) is fitted leave-one-source-out on the estimate's price-free cost (11 of 13
        held-out sources pick it). A compaction call sent after such a break reads the same.
        """
        if self.config.cache_global_prefix_warm:
            return True
        window = self.config.cache_system_survival_seconds
        return window > 0 and self.system_level is not None and gap is not None and gap <= window

    def estimate(
        self,
        cal: Calibration,
        model_tokens: int,
        req: RequestInfo,
        now: float,
        ttl: str,
        anchored: int,
    ) -> CacheRow:
        """Request ``req``'s prompt as cache reads, writes and uncached tokens (they add up to
        ``model_tokens``); ``anchored`` is the part of it that anchors add to the prefix."""
        view = self.view
        blocks = self.blocks
        if self.caching_off:
            return {
                "read": 0,
                "write": 0,
                "write_5m": 0,
                "write_1h": 0,
                "uncached": model_tokens,
                "hit_blocks": 0,
                "blocks": 0,
                "hit": False,
                "reason": "caching_off",
                "detail": "the recording never read or wrote the prompt cache: caching was off",
                "server_miss_tokens": 0,
                "source": "estimate",
            }
        message = req.message
        model = message.model or ""
        known = self._model_terms
        if known is None:
            known = self._model_terms = {}
        terms = known.get(message.model)
        if terms is None:
            terms = known[message.model] = (
                model_key(model),
                f"{model}|{self.prompt_family}",
                model_info(message.model).min_cacheable_tokens,
            )
        seed, cache_key, min_cacheable = terms
        segment = self.anchors.segment[req.index] if self.anchors else 0
        if segment != self.segment:
            # a restart rebuilds the dynamic system prompt (environment, git status, session
            # start): the static prefix stays cached, everything after it is written again
            self.segment = segment
            blocks.system_keys[1] = text_key(f"system-dynamic:{self.thread.id}:{segment}")
            blocks.keys = []
        blocks.sync(view, cal.ratio, seed)
        # the request was sent when the message before it was written; its response began later
        sent = (
            parse_time(self.thread.messages[req.position - 1].timestamp) if req.position else None
        )
        ready = now
        # (``min``/``max`` as comparisons in this per-request path: a builtin call each)
        now = sent if sent is not None and sent < now else now
        prefix = round(cal.prefix_tokens)
        prefix = prefix if prefix > 0 else 0
        usage = message.usage
        if req.index == 0 and usage is not None and usage.cache_read > 0:
            # what the first request found warm (other sessions, an earlier process) holds at
            # least the part before the system breakpoint, so it bounds the modeled share
            self.system_level = usage.cache_read
        system = self.system_tokens(cal)
        tokens = blocks.cal
        # earlier history, a segment's prefix change and unrecorded input sit with the prefix
        rest = prefix - system + anchored
        tokens[0], tokens[1] = system, rest if rest > 0 else 0
        prefix_hashes = blocks.hashes
        last = len(tokens) - 1
        # the system breakpoint(s): org mode marks the CLI prefix and the rest separately, but both
        # sit inside the one unseen-prefix block we can model, so one breakpoint stands for them
        breakpoints = [0, last] if last > 0 else [0]
        gap = now - self.previous_sent if self.previous_sent is not None else None
        self.previous_sent = now
        warm_blocks = 1 if self.system_survives(gap) else 0
        warm_read: int | None = None
        if req.index == 0 and usage is not None and usage.cache_read > 0:
            warm_read = usage.cache_read
            # file start: what was cached before this file (an earlier process, another
            # session) is unknowable from it, so the first recorded read anchors it
            warm_blocks = max(warm_blocks, blocks.within(usage.cache_read))
            if 0 < warm_blocks - 1 < last:
                breakpoints.insert(1, warm_blocks - 1)
        res = self.sim.request(
            time=now,
            model=cache_key,
            prefix_hashes=prefix_hashes,
            block_tokens=tokens,
            breakpoints=breakpoints,
            ttl=ttl,
            min_cacheable_tokens=min_cacheable,
            warm_blocks=warm_blocks,
            label=f"request {req.index + 1}",
            ready_time=ready,
            total_tokens=blocks.total(),
            hashes_append_only=True,
        )
        read, write, uncached = res.read, res.write, res.uncached
        if warm_read is not None and read > warm_read:
            # the file-start anchor reads what was warm, no more
            write += read - warm_read
            read = warm_read
        reason: str = res.reason
        detail, hit_blocks = res.detail, res.hit_block
        if (
            reason == "prefix_changed"
            and self.session_level is not None
            and hit_blocks <= len(blocks.system_keys)
            and read < self.session_level
        ):
            # The messages changed (a compaction, a restart, a rewind) while the thread's
            # entries were alive: the read stops at the last system-prompt breakpoint, and this
            # session's own entry there (refreshed by every request that read through it) is as
            # long as the recording showed it, not the modeled share of the prefix. A TTL
            # expiry is left alone: there only what other sessions keep warm survives (one
            # session read 28,083 tokens back after each of two compactions, 10,947 after a
            # 2-hour break).
            lift = min(self.session_level, read + write) - read
            read, write = read + lift, write - lift
            hit_blocks = max(hit_blocks, blocks.within(read))
            detail = (
                f"{detail}; the session's own system-prompt entry, {read:,} tokens as the "
                "recording showed it at an earlier break, is still cached and read"
            )
        server_miss = 0
        level = self._server_miss_level(req.position, usage, res) if warm_read is None else None
        if usage is not None and usage.prompt_total > 0:
            unseen = tokens[0] + tokens[1]
            if unseen > self.unseen_bound:
                self.unseen_bound = unseen
            if 0 < usage.cache_read <= self.unseen_bound:  # (the learning's own first test)
                self._learn_session_level(usage.cache_read)
            self.previous_read = usage.cache_read
        if level is not None and read > level:
            server_miss = read - level
            write += server_miss
            read = level
            hit_blocks = min(hit_blocks, blocks.within(level))
            reason = "server_miss"
            detail = (
                f"the recorded usage read only {level:,} tokens from the cache where this model "
                f"expected {level + server_miss:,}, with nothing changed before it: the server no "
                "longer had the entry (Claude Code's own detector calls such drops likely "
                "server-side)"
            )
        # per-block rounding: settle the difference with the calibrated total in the tail
        diff = model_tokens - (read + write + uncached)
        if uncached + diff >= 0:
            uncached += diff
        else:
            write = max(0, write + uncached + diff)
            uncached = 0
            read = model_tokens - write
        return {
            "read": read,
            "write": write,
            "write_5m": write if ttl == "5m" else 0,
            "write_1h": 0 if ttl == "5m" else write,
            "uncached": uncached,
            "hit_blocks": hit_blocks,
            "blocks": len(tokens),
            "hit": reason == "hit",
            "reason": reason,
            "detail": detail,
            "server_miss_tokens": server_miss,
            "source": "estimate",
        }

    def _learn_session_level(self, read: int) -> None:
        """Learn where this session's system-prompt entry ends from a recorded read, for the
        requests after it.

        A recorded read that fell from the previous request's by a break (``_is_break``) and
        stops inside the unseen prefix (``unseen_bound``: tools, system prompt, user context)
        read an entry that ends at a system-prompt breakpoint. Claude Code marks one or two
        there (pipeline-spec §6.2, ``splitSysPromptPrefix``): the global-scope static part, or,
        with MCP tools or a third-party provider, the CLI prefix and everything after it. A
        break on the server's side can fall to the shorter, shared one (every session keeps it
        warm), a compaction reads back the session's own, so the highest such read is the
        session's. In the corpus it recurs to the token: 28,083 in one session at a server-side
        break and at two compactions, 35,707 in another at two compactions and a break, 29,760
        at three compactions of a third.
        """
        if 0 < read <= self.unseen_bound and self._is_break(read):
            self.session_level = max(self.session_level or 0, read)

    def _is_break(self, read: int) -> bool:
        """Whether a recorded read fell below the thread's previous one by a cache break as
        Claude Code's detector counts one (at least ``cache_break_min_miss_tokens`` and more
        than ``cache_break_min_drop_pct`` of the previous read)."""
        previous = self.previous_read
        if previous is None:
            return False
        config = self.config
        least, share = (
            config.cache_break_min_miss_tokens,
            config.cache_break_min_drop_pct * previous,
        )
        return previous - read >= (share if share > least else least)  # (``max``, inline)

    def _server_miss_level(
        self, position: int, usage: Usage | None, res: CacheResult
    ) -> int | None:
        """The cache read a server-side miss capped this request at, None without one.

        Recorded mode measures it as Claude Code's own break detector does: the recorded
        cache read fell below the previous request's by a break (at least
        ``cache_break_min_miss_tokens`` and more than ``cache_break_min_drop_pct`` of it), and
        the cache model found nothing changed before it (a hit). Nothing in the transcript
        explains such a drop, so, like unrecorded input, it is taken from the recording, and a
        what-if replay meets it at the same request (the server dropped the entry at that
        moment, whatever the prompt held).
        """
        config = self.config
        if not config.cache_recorded_server_misses:
            return None
        if self.mode == "whatif":
            return self.server_misses.get(position)
        previous = self.previous_read
        if res.reason != "hit" or usage is None or usage.prompt_total <= 0 or previous is None:
            return None
        return usage.cache_read if self._is_break(usage.cache_read) else None
