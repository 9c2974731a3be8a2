"""The flat prompt (system prefix, head, messages) as prompt-cache blocks, kept in step with a view."""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

from contextlab.engine.measures.tokens import text_key
from contextlab.engine.pipeline.base import WHOLE_MESSAGE, View

#: New blocks past which ``CacheBlocks.sync`` takes them as a rebuild (walks at C speed) rather
#: than an append (one walk in Python)
REBUILD_BLOCKS = 8


class CacheBlocks:
    """The flat prompt (system prefix, head, messages) as cache blocks, kept in step with a view.

    Per block: a content key, display tokens (raw and calibrated) and the rolling prefix hash.
    Only the part after the first change is rebuilt, so a request that just appends messages
    costs only its new blocks.
    """

    def __init__(self, system_keys: list[int]) -> None:
        self.system_keys = system_keys
        self.keys: list[int] = []
        self.raw: list[int] = []
        self.cal: list[int] = []
        self.hashes: list[int] = []
        #: running sums of ``cal`` after the system blocks (which the estimator sets per
        #: request): ``sums[k]`` is the tokens of blocks ``len(system_keys)`` to that + k
        self.sums: list[int] = []
        self.first_block: dict[int, int] = {}
        self.built_end = 0
        self.changed_from = 0
        self.ratio = -1.0
        self.seed = 0

    def sync(self, view: View, ratio: float, seed: int) -> None:
        if view.dirty_from == -1 or not self.keys:
            self._reset(view)
        elif view.dirty_from is not None and view.dirty_from < self.built_end:
            cut_msg = max(view.dirty_from, view.start)
            pos = next(
                (
                    self.first_block[i]
                    for i in range(cut_msg, self.built_end)
                    if i in self.first_block
                ),
                None,
            )
            if pos is not None:
                del self.keys[pos:]
                del self.raw[pos:]
                for i in range(cut_msg, self.built_end):
                    self.first_block.pop(i, None)
                self.changed_from = min(self.changed_from, pos)
            self.built_end = cut_msg
        view.dirty_from = None
        self._extend(view, view.end)
        if ratio != self.ratio or seed != self.seed:
            self.ratio, self.seed, self.changed_from = ratio, seed, 0
        start = self.changed_from
        if len(self.keys) < start:  # (``min``, inline: this runs for every request)
            start = len(self.keys)
        del self.cal[start:]
        if start < len(self.hashes):
            # a new list, not a cut: the cache model keeps the previous request's list
            # (``hashes_append_only``), whose items must not change
            self.hashes = self.hashes[:start]
        system = len(self.system_keys)
        if start < system:
            self.sums.clear()
        else:
            del self.sums[start - system :]
        cal, hashes, sums, keys, raw = self.cal, self.hashes, self.sums, self.keys, self.raw
        prev = hashes[-1] if hashes else seed
        total = sums[-1] if sums else 0
        if len(keys) - start > REBUILD_BLOCKS:
            # a rebuild (a new ratio, a change early in the prompt): each list in a walk of its
            # own, at C speed where it can be
            cal.extend([round(ratio * t) for t in raw[start:]])
            append = hashes.append
            for key in keys[start:]:
                prev = hash((prev, key))
                append(prev)
            running = accumulate(cal[max(start, system) :], initial=total)
            next(running)  # (``total`` itself, already the last of ``sums``)
            sums.extend(running)
        else:
            # a request that appends adds a few blocks: their calibrated tokens, prefix hashes
            # and running sums in one walk (three would cost more than their work)
            for i in range(start, len(keys)):
                tok = round(ratio * raw[i])
                cal.append(tok)
                prev = hash((prev, keys[i]))
                hashes.append(prev)
                if i >= system:
                    total += tok
                    sums.append(total)
        self.changed_from = len(keys)

    def total(self) -> int:
        """The tokens of every block of ``cal`` (the system blocks as the estimator set them)."""
        system = len(self.system_keys)
        return sum(self.cal[:system]) + (self.sums[-1] if self.sums else 0)

    def within(self, budget: int) -> int:
        """How many leading blocks of ``cal`` fit in ``budget`` tokens (the one that crosses
        it counts when more than half of it fits; the read is then capped at the budget), by
        bisection: a request's cost must not grow with the prompt's length."""
        cal, system = self.cal, len(self.system_keys)
        total = 0
        for n in range(system if system < len(cal) else len(cal)):  # (``min``, inline)
            if total + cal[n] > budget:
                return n + 1 if budget - total > cal[n] / 2 else n
            total += cal[n]
        k = bisect_right(self.sums, budget - total)
        if k == len(self.sums):
            return len(cal)
        before = total + (self.sums[k - 1] if k else 0)
        return system + k + 1 if budget - before > cal[system + k] / 2 else system + k

    def _reset(self, view: View) -> None:
        self.keys = list(self.system_keys)
        self.raw = [0] * len(self.system_keys)
        self.first_block = {}
        self.changed_from = 0
        for item in view.head:
            for block in item.message.blocks:
                self.keys.append(text_key(block.type + "\x00" + block.text))
                self.raw.append(view.counter.count(block.text) if block.tok < 0 else block.tok)
        self.built_end = view.start

    def _extend(self, view: View, end: int) -> None:
        keys, raw = self.keys, self.raw
        # ``view.is_removed`` and the override look-ups inline: this runs for every new block
        # of every request, and most views have no override at all
        hidden, overrides, messages = view.hidden, view.overrides, view.messages
        base_block, base_text, first_block = view.base_block, view.base_text, self.first_block
        restores = view.restores
        for i in range(self.built_end, end):
            if i in hidden:
                continue
            whole = overrides.get((i, WHOLE_MESSAGE)) if overrides else None
            if whole is not None and whole.text is None:
                continue  # removed
            msg = messages[i]
            if msg.role == "system":
                continue
            first_block[i] = len(keys)
            if whole is not None:
                keys.append(whole.key)
                raw.append(whole.tok)
                continue
            for j, block in enumerate(msg.blocks):
                ov = overrides.get((i, j)) if overrides else None
                # ``view.base_block`` inline for a block measured already and not restored
                # (every block of a recorded replay's pass with results)
                base_tok, base_key = block.tok, block.key
                if (
                    base_tok < 0
                    or block.rough < 0
                    or base_key < 0
                    or (restores and base_text(i, j, block) is not None)
                ):
                    base_tok, _, base_key = base_block(i, j, block)
                if ov is None:
                    keys.append(base_key)
                    raw.append(base_tok)
                else:
                    # a cache edit deletes server-side and keeps the cached prefix intact
                    keys.append(base_key if ov.cache_preserving else ov.key)
                    raw.append(ov.tok)
        if end > self.built_end:  # (``max``, inline)
            self.built_end = end
