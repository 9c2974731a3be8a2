"""Request-side run operations: queue a replay, refresh a polled run, read results."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

from cachetools import LRUCache
from django.contrib.auth.models import User

from contextlab import blobs, engine
from contextlab.jobs import lifecycle, replay, tasks
from contextlab.runs.models import Run, RunResult
from contextlab.summaries import services as summaries
from contextlab.transcripts.models import Transcript, TranscriptMessages

logger = logging.getLogger(__name__)
T = TypeVar("T")


#: The name this module used for a bad run request; the engine's one field-error type.
RunConfigError = engine.FieldError
#: The largest overrides a run, comparison side or sweep base may carry, as JSON characters
#: (every setting of a config changed is about 3,000).
MAX_OVERRIDES_CHARS = 64 * 1024


def check_overrides_size(overrides: dict[str, Any] | None, field: str = "config") -> None:
    """``engine.FieldError`` on ``field`` when the overrides are past MAX_OVERRIDES_CHARS."""
    if overrides and len(json.dumps(overrides, default=str)) > MAX_OVERRIDES_CHARS:
        raise engine.FieldError(
            field, f"at most {MAX_OVERRIDES_CHARS:,} characters of overrides (as JSON)"
        )


def recorded_auto_compactions(transcript: Transcript) -> list[int]:
    """``preTokens`` of the transcript's recorded automatic compactions, as the upload stored
    them on its main thread (older uploads have none: ``resolve_config`` then goes by the
    largest prompt alone)."""
    for thread in transcript.threads or []:
        if isinstance(thread, dict) and thread.get("kind") == "main":
            found = thread.get("auto_compactions") or []
            return [int(pre) for pre in found if isinstance(pre, int) and pre > 0]
    return []


def recorded_window(transcript: Transcript) -> int | None:
    """The context window the agent recorded for the session (Codex's
    ``model_context_window``), as the upload stored it on its main thread; None otherwise."""
    for thread in transcript.threads or []:
        if isinstance(thread, dict) and thread.get("kind") == "main":
            window = thread.get("context_window")
            return window if isinstance(window, int) and window > 0 else None
    return None


def start_run(
    *,
    owner: User,
    transcript: Transcript,
    mode: str,
    preset: str = "",
    overrides: dict[str, Any] | None = None,
    summarizer: str = "extractive",
    summary_model: str = "",
    spend_cap_usd: float | None = None,
) -> Run:
    """Validate the config with the engine, create a queued run and enqueue it after commit.

    ``summarizer`` chooses who writes the summaries of simulated compactions (what-if runs):
    the offline extractive one, or an LLM backend whose calls run as their own tasks.
    A bad input raises ``engine.FieldError`` naming it.
    """
    if mode not in Run.Mode.values:
        raise engine.FieldError("mode", f"must be one of {', '.join(Run.Mode.values)}")
    preset = preset or "auto"
    check_overrides_size(overrides)
    if mode == Run.Mode.RECORDED and overrides:
        raise engine.FieldError(
            "config", "a recorded replay uses the recorded behaviour; use mode whatif"
        )
    # errors name "preset", "config" or "config.<setting>", as the form and the API report them
    config, resolved_preset = engine.resolve_request_config(
        preset,
        overrides,
        version=transcript.version or None,
        max_recorded_prompt=transcript.max_prompt_tokens or None,
        recorded_auto_compactions=recorded_auto_compactions(transcript),
        recorded_window=recorded_window(transcript),
        agent=transcript.agent,
    )
    summaries.validate_summarizer(summarizer, summary_model, spend_cap_usd)
    run = lifecycle.create(
        owner=owner,
        transcript=transcript,
        mode=mode,
        preset=preset,
        overrides=overrides or {},
        config=config.to_dict(),
        resolved_preset=resolved_preset,
        summarizer=summarizer,
        summary_model=summary_model,
        spend_cap_usd=spend_cap_usd,
    )
    tasks.queue_replay(run.pk)
    return run


def replay_again(transcript: Transcript, *, live: bool = False) -> list[int]:
    """Replay every finished run of a session again (its file grew), once this commits;
    ``live`` (an append): each goes on from its last replay's state where it can."""
    ids = lifecycle.replay_again(list(transcript.runs.values_list("pk", flat=True)), live=live)
    for run_id in ids:
        tasks.queue_replay(run_id)
    return ids


def replay_in_full(run: Run) -> bool:
    """Replay a provisional run whole now (its reader does not wait for the live session
    to end); False if it is not a finished provisional run."""
    if run.status != Run.Status.DONE or not run.provisional:
        return False
    ids = lifecycle.replay_again([run.pk])
    for run_id in ids:
        tasks.queue_replay(run_id)
    return bool(ids)


def forget_live_states(run_ids: list[int]) -> None:
    """Delete the live replay states (and last findings) of these (deleted) runs from the
    storage."""
    for run_id in run_ids:
        blobs.delete(lifecycle.live_state_name(run_id))
        blobs.delete(lifecycle.live_findings_name(run_id))
        blobs.delete(replay.waste_scan_name(run_id))


def cancel_run(run: Run) -> bool:
    """Stop a queued or running run (it ends failed, "Cancelled"); False if it had ended."""
    return bool(lifecycle.cancel([run.pk], "Cancelled by its owner."))


def refresh_run(run: Run) -> Run:
    """The run as stored now (pages call this when polling; the periodic recovery, not the
    page, requeues a run whose worker died)."""
    run.refresh_from_db()
    return run


# Finished results never change, so a parsed copy per process saves re-reading megabytes of
# JSON on every explorer step. Keyed by (kind, pk, version); least recently used dropped.
_CACHE: LRUCache[tuple[str, int, str], Any] = LRUCache(maxsize=6)
_CACHE_LOCK = threading.Lock()


def _cached(key: tuple[str, int, str], load: Callable[[], T]) -> T:
    with _CACHE_LOCK:
        if key in _CACHE:
            found: T = _CACHE[key]
            return found
    value = load()
    with _CACHE_LOCK:
        _CACHE[key] = value
    return value


def result_data(run: Run) -> dict[str, Any] | None:
    """The engine's result JSON of a finished run, or None."""
    if run.status != Run.Status.DONE:
        return None

    def load() -> dict[str, Any] | None:
        row = RunResult.objects.filter(run=run).first()
        return row.read() if row else None

    # finished_at in the key: a row id reused (a reset database) never serves stale data
    data: dict[str, Any] | None = _cached(("result", run.pk, str(run.finished_at)), load)
    return data


def stored_tool_breakdown(data: dict[str, Any]) -> engine.ToolBreakdown | None:
    """The tools breakdown the worker stored with a result (or a share's snapshot of it), if
    of this breakdown version."""
    stored = data.get(engine.TOOL_BREAKDOWN_KEY)
    if isinstance(stored, dict) and stored.get("version") == engine.BREAKDOWN_VERSION:
        return cast(engine.ToolBreakdown, stored)
    return None


def tool_breakdown(run: Run, data: dict[str, Any]) -> engine.ToolBreakdown:
    """The run's tools one by one: as the worker stored it with the result, else (a result
    stored before it did) computed once per process from the result and its messages."""
    stored = stored_tool_breakdown(data)
    if stored is not None:
        return stored

    def build() -> engine.ToolBreakdown:
        return engine.tool_breakdown(data, session_messages(run.transcript))

    breakdown: engine.ToolBreakdown = _cached(("tools", run.pk, str(run.finished_at)), build)
    return breakdown


def session_messages(transcript: Transcript) -> dict[str, list[dict[str, Any]]]:
    """``engine.messages_json`` of the session, as stored by the first run."""

    # the sessions it continues are part of its messages: a link made or undone changes them
    earlier = [t.sha256 for t in transcript.earlier_sessions()]
    key = ("messages", transcript.pk, "+".join([*earlier, transcript.sha256]))

    def load() -> dict[str, list[dict[str, Any]]]:
        # a live session's append: this process's copy of the file before it, with the rows
        # appended since, when they are so stored (the work grows with the append)
        before = ("messages", transcript.pk, "+".join([*earlier, transcript.previous_sha256]))
        with _CACHE_LOCK:
            held = _CACHE.get(before) if transcript.previous_sha256 else None
        if held:
            parts = TranscriptMessages.appended_since(transcript, transcript.previous_sha256)
            if parts is not None:
                for part in parts:
                    held = engine.apply_appended_messages(held, part)
                return held
        data = TranscriptMessages.current_data(transcript)
        return engine.expand_messages(data) if data else {}

    data: dict[str, list[dict[str, Any]]] = _cached(key, load)
    if not data:
        with _CACHE_LOCK:
            _CACHE.pop(key, None)
    return data


def default_run(transcript: Transcript) -> Run | None:
    """The run a report shows by default: the newest finished recorded run, else the newest."""
    runs = transcript.runs.all()
    return (
        runs.filter(status=Run.Status.DONE, mode=Run.Mode.RECORDED).first()
        or runs.filter(status=Run.Status.DONE).first()
        or runs.first()
    )
