"""Worker side: call the backend for the one summary a fetch task is for, and store it.

``fetch_summary`` runs inside the run's replay (``jobs.replay.execute_run`` with a summary):
the replay resumes from its checkpoint, reaches the summary it stopped at, and this module calls
the backend for it there, with the spend cap, the circuit breaker and the extractive fallback.
The request is never serialized: the resumed replay rebuilds it. Any other missing summary
stops the replay again (``SummaryPending``) and gets a fetch task of its own.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from dataclasses import asdict
from datetime import timedelta

from django.conf import settings as django_settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from contextlab import engine
from contextlab.runs.models import Run
from contextlab.summaries.models import RunSummarizer, SummaryEntry, SummaryLease

logger = logging.getLogger(__name__)

#: Output tokens assumed for the spend estimate: real compaction summaries run 2–5k tokens
#: (8–16k characters); the API caps them at 20k.
EXPECTED_SUMMARY_TOKENS = 4_000
#: Consecutive backend failures after which a run stops calling it (Claude Code's breaker).
BREAKER_THRESHOLD = 3
#: A run whose summary another run is writing looks again after this many seconds; the writer
#: also wakes it when the summary is stored, so this only matters if that wake-up is lost.
LEASE_POLL_SECONDS = 5.0


def estimate_cost(request: engine.SummaryRequest, model: str | None) -> float:
    """Dollars a summary call would cost, from rough token counts and the pricing table."""
    input_tokens = engine.rough_text(request.prompt) + sum(
        engine.rough_text(b.text) for m in request.messages for b in m.blocks
    )
    return engine.request_cost(
        model or request.model,
        uncached=input_tokens,
        cache_read=0,
        cache_write_5m=0,
        cache_write_1h=0,
        output=EXPECTED_SUMMARY_TOKENS,
    )


#: the settings a client is built from: a change (a rotated key, another endpoint) builds anew
_CLIENT_ENV = ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY")


def _primary(backend: str, model: str | None) -> engine.Summarizer:
    """One backend client per (backend, model, client settings) and worker process: its HTTP
    connections and set-up are reused by every summary call of every run this worker handles."""
    return _client(backend, model, tuple(os.environ.get(name) for name in _CLIENT_ENV))


@functools.lru_cache(maxsize=4)  # a few live clients per process, least recently used dropped
def _client(
    backend: str, model: str | None, _settings: tuple[str | None, ...]
) -> engine.Summarizer:
    return engine.make_summarizer(backend, model)


def fetch_summary(
    settings: RunSummarizer,
    key: str,
    request: engine.SummaryRequest,
    *,
    only: str,
    on_stored: Callable[[str, int], None],
) -> engine.SummaryResult | None:
    """The summary ``key`` if it is the one this task fetches (``only``), else None.

    Once the backend's summary is stored for every run, ``on_stored(key, run id)`` wakes the
    other runs waiting for it (a fallback is this run's only: nobody else can use it).
    Raises ``engine.ReplayStopped`` when the run must stop instead: the spend cap would be
    exceeded, or the backend cannot be used at all.
    """
    if key != only:
        return None
    run_id = settings.pk
    if not _take_lease(key, run_id):
        # another run is calling the backend for this very input: wait for its summary
        raise engine.SummaryPending(key, request, retry_after=LEASE_POLL_SECONDS)
    stored = False
    try:
        written = SummaryEntry.objects.filter(key=key).first()  # stored while we looked
        if written is not None:
            RunSummarizer.objects.filter(pk=run_id).update(pending_key="")
            return written.as_result()
        result = _call_and_store(settings, key, request)  # releases the lease as it stores
        stored = True
        if not result.fallback_reason:
            on_stored(key, run_id)
        return result
    finally:
        if not stored:
            SummaryLease.objects.filter(key=key, run_id=run_id).delete()


def _take_lease(key: str, run_id: int) -> bool:
    """Whether this run may call the backend for ``key``: no other run holds the lease, or
    its holder stopped heartbeating (killed mid-call) or is no longer running."""
    now = timezone.now()
    # INSERT … ON CONFLICT DO NOTHING, then see whose it is: two statements, no lock held
    SummaryLease.objects.bulk_create(
        [SummaryLease(key=key, run_id=run_id, taken_at=now)], ignore_conflicts=True
    )
    holder = SummaryLease.objects.filter(key=key).values_list("run_id", flat=True).first()
    if holder is None or holder == run_id:
        # None: the holder released it between the two statements; its summary is being
        # stored, and this run looks again shortly
        return holder == run_id
    alive_since = now - timedelta(seconds=django_settings.RUN_STALE_AFTER)
    if Run.objects.filter(
        pk=holder, status=Run.Status.RUNNING, heartbeat_at__gte=alive_since
    ).exists():
        return False
    # take it over only from that holder: of two runs trying at once, one wins
    return (
        SummaryLease.objects.filter(key=key, run_id=holder).update(run_id=run_id, taken_at=now) == 1
    )


def _call_and_store(
    settings: RunSummarizer, key: str, request: engine.SummaryRequest
) -> engine.SummaryResult:
    run_id = settings.pk
    model = settings.model or None
    estimate = estimate_cost(request, model)
    cap = settings.spend_cap_usd
    if cap is not None and settings.spent_usd + estimate > cap:
        RunSummarizer.objects.filter(pk=run_id).update(pending_key="")
        raise engine.ReplayStopped(
            f"Stopped before the next summary: the spend cap is ${cap:.2f}, ${settings.spent_usd:.2f} "
            f"is spent and the next {settings.backend} summary would cost about ${estimate:.2f}."
        )
    if settings.consecutive_failures >= BREAKER_THRESHOLD:
        result = engine.ExtractiveSummarizer().summarize(request)
        result.fallback_reason = (
            f"{settings.backend} not called: {settings.consecutive_failures} consecutive failures "
            "(circuit breaker)"
        )
    else:
        try:
            primary = _primary(settings.backend, model)
        except (ValueError, engine.SummaryError) as exc:
            raise engine.ReplayStopped(
                f"The {settings.backend} summarizer cannot be used: {exc}"
            ) from None
        # one call per task (the SDK retries it). Two breakers: this wrapper's is the worker
        # process's for the backend endpoint and model (shared by every run on this worker);
        # the count kept in the database spans one run's fetches on any worker
        result = engine.FallbackSummarizer(primary, breaker_threshold=BREAKER_THRESHOLD).summarize(
            request
        )
    _store(settings, key, request, result)
    logger.info("run %s: summary %s fetched (%s)", run_id, key[:40], result.backend)
    return result


def _store(
    settings: RunSummarizer, key: str, request: engine.SummaryRequest, result: engine.SummaryResult
) -> None:
    """Keep the summary (a fallback only for this run) and the run's spend; the run no longer
    waits. ``settings`` is updated to match, for a later fetch in the same replay."""
    run_id = settings.pk
    with transaction.atomic():
        SummaryLease.objects.filter(key=key, run_id=run_id).delete()
        if result.fallback_reason:
            locked = RunSummarizer.objects.select_for_update().only("fallbacks").get(pk=run_id)
            settings.fallbacks = {**locked.fallbacks, key: asdict(result)}
            settings.consecutive_failures += 1
            RunSummarizer.objects.filter(pk=run_id).update(
                fallbacks=settings.fallbacks,
                consecutive_failures=F("consecutive_failures") + 1,
                pending_key="",
            )
        else:
            # ON CONFLICT DO NOTHING: another run may have stored the same summary meanwhile
            SummaryEntry.objects.bulk_create(
                [
                    SummaryEntry(
                        key=key,
                        backend=result.backend,
                        model=result.model or "",
                        prompt_version=engine.PROMPT_VERSION,
                        kind=request.kind,
                        text=result.text,
                        input_tokens=result.input_tokens,
                        output_tokens=result.output_tokens,
                        cache_read_tokens=result.cache_read_tokens,
                        cost_usd=result.cost_usd,
                        latency_s=result.latency_s,
                    )
                ],
                ignore_conflicts=True,
            )
            settings.consecutive_failures = 0
            settings.spent_usd += result.cost_usd
            settings.calls += 1
            RunSummarizer.objects.filter(pk=run_id).update(
                consecutive_failures=0,
                spent_usd=F("spent_usd") + result.cost_usd,
                calls=F("calls") + 1,
                pending_key="",
            )
