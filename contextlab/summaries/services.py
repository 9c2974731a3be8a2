"""The summary store seen from a run: its summarizer settings, summaries served from the
cache, which summary it waits for, and what the pages and the API show about them.

A replay that needs a summary the cache does not have stops with ``engine.SummaryPending``;
``jobs.lifecycle`` parks the run (``mark_waiting``) and ``jobs.tasks`` queues a fetch task
for that summary. The task resumes the replay, which rebuilds the request and has
``summaries.runner`` call the backend for that one summary (retries, prompt-too-long truncation
and the circuit breaker are the engine's), store it and go on. Nothing of a run's status is
changed here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from contextlab import engine
from contextlab.engine import as_result
from contextlab.runs.models import Run
from contextlab.summaries.models import Backend, RunSummarizer, SummaryEntry

__all__ = [
    "RunSummarizer",
    "configure_run",
    "mark_waiting",
    "run_summaries",
    "runs_waiting_for",
    "summarizer_for",
    "summarizer_key",
    "summarizer_status",
    "waiting_for",
]


#: A bad summarizer setting: the engine's one field-error type, so forms and the API report it
#: like any other field.
SummarizerConfigError = engine.FieldError


def configure_run(
    *, run: Run, backend: str = "extractive", model: str = "", spend_cap_usd: float | None = None
) -> RunSummarizer | None:
    """Attach summarizer settings to a new run (nothing for the default extractive one)."""
    backend = backend or Backend.EXTRACTIVE
    if backend not in Backend.values:
        raise SummarizerConfigError("summarizer", f"must be one of {', '.join(Backend.values)}")
    if len(model) > 200:
        raise SummarizerConfigError("summary_model", "at most 200 characters")
    if backend == Backend.OPENAI and not model:
        raise SummarizerConfigError(
            "summary_model", "an OpenAI-compatible endpoint needs a model name"
        )
    if spend_cap_usd is not None and not (0 <= spend_cap_usd <= 10_000):
        raise SummarizerConfigError("spend_cap_usd", "must be between 0 and 10000 dollars")
    if backend == Backend.EXTRACTIVE and spend_cap_usd is None and not model:
        return None
    return RunSummarizer.objects.create(
        run=run, backend=backend, model=model, spend_cap_usd=spend_cap_usd
    )


def validate_summarizer(backend: str, model: str, spend_cap_usd: float | None) -> None:
    """The checks of ``configure_run`` without a run (for forms and the API before saving)."""
    if backend and backend not in Backend.values:
        raise SummarizerConfigError("summarizer", f"must be one of {', '.join(Backend.values)}")
    if backend == Backend.OPENAI and not model:
        raise SummarizerConfigError(
            "summary_model", "an OpenAI-compatible endpoint needs a model name"
        )
    if spend_cap_usd is not None and not (0 <= spend_cap_usd <= 10_000):
        raise SummarizerConfigError("spend_cap_usd", "must be between 0 and 10000 dollars")


#: what a fetch task calls for a missing summary: (settings, key, request) -> result or None
Fetch = Callable[[RunSummarizer, str, engine.SummaryRequest], engine.SummaryResult | None]


def summarizer_for(run: Run, *, fetch: Fetch | None = None) -> engine.Summarizer | None:
    """The summarizer a replay of ``run`` uses: None (engine default) or cache-backed.

    ``fetch`` (a fetch task's) is asked for a summary the cache does not have; without it, or
    when it returns None, the replay stops with ``engine.SummaryPending``.
    """
    settings = RunSummarizer.objects.filter(run=run).first()
    if settings is None or settings.backend == Backend.EXTRACTIVE:
        return None
    fallbacks = dict(settings.fallbacks)

    def lookup(key: str) -> engine.SummaryResult | None:
        entry = SummaryEntry.objects.filter(key=key).first()
        if entry is not None:
            return entry.as_result()
        data = fallbacks.get(key)
        if data is not None:
            return engine.SummaryResult(**data)
        return None

    return engine.StoredSummarizer(
        backend=settings.backend,
        model=settings.model or None,
        lookup=lookup,
        fetch=None if fetch is None else partial(fetch, settings),
    )


def may_checkpoint(run_id: int) -> bool:
    """Whether a replay of the run can have left a checkpoint: only one with an LLM summarizer
    (``summarizer_for``) stops for a summary and keeps its state."""
    return RunSummarizer.objects.filter(run_id=run_id).exclude(backend=Backend.EXTRACTIVE).exists()


def waits_for_another_summary(run_id: int, key: str) -> bool:
    """True when the run waits for a summary other than ``key`` (a stale fetch message)."""
    return RunSummarizer.objects.filter(run_id=run_id).exclude(pending_key__in=("", key)).exists()


def mark_waiting(run_id: int, key: str) -> None:
    """Remember that the run waits for summary ``key`` (its fetch task is for that one)."""
    RunSummarizer.objects.filter(run_id=run_id).update(pending_key=key)


def runs_waiting_for(key: str, *, excluding: int) -> list[int]:
    """The other runs waiting for summary ``key`` (to wake once it is stored)."""
    waiting = RunSummarizer.objects.filter(pending_key=key).exclude(pk=excluding)
    return list(waiting.values_list("pk", flat=True))


def summarizer_key(backend: str | None, model: str | None) -> tuple[str, str]:
    """Who writes a run's summaries, as ``(backend, model)``: two runs of the same config
    replay alike only when this matches too. No settings row means the extractive default,
    whose model is never used."""
    backend = backend or Backend.EXTRACTIVE
    return backend, ("" if backend == Backend.EXTRACTIVE else model or "")


def run_summaries(
    data: dict[str, Any], messages: dict[str, list[dict[str, Any]]] | None
) -> list[dict[str, Any]]:
    """The summaries a run's replay used, each with the recorded one written at the same point.

    A recorded summary counts as "the same point" when it entered the history between the
    requests just before and just after the one the simulated summary precedes.
    """
    out: list[dict[str, Any]] = []
    requests = {(r["thread"], r["thread_request"]): r for r in as_result(data)["requests"]}
    for item in data.get("summaries") or []:
        row = dict(item)
        thread = row.get("thread") or "main"
        k = int(row.get("request") or 0)
        before = requests.get((thread, k - 1))
        after = requests.get((thread, k + 1)) or requests.get((thread, k))
        recorded = None
        if messages and before and after:
            for msg in messages.get(thread, [])[before["message"] : after["message"]]:
                if msg["kind"] == "summary":
                    recorded = "".join(b["text"] for b in msg["blocks"])
        row["recorded_text"] = recorded
        out.append(row)
    return out


def summarizer_status(run: Run) -> dict[str, Any] | None:
    """The API's view of a run's LLM summarizer (None for the default extractive one)."""
    settings = RunSummarizer.objects.filter(run=run).first()
    if settings is None or settings.backend == Backend.EXTRACTIVE:
        return None
    return {
        "backend": settings.backend,
        "model": settings.model,
        "calls": settings.calls,
        "spent_usd": settings.spent_usd,
        "spend_cap_usd": settings.spend_cap_usd,
        "waiting": settings.waiting and run.is_active,
    }


def waiting_for(run: Run) -> RunSummarizer | None:
    """The summarizer settings of a run that is waiting for a summary, else None."""
    return RunSummarizer.objects.filter(run=run).exclude(pending_key="").first()
