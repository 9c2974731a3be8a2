"""The requests that matter in a replay, as sentences: the explorer's event navigator.

``request_events`` walks a result's request rows once and lists every compaction,
microcompaction, persisted tool output, API-side clearing, snip, collapse, cache miss,
blocking-limit hit and branch, each with the position of its request in ``requests`` and a
sentence a user can read. ``cache_sentence`` says a request's cache outcome with its cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypedDict

from contextlab.engine.measures.cost import load_pricing
from contextlab.engine.results import RequestEvent, RequestRow

#: Event kinds in the navigator's order, with the label of their filter.
EVENT_KINDS: dict[str, str] = {
    "compaction": "compactions",
    "microcompaction": "microcompactions",
    "persistence": "persisted outputs",
    "clearing": "API clearing",
    "snip": "snips",
    "collapse": "collapses",
    "cache_miss": "cache misses",
    "blocking": "blocking-limit hits",
    "branch": "branches",
}

#: why the cache read stopped early, as the end of a sentence
CACHE_REASONS: dict[str, str] = {
    "first_request": "nothing was cached yet for this model",
    "ttl_expired": "the cache entry had expired",
    "prefix_changed": "the start of the prompt changed, so the cached copy no longer matched",
    "lookback_exceeded": "the cached entry was too far back for the cache lookup to find",
    "model_changed": "the model changed, and each model has its own cache",
    "below_minimum": "the prompt is shorter than the smallest prefix the cache stores",
    "no_breakpoint": "the prompt has no cache breakpoint",
    "caching_off": "the recording never read or wrote the prompt cache: caching was off for "
    "this session (DISABLE_PROMPT_CACHING, or a provider without it)",
    "server_miss": "the recorded usage shows the server no longer had the cached copy, though "
    "nothing before it changed (taken from the recording: likely server-side)",
}
#: reasons after which a request reads less than the previous request left: a miss
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


class NavigatorEvent(TypedDict):
    #: position of the request in the result's ``requests``
    request: int
    kind: str
    text: str


def parse_time(stamp: str | None) -> datetime | None:
    """A transcript timestamp ("2026-01-05T09:00:00.123Z"), or None when absent or unreadable."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def format_duration(seconds: float) -> str:
    """ "45 s", "7 min 3 s", "2 h 5 min", "3 d 4 h"."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {sec} s" if sec else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def _tokens(n: Any) -> str:
    value = int(n or 0)
    return f"{value / 1000:.1f}k" if value >= 1000 else str(value)


def gaps(requests: Sequence[RequestRow]) -> list[float | None]:
    """Seconds since the previous request of the same thread (None for a thread's first)."""
    last: dict[str, datetime] = {}
    out: list[float | None] = []
    for row in requests:
        thread = str(row.get("thread") or "main")
        now = parse_time(row.get("timestamp"))
        before = last.get(thread)
        out.append((now - before).total_seconds() if now and before else None)
        if now is not None:
            last[thread] = now
    return out


def miss_cost(row: RequestRow, previous: RequestRow | None) -> float:
    """USD the request paid over reading from the cache what the previous request left there.

    The previous prompt (read + written + uncached) could have been read; what of it this
    request wrote or sent uncached instead is priced at the write rate (or the input rate)
    minus the read rate.
    """
    cache = row.get("cache") or {}
    if previous is None:
        return 0.0
    before: dict[str, Any] = dict(previous.get("cache") or {})
    could_read = sum(int(before.get(k) or 0) for k in ("read", "write", "uncached"))
    missed = max(0, could_read - int(cache.get("read") or 0))
    if not missed:
        return 0.0
    price, _, _ = load_pricing().price_for(row.get("model"))
    write_rate = price.cache_write_1h if row.get("ttl") == "1h" else price.cache_write_5m
    written = min(missed, int(cache.get("write") or 0))
    uncached = min(missed - written, int(cache.get("uncached") or 0))
    extra = written * (write_rate - price.cache_read) + uncached * (price.input - price.cache_read)
    return max(0.0, extra / 1_000_000)


def cache_sentence(
    row: RequestRow, previous: RequestRow | None = None, gap: float | None = None
) -> str:
    """The request's cache outcome in a sentence, with what a miss cost."""
    cache = row.get("cache") or {}
    reason = str(cache.get("reason") or "")
    read = int(cache.get("read") or 0)
    write = int(cache.get("write") or 0)
    # recorded facts first: a recorded hit or miss is the API's; only its cause is inferred
    recorded = cache.get("source") == "recorded"
    label = {"recorded": " (recorded)", "estimate": " (estimated)"}.get(
        str(cache.get("source")), ""
    )
    if reason == "hit":
        return f"Cache hit{label}: {_tokens(read)} tokens read from the cache, {_tokens(write)} new tokens written."
    because = CACHE_REASONS.get(reason, reason.replace("_", " "))
    if reason == "ttl_expired" and gap is not None:
        ttl = "1 hour" if row.get("ttl") == "1h" else "5 minutes"
        because = f"{format_duration(gap)} since the previous request, more than the cache keeps an entry ({ttl})"
    if recorded:
        because = f"cause inferred by the cache model: {because}"
    if reason not in MISS_REASONS:
        return f"Not cached{label}: {because}."
    cost = miss_cost(row, previous)
    priced = f", ${cost:.2f}" if cost >= 0.005 else ""
    return f"Cache miss{label}{priced}: {because}; {_tokens(read)} tokens read, {_tokens(write)} written."


def _event_text(event: RequestEvent) -> tuple[str, str] | None:
    """(kind, sentence) of one pipeline event, None for events the navigator does not list."""
    step, action = event.get("step"), event.get("action")
    recorded = " (recorded)" if event.get("recorded") else ""
    if step == "autocompact":
        if action == "failed":
            return (
                "compaction",
                f"Compaction failed{recorded}: {event.get('reason') or 'no summary'}",
            )
        pre = event.get("pre_tokens") or event.get("decision_tokens")
        threshold = event.get("threshold")
        at = f" at {_tokens(pre)} tokens" if pre else ""
        limit = f" (threshold {_tokens(threshold)})" if threshold else ""
        return (
            "compaction",
            f"Compacted{recorded}{at}{limit}: the history was replaced by a summary",
        )
    if step == "microcompact":
        count = event.get("cleared")
        saved = event.get("tokens_saved")
        what = (
            f"{count} old tool result{'s' if count != 1 else ''}" if count else "old tool results"
        )
        spared = f", {_tokens(saved)} tokens saved" if saved else ""
        if event.get("variant") == "api_clear_tool_uses":
            return "clearing", f"The API cleared {what}{spared}"
        after = (
            f" after a {event.get('gap_minutes')} min pause"
            if event.get("variant") == "time"
            else ""
        )
        return "microcompaction", f"Microcompaction{recorded}{after}: cleared {what}{spared}"
    if step == "persistence":
        chars = event.get("original_chars")
        size = f" ({int(chars):,} characters)" if chars else ""
        tool = event.get("tool") or "tool"
        return "persistence", f"{tool} output{size} saved to a file; the model saw a preview"
    if step == "budget":
        return "persistence", "A tool result was replaced by a preview (tool-result budget)"
    if step == "snip":
        count = event.get("messages")
        return "snip", f"Snipped {count} message{'s' if count != 1 else ''}{recorded}"
    if step == "collapse":
        first, last = event.get("first"), event.get("last")
        count = last - first + 1 if isinstance(first, int) and isinstance(last, int) else 0
        span = f" {count} message{'s' if count != 1 else ''}" if count > 0 else " messages"
        return "collapse", f"Collapsed{span} into a summary"
    if step == "blocking":
        return "blocking", "Blocking limit hit: Claude Code would answer 'Prompt is too long'"
    return None


#: what an anchor stands for, and where it was measured, in words (``measures.anchors``)
ANCHOR_KINDS = {
    "earlier_history": "history written before this file (the file continues a conversation)",
    "segment": "a rebuilt system prompt and tool list",
    "unrecorded": "input the transcript does not record (hook output, attachments, files "
    "restored after a compaction)",
}
ANCHOR_POINTS = {
    "file_start": "at the start of the file",
    "restart": "after Claude Code restarted",
    "turn_start": "as a user turn starts",
    "after_compaction": "right after a compaction",
}


def _anchor_text(event: RequestEvent) -> str:
    """An anchor on the recorded usage in words (its request is the page's own: not repeated)."""
    what = ANCHOR_KINDS.get(str(event.get("kind")), "input the transcript does not show")
    where = ANCHOR_POINTS.get(str(event.get("point")), "")
    tokens = event.get("tokens")
    size = f"{_tokens(int(tokens))} tokens of " if isinstance(tokens, int) and tokens else ""
    because = str(event.get("reason") or "")
    return f"The recorded prompt holds {size}{what}{' ' + where if where else ''}" + (
        f" ({because})" if because else ""
    )


def describe_event(event: RequestEvent) -> str:
    """One pipeline event of a request as a sentence (any step, listed or not); never the
    result's own keys: a step without a sentence is named in words."""
    found = _event_text(event)
    if found is not None:
        return found[1]
    if event.get("step") == "anchor":
        return _anchor_text(event)
    name = f"{event.get('step', '')} {event.get('action', '')}".strip().replace("_", " ")
    return f"{name[:1].upper()}{name[1:]}" if name else "A pipeline step changed this request"


def request_events(requests: Sequence[RequestRow]) -> list[NavigatorEvent]:
    """Every event worth jumping to, in request order (see the module docstring)."""
    out: list[NavigatorEvent] = []
    gap_of = gaps(requests)
    previous_in: dict[str, RequestRow] = {}
    was_branch = False
    for i, row in enumerate(requests):
        thread = str(row.get("thread") or "main")
        for event in row.get("events") or []:
            found = _event_text(event)
            if found is not None:
                out.append({"request": i, "kind": found[0], "text": found[1]})
        if row.get("blocked") and not any(
            e.get("step") == "blocking" for e in row.get("events") or []
        ):
            out.append({"request": i, "kind": "blocking", "text": "Blocking limit hit"})
        reason = str((row.get("cache") or {}).get("reason") or "")
        if reason in MISS_REASONS:
            sentence = cache_sentence(row, previous_in.get(thread), gap_of[i])
            out.append({"request": i, "kind": "cache_miss", "text": sentence})
        branch = bool(row.get("branch"))
        if branch and not was_branch:
            out.append(
                {
                    "request": i,
                    "kind": "branch",
                    "text": "An abandoned branch of the conversation starts",
                }
            )
        was_branch = branch
        previous_in[thread] = row
    return out


def event_counts(events: Sequence[NavigatorEvent]) -> list[dict[str, Any]]:
    """Per kind (in ``EVENT_KINDS`` order, only kinds present): kind, label, count."""
    counts: dict[str, int] = {}
    for event in events:
        counts[event["kind"]] = counts.get(event["kind"], 0) + 1
    return [
        {"kind": kind, "label": label, "count": counts[kind]}
        for kind, label in EVENT_KINDS.items()
        if kind in counts
    ]
