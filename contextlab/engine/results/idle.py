"""Compact now or wait: for each idle gap longer than the cache keeps an entry, what compacting
at the gap (Claude Code's idle compaction, 2.1.299: ``idleCompaction``, which compacts while the
cache is still warm and needs the 1-hour TTL) would have cost against what was paid.

Per gap, on the request after it (``after``) and the one before it (``before``):

* paid — ``after``'s prompt as it was billed (recorded where recorded): the expired cache
  written again whole.
* compact at the gap — the summary call (``before``'s prompt read from the still-warm cache,
  the summary as output), then ``after``'s prompt rebuilt small (the post-compaction context
  plus what the new turn added), written at the 1-hour rate.
* afterwards — every later request of the thread up to its next compaction, or the next such
  pause (where the question is asked again), reads the difference between the two contexts
  less from the cache: a saving on the compacting side. The pauses' figures so add up: compacting
  at every pause (``saving_usd``), or only where it wins (``best_saving_usd``).

The post-compaction context and the summary's size are the session's own where it compacted
(the median request after a compaction, the median summary call's output), else the session's
first prompt (system prompt, tools, CLAUDE.md: a conversation starting afresh) plus
``ASSUMED_SUMMARY_TOKENS``, labelled assumed. Everything is an estimate; compacting
also costs history the model no longer sees, which no dollar figure says.
"""

from __future__ import annotations

import statistics
from typing import TypedDict

from contextlab.engine.measures.cost import PricingTable, load_pricing, request_cost
from contextlab.engine.measures.prompt_cache import TTL_SECONDS
from contextlab.engine.results import CacheRow, RequestRow, ResultJson
from contextlab.engine.results.navigator import gaps

#: a summary's size when the session never compacted (Claude Code's summaries of the corpus run
#: 2,500–8,000 output tokens)
ASSUMED_SUMMARY_TOKENS = 4_000


class IdleGap(TypedDict):
    #: position in ``result["requests"]`` of the request after the gap (pages add 1)
    request: int
    before: int
    gap_seconds: float
    #: the TTL the cache entry had ("5m" or "1h")
    ttl: str
    context_tokens: int
    #: the prompt after the gap, as billed (USD, input side only)
    paid_usd: float
    #: the summary call at the gap
    summary_call_usd: float
    #: the smaller prompt after the gap, written
    smaller_prompt_usd: float
    #: what the later requests up to the next compaction would have read less
    later_reads_saved_usd: float
    later_requests: int
    #: paid − (summary call + smaller prompt) + later reads saved; positive: compacting saves
    saving_usd: float
    #: the 1-hour TTL alone would have kept the entry (a 5-minute entry, a gap under an hour)
    one_hour_keeps_it: bool


class IdleAnswer(TypedDict):
    gaps: list[IdleGap]
    #: compacting at every pause (each pause's later reads counted up to the next pause)
    saving_usd: float
    #: compacting only at the pauses where it wins
    best_saving_usd: float
    #: gaps where compacting would have been cheaper
    compact_wins: int
    post_compaction_tokens: int
    summary_tokens: int
    #: True when the two sizes above are the session's own, False when assumed
    sizes_recorded: bool
    verdict: str


def _prompt(cache: CacheRow) -> int:
    return int(cache["read"]) + int(cache["write"]) + int(cache["uncached"])


def _input_cost(row: RequestRow, pricing: PricingTable) -> float:
    cache = row["cache"]
    return request_cost(
        row["model"],
        uncached=int(cache["uncached"]),
        cache_read=int(cache["read"]),
        cache_write_5m=int(cache["write_5m"]),
        cache_write_1h=int(cache["write_1h"]),
        output=0,
        pricing=pricing,
    )


def _compacted(row: RequestRow) -> bool:
    return any(
        e.get("step") == "autocompact" and e.get("action") == "compacted" for e in row["events"]
    )


def _sizes(rows: list[RequestRow], start_tokens: int) -> tuple[int, int, bool]:
    """(post-compaction context, summary output, whether both are the session's own)."""
    after: list[int] = []
    outputs: list[int] = []
    for row in rows:
        if not _compacted(row):
            continue
        for event in row["events"]:
            call = event.get("call")
            if event.get("step") == "autocompact" and isinstance(call, dict):
                outputs.append(int(call.get("output") or 0))
        # the compacting request's own prompt is the rebuilt one (summary, restored files)
        after.append(_prompt(row["cache"]))
    summary = int(statistics.median(outputs)) if outputs else ASSUMED_SUMMARY_TOKENS
    if after:
        return int(statistics.median(after)), summary, bool(outputs)
    return start_tokens + summary, summary, False


def idle_compaction(result: ResultJson, pricing: PricingTable | None = None) -> IdleAnswer:
    """Every idle gap of the main conversation longer than its cache TTL, priced both ways."""
    pricing = pricing or load_pricing()
    main = result["session"]["threads"][0]["id"] if result["session"]["threads"] else "main"
    positions = [n for n, row in enumerate(result["requests"]) if row["thread"] == main]
    rows = [result["requests"][n] for n in positions]
    # a conversation starting afresh: the first request's prompt (system, tools, CLAUDE.md)
    start = _prompt(rows[0]["cache"]) if rows else 0
    post, summary, recorded = _sizes(rows, start)
    gap_of = gaps(rows)
    pauses = [
        k
        for k in range(1, len(rows))
        if (gap := gap_of[k]) is not None
        and gap > TTL_SECONDS.get(rows[k - 1]["ttl"] or "5m", TTL_SECONDS["5m"])
        # nothing to gain where the context is already as small as a compaction's
        and _prompt(rows[k - 1]["cache"]) > post
    ]
    out: list[IdleGap] = []
    ends = [*pauses[1:], len(rows)] if pauses else []
    for k, upto in zip(pauses, ends, strict=True):
        gap, before, after = float(gap_of[k] or 0.0), rows[k - 1], rows[k]
        ttl = before["ttl"] or "5m"
        context = _prompt(before["cache"])
        paid = _input_cost(after, pricing)
        call = request_cost(
            before["model"],
            uncached=0,
            cache_read=context,
            cache_write_5m=0,
            cache_write_1h=0,
            output=summary,
            pricing=pricing,
        )
        added = max(0, _prompt(after["cache"]) - context)
        smaller = request_cost(
            after["model"],
            uncached=0,
            cache_read=0,
            cache_write_5m=0,
            cache_write_1h=post + added,
            output=0,
            pricing=pricing,
        )
        later = 0
        saved = 0.0
        # up to the next compaction, or the next pause (where the question is asked again)
        for row in rows[k + 1 : upto]:
            if _compacted(row):
                break
            price, _, _ = pricing.price_for(row["model"])
            saved += (context - post) * price.cache_read / 1_000_000
            later += 1
        saving = paid - (call + smaller) + saved
        out.append(
            {
                "request": positions[k],
                "before": positions[k - 1],
                "gap_seconds": round(gap, 1),
                "ttl": ttl,
                "context_tokens": context,
                "paid_usd": round(paid, 6),
                "summary_call_usd": round(call, 6),
                "smaller_prompt_usd": round(smaller, 6),
                "later_reads_saved_usd": round(saved, 6),
                "later_requests": later,
                "saving_usd": round(saving, 6),
                "one_hour_keeps_it": ttl != "1h" and gap <= TTL_SECONDS["1h"],
            }
        )
    total = sum(g["saving_usd"] for g in out)
    best = sum(g["saving_usd"] for g in out if g["saving_usd"] > 0)
    wins = sum(1 for g in out if g["saving_usd"] > 0)
    if not out:
        verdict = "No pause outlived the cache with a context worth compacting."
    elif wins == 0:
        verdict = f"Waiting was cheaper at every pause (by ${-total:.4f} in all, estimate)."
    else:
        every = f"saves ${total:.4f}" if total >= 0 else f"costs ${-total:.4f} more than waiting"
        verdict = (
            f"Compacting at every pause {every}; only at the {wins} of {len(out)} where it "
            f"wins, ${best:.4f} (estimates)."
        )
    return {
        "gaps": out,
        "saving_usd": round(total, 6),
        "best_saving_usd": round(best, 6),
        "compact_wins": wins,
        "post_compaction_tokens": post,
        "summary_tokens": summary,
        "sizes_recorded": recorded,
        "verdict": verdict,
    }
