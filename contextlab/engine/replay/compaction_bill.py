"""A compaction's own API call, billed as Claude Code pays it, whoever wrote the summary.

Claude Code summarizes by sending the whole conversation once more (a fork that shares the
main prompt's cache prefix, ``compact_cache_prefix``) and receiving the summary as output. So
every compaction of a replay, recorded or simulated, costs:

* input — the context where it compacted (Claude Code's own count: ``preTokens`` where the
  recording has it, else the decision count), at its cache state: what the previous request of
  the thread cached is read when that request was sent within the TTL, the rest is written;
* output — the summary (its calibrated size), written by Claude Code's model.

The summarizer the replay used (offline extractive text, an LLM, a recorded summary reused)
only supplies the text: its own cost is ContextLab's, not the session's. The bill is attached
to the ``compacted`` event as ``call`` and summed as ``compaction_call_cost_usd``.
"""

from __future__ import annotations

from typing import Any

from contextlab.engine.measures.cost import PricingTable, request_cost
from contextlab.engine.measures.prompt_cache import TTL_SECONDS


def bill_compaction(
    event: dict[str, Any],
    *,
    model: str | None,
    previous_prompt: int | None,
    gap_seconds: float | None,
    ttl: str,
    summary_tokens: int,
    system_tokens: int,
    pricing: PricingTable,
) -> dict[str, Any]:
    """The ``call`` of one ``compacted`` event: tokens read, written and output, and its cost.

    ``previous_prompt`` is the thread's previous request's prompt (None at its first),
    ``gap_seconds`` the time from that request to the compaction, ``system_tokens`` the
    static system prompt the cache model keeps warm across requests (0 where it expired too).
    """
    context = int(event.get("pre_tokens") or event.get("decision_tokens") or 0)
    warm = (
        previous_prompt is not None
        and gap_seconds is not None
        and 0 <= gap_seconds <= TTL_SECONDS.get(ttl, TTL_SECONDS["5m"])
    )
    # past the TTL only the static system prompt the caller says survives reads (other
    # sessions keep it warm: ``CacheEstimator.system_survives``), 0 where it did not
    read = min(previous_prompt or 0, context) if warm else min(system_tokens, context)
    write = context - read
    output = max(0, summary_tokens)
    cost = request_cost(
        model,
        uncached=0,
        cache_read=read,
        cache_write_5m=write if ttl != "1h" else 0,
        cache_write_1h=write if ttl == "1h" else 0,
        output=output,
        pricing=pricing,
    )
    return {
        "context_tokens": context,
        "read": read,
        "write": write,
        "output": output,
        "cache": "warm" if warm else "cold",
        "cost_usd": round(cost, 6),
    }
