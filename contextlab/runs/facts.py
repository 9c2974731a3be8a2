"""What a session list row says about a session, from its recorded replay: its first prompt
(the title until the result carries Claude Code's own titles), when it ran, for how long, on
which models. Computed once per finished run (a stored result never changes)."""

from __future__ import annotations

import itertools
from typing import Any

from django.core.cache import cache

from contextlab import engine
from contextlab.engine import as_result
from contextlab.runs import services
from contextlab.runs.models import Run

TITLE_CHARS = 90
#: a pause between two requests longer than this is idle time, not counted as active
IDLE_SECONDS = 15 * 60


def active_seconds(times: list[float]) -> float:
    """Time spent working: the pauses between consecutive requests (any thread, in time
    order), each one longer than ``IDLE_SECONDS`` left out."""
    ordered = sorted(times)
    return sum(
        gap for gap in (b - a for a, b in itertools.pairwise(ordered)) if gap <= IDLE_SECONDS
    )


def first_prompt(messages: list[dict[str, Any]]) -> str:
    """The first thing the user typed in the session, on one line, cut to ``TITLE_CHARS``."""
    for message in messages:
        if message.get("kind") != "prompt":
            continue
        text = " ".join(
            " ".join(str(b.get("text") or "").split())
            for b in message.get("blocks") or []
            if b.get("type") == "text"
        ).strip()
        if text:
            return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1] + "…"
    return ""


def _display_name(run: Run) -> str:
    """The session's display name; for a session stored before its first prompt was, that
    prompt read from its messages (in memory only)."""
    transcript = run.transcript
    if not transcript.title and not transcript.first_prompt:
        messages = services.session_messages(transcript).get("main") or []
        transcript.first_prompt = first_prompt(messages)
    return transcript.display_name


def session_facts(run: Run | None) -> dict[str, Any]:
    """``started`` (ISO timestamp), ``duration`` (text), ``seconds``, ``models`` of the
    session a finished run replayed; ``{}`` when there is no finished run."""
    if run is None or run.status != Run.Status.DONE or run.finished_at is None:
        return {}
    key = f"session-facts:v2:{run.pk}:{run.finished_at.isoformat()}"
    facts: dict[str, Any] | None = cache.get(key)
    if facts is None:
        data = services.result_data(run)
        requests = as_result(data)["requests"] if data else []
        stamps = [r["timestamp"] for r in requests if r["timestamp"]]
        first = engine.parse_time(stamps[0]) if stamps else None
        last = engine.parse_time(stamps[-1]) if stamps else None
        seconds = (last - first).total_seconds() if first and last else 0.0
        moments = [t.timestamp() for t in map(engine.parse_time, stamps) if t is not None]
        active = active_seconds(moments)
        models = sorted({r["model"] for r in requests if r["model"]})
        facts = {
            "title": _display_name(run),
            "started": stamps[0] if stamps else "",
            "seconds": seconds or 0.0,
            "duration": engine.format_duration(seconds) if seconds else "",
            "active_seconds": active,
            "active": engine.format_duration(active) if active else "",
            "models": [m.removeprefix("claude-") for m in models],
        }
        cache.set(key, facts, timeout=24 * 3600)
    return facts
