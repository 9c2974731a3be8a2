"""Worker side: fetch the summary a run is waiting for, then queue the run's replay again."""

from __future__ import annotations

import logging
import os
from dataclasses import asdict
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from contextlab import engine
from contextlab.runs import tasks as run_tasks
from contextlab.runs.models import Run
from contextlab.summaries.models import RunSummarizer, SummaryEntry

logger = logging.getLogger(__name__)

#: Output tokens assumed for the spend estimate: real compaction summaries run 2–5k tokens
#: (8–16k characters); the API caps them at 20k.
EXPECTED_SUMMARY_TOKENS = 4_000
#: Consecutive backend failures after which a run stops calling it (Claude Code's breaker).
BREAKER_THRESHOLD = 3


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


#: One backend client per (backend, model) and worker process: its HTTP connections and
#: set-up are reused by every summary call of every run this worker handles.
_PRIMARY: dict[tuple[Any, ...], engine.Summarizer] = {}
#: the settings a client is built from: a change (a rotated key, another endpoint) builds anew
_CLIENT_ENV = ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY")


def _primary(backend: str, model: str | None) -> engine.Summarizer:
    key = (backend, model, *(os.environ.get(name) for name in _CLIENT_ENV))
    summarizer = _PRIMARY.get(key)
    if summarizer is None:
        while len(_PRIMARY) >= 4:  # a few live clients per process, oldest dropped first
            _PRIMARY.pop(next(iter(_PRIMARY)))
        summarizer = _PRIMARY[key] = engine.make_summarizer(backend, model)
    return summarizer


def _fail(run_id: int, message: str) -> None:
    Run.objects.filter(pk=run_id).update(
        status=Run.Status.FAILED, error=message[:4000], finished_at=timezone.now()
    )


def fetch_summary(run_id: int) -> None:
    """Write the pending summary of run ``run_id``. Safe to call twice (idempotent)."""
    settings = RunSummarizer.objects.select_related("run").filter(run_id=run_id).first()
    if settings is None or not settings.pending_key or settings.pending_request is None:
        return
    key = settings.pending_key
    if SummaryEntry.objects.filter(key=key).exists() or key in settings.fallbacks:
        _resume(settings)  # another task already fetched it
        return
    request = engine.request_from_json(settings.pending_request)
    model = settings.model or None
    estimate = estimate_cost(request, model)
    cap = settings.spend_cap_usd
    if cap is not None and settings.spent_usd + estimate > cap:
        _fail(
            run_id,
            f"Stopped before the next summary: the spend cap is ${cap:.2f}, ${settings.spent_usd:.2f} "
            f"is spent and the next {settings.backend} summary would cost about ${estimate:.2f}.",
        )
        RunSummarizer.objects.filter(pk=run_id).update(pending_key="", pending_request=None)
        return
    if settings.consecutive_failures >= BREAKER_THRESHOLD:
        fallback = engine.ExtractiveSummarizer().summarize(request)
        fallback.fallback_reason = (
            f"{settings.backend} not called: {settings.consecutive_failures} consecutive failures "
            "(circuit breaker)"
        )
        result = fallback
    else:
        try:
            primary = _primary(settings.backend, model)
        except (ValueError, engine.SummaryError) as exc:
            _fail(run_id, f"The {settings.backend} summarizer cannot be used: {exc}")
            return
        # one attempt per task (with the backend's own retries); the breaker that spans the run's
        # attempts is the count kept in the database above
        result = engine.FallbackSummarizer(primary, breaker_threshold=BREAKER_THRESHOLD).summarize(
            request
        )
    with transaction.atomic():
        settings = RunSummarizer.objects.select_for_update().get(pk=run_id)
        if result.fallback_reason:
            settings.fallbacks = {**settings.fallbacks, key: asdict(result)}
            settings.consecutive_failures += 1
        else:
            SummaryEntry.objects.get_or_create(
                key=key,
                defaults={
                    "backend": result.backend,
                    "model": result.model or "",
                    "prompt_version": engine.PROMPT_VERSION,
                    "kind": request.kind,
                    "text": result.text,
                    "input_tokens": result.input_tokens,
                    "output_tokens": result.output_tokens,
                    "cache_read_tokens": result.cache_read_tokens,
                    "cost_usd": result.cost_usd,
                    "latency_s": result.latency_s,
                },
            )
            settings.consecutive_failures = 0
            settings.spent_usd += result.cost_usd
            settings.calls += 1
        settings.save()
    logger.info("run %s: summary %s fetched (%s)", run_id, key[:40], result.backend)
    _resume(settings)


def _resume(settings: RunSummarizer) -> None:
    with transaction.atomic():
        RunSummarizer.objects.filter(pk=settings.pk).update(pending_key="", pending_request=None)
        Run.objects.filter(pk=settings.pk, status=Run.Status.QUEUED).update(heartbeat_at=None)
        transaction.on_commit(partial(run_tasks.run_replay.delay, settings.pk))
