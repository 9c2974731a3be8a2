"""Summaries written by LLM backends, cached once, and each run's summarizer settings."""

from __future__ import annotations

from typing import Any

from django.db import models

from contextlab import engine
from contextlab.runs.models import Run


class Backend(models.TextChoices):
    EXTRACTIVE = "extractive", "Extractive (offline, no model call)"
    ANTHROPIC = "anthropic", "Anthropic Messages API"
    OPENAI = "openai", "OpenAI-compatible endpoint (Ollama, vLLM, llama.cpp…)"


class SummaryEntry(models.Model):
    """One summary a backend wrote, keyed by (backend, model, prompt version, input hash).

    Shared by every run and user: the same input to the same model never costs twice.
    """

    key = models.CharField(max_length=400, unique=True)
    backend = models.CharField(max_length=20, choices=Backend.choices)
    model = models.CharField(max_length=200, blank=True)
    prompt_version = models.CharField(max_length=60)
    kind = models.CharField(max_length=20)
    text = models.TextField()
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cache_read_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    latency_s = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.backend}:{self.model or '-'} {self.kind} ({self.output_tokens} tokens)"

    def as_result(self) -> engine.SummaryResult:
        return engine.SummaryResult(
            text=self.text,
            backend=self.backend,
            model=self.model or None,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost_usd=self.cost_usd,
            latency_s=self.latency_s,
            cache_read_tokens=self.cache_read_tokens,
        )


class SummaryLease(models.Model):
    """The run whose fetch task is calling the backend for summary ``key`` right now.

    Two runs that need the same summary at once (an A/B pair on two workers) would otherwise
    both pay for it: the second sees the lease, waits, and reads the first one's summary. A
    lease whose run no longer heartbeats (a killed worker) is taken over.
    """

    key = models.CharField(max_length=400, primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="summary_leases")
    taken_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.key[:60]} → run {self.run_id}"


class RunSummarizer(models.Model):
    """Which backend writes a run's summaries, what it may spend, and the summary it waits for."""

    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="summarizer_settings"
    )
    backend = models.CharField(max_length=20, choices=Backend.choices, default=Backend.EXTRACTIVE)
    model = models.CharField(max_length=200, blank=True)
    spend_cap_usd = models.FloatField(null=True, blank=True)
    spent_usd = models.FloatField(default=0.0)
    calls = models.PositiveIntegerField(default=0)
    consecutive_failures = models.PositiveSmallIntegerField(default=0)
    #: summaries that fell back to the extractive one: kept for this run only, never cached
    fallbacks: models.JSONField[dict[str, Any]] = models.JSONField(default=dict, blank=True)
    #: the summary the run waits for (its fetch task rebuilds the input from the checkpoint)
    pending_key = models.CharField(max_length=400, blank=True)

    def __str__(self) -> str:
        return f"run {self.run_id}: {self.backend}"

    @property
    def waiting(self) -> bool:
        return bool(self.pending_key)
