"""Advice: which Claude Code settings to use, measured by replaying a workspace's sessions.

An advice request owns no results of its own, as a sweep does: it points at ordinary what-if
runs (the sessions' own settings and one run per candidate config), reusing any identical run,
so its progress is its runs'. Once they are all done its recommendations are computed once and
kept in ``result``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse

from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript


class Advice(models.Model):
    """One advice request: sessions, a goal, the knobs to explore."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="advice"
    )
    workspace = models.ForeignKey(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="advice"
    )
    sessions = models.ManyToManyField(Transcript, related_name="advice")
    #: tuning.goals.GOALS
    goal = models.CharField(max_length=40, default="lowest_cost")
    cost_cap = models.FloatField(null=True, blank=True)
    #: ``{field: [values…]}`` explored one knob at a time
    knobs: models.JSONField[dict[str, list[Any]]] = models.JSONField(default=dict)
    #: how the sessions were chosen (project, since, until, member), for the page
    filters: models.JSONField[dict[str, Any]] = models.JSONField(default=dict, blank=True)
    #: the recommendations, once every run is done (advice.reports.recommend)
    result: models.JSONField[dict[str, Any] | None] = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at", "-pk")

    def __str__(self) -> str:
        return f"advice {self.pk}"

    def get_absolute_url(self) -> str:
        return reverse("advice:detail", args=[self.pk])


class AdviceRun(models.Model):
    """A run one candidate of an advice request uses on one session."""

    advice = models.ForeignKey(Advice, on_delete=models.CASCADE, related_name="items")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    #: "baseline" (the sessions' own settings) or the candidate's overrides as sorted JSON
    candidate = models.CharField(max_length=500)

    class Meta:
        constraints = (
            models.UniqueConstraint(
                fields=["advice", "candidate", "run"], name="advice_run_unique"
            ),
        )

    def __str__(self) -> str:
        return f"{self.advice} {self.candidate}: run {self.run_id}"
