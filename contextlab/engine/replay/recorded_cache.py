"""A request's prompt cache as the recording shows it, beside the cache model's estimate.

Recorded facts first: where a request's usage is recorded, a recorded replay's ``cache`` is
that usage (read, 5-minute and 1-hour writes, uncached input) with ``"source": "recorded"``,
and its hit or miss is the recording's; the cache model's own figures stay beside it as
``cache_estimate`` (``"source": "estimate"``). The recording says how much was read, never why
less was read: the cause of a recorded miss is the cache model's, an inference.

Hit or miss, from the recording: a hit read at least half of the prompt from the cache
(``HIT_SHARE``, the same line ``evaluation.MISS_SHARE`` draws), or read at least what the
cache model expected to find there (``EXPECTED_SHARE`` of it: a prompt that grew by a large
tool result reads all that was cached and still less than half). Anything else that read less
is a miss.

The disagreement flag: estimate and recording disagree when one calls the request a hit and
the other a miss, or when their cache reads differ by more than ``DISAGREE_MARGIN`` (10 %) of
the recorded prompt. Why 10 %: a read gap moves that share of the prompt between the read
price (0.1× input) and the write price (1.25×), so 10 % of the prompt moves the request's
cost by more than a tenth of the prompt at input price, over twice what the token count's own
error can (p90 target 4 %, × 1.25 at most); a flagged request is one the cache model, not the
token count, got wrong, and a what-if leaning on that model there is less to be trusted.
"""

from __future__ import annotations

from contextlab.engine.input.model import Usage
from contextlab.engine.results import CacheRow

from .cache_blocks import CacheBlocks

__all__ = [
    "DISAGREE_MARGIN",
    "EXPECTED_SHARE",
    "HIT_SHARE",
    "MISS_REASONS",
    "cache_disagreement",
    "recorded_row",
]

#: a recorded read of at least this share of the prompt is a hit
HIT_SHARE = 0.5
#: ...as is one of at least this share of what the cache model expected to read
EXPECTED_SHARE = 0.95
#: estimate and recording disagree when their reads differ by more than this share of the prompt
DISAGREE_MARGIN = 0.10
#: the cache model's reasons after which a request reads less than was cached before it
MISS_REASONS = frozenset(
    {
        "first_request",
        "ttl_expired",
        "prefix_changed",
        "lookback_exceeded",
        "model_changed",
        "server_miss",
    }
)


def recorded_row(usage: Usage, estimate: CacheRow, blocks: CacheBlocks) -> CacheRow:
    """What the recording shows of the request's cache (``usage.prompt_total`` > 0); the
    estimate gives the block structure and, for a miss, the inferred cause."""
    read, write, uncached = usage.cache_read, usage.cache_write, usage.input
    write_1h = usage.cache_write_1h or 0
    write_5m = write - write_1h
    total = usage.prompt_total
    expected = int(estimate["read"]) + int(estimate.get("server_miss_tokens") or 0)
    hit = read >= HIT_SHARE * total or (expected > 0 and read >= EXPECTED_SHARE * expected)
    est_reason = str(estimate["reason"])
    if hit:
        reason = "hit"
        detail = f"recorded: {read:,} of {total:,} prompt tokens read from the cache"
    else:
        if est_reason in MISS_REASONS:
            reason, cause = est_reason, str(estimate["detail"])
        elif est_reason == "hit" or read > 0:
            # the model found everything cached; the recording read less: the server had
            # dropped the entry (nothing in the transcript says why)
            reason = "server_miss"
            cause = (
                f"the cache model expected {expected:,} tokens read with nothing changed "
                "before it; the server no longer had the entry"
            )
        else:
            reason, cause = est_reason, str(estimate["detail"])
        detail = (
            f"recorded: {read:,} of {total:,} prompt tokens read from the cache; "
            f"cause (inferred): {cause}"
        )
    return {
        "read": read,
        "write": write,
        "write_5m": write_5m,
        "write_1h": write_1h,
        "uncached": uncached,
        "hit_blocks": blocks.within(read) if read else 0,
        "blocks": int(estimate["blocks"]),
        "hit": hit,
        "reason": reason,
        "detail": detail,
        "server_miss_tokens": 0,
        "source": "recorded",
    }


def cache_disagreement(recorded: CacheRow, estimate: CacheRow) -> tuple[float, bool]:
    """(estimated read − recorded read as a share of the recorded prompt, flag): flagged when
    hit and miss differ or the gap is beyond ``DISAGREE_MARGIN``."""
    total = int(recorded["read"]) + int(recorded["write"]) + int(recorded["uncached"])
    gap = (int(estimate["read"]) - int(recorded["read"])) / total if total else 0.0
    flagged = bool(recorded["hit"]) != bool(estimate["hit"]) or abs(gap) > DISAGREE_MARGIN
    return round(gap, 4), flagged
