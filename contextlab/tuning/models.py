"""Tuning: saved pipeline configs (versioned), A/B comparisons and one-field sweeps.

Each belongs to a workspace (``owner`` is who created it): its members read it, its editors
create and run, its owners delete, through ``contextlab.workspaces.access``.

A comparison or sweep owns no results of its own: it points at ordinary what-if runs, reusing
any run of the same session with the identical resolved config, so its status is derived from
those runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse

from contextlab.runs.labels import describe_overrides
from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript


def derived_status(runs: Iterable[Run]) -> str:
    """One status for a set of runs: failed if any failed, running while any is active.

    No runs at all (their sessions were deleted) is "done": there is nothing left to wait for.
    """
    statuses = {run.status for run in runs}
    if not statuses:
        return Run.Status.DONE
    if Run.Status.FAILED in statuses:
        return Run.Status.FAILED
    if statuses == {Run.Status.QUEUED}:
        return Run.Status.QUEUED
    if statuses & {Run.Status.QUEUED, Run.Status.RUNNING}:
        return Run.Status.RUNNING
    return Run.Status.DONE


def config_label(preset: str, overrides: dict[str, Any]) -> str:
    """A preset and what the overrides change on it: "auto · autocompact 70 %"."""
    changed = describe_overrides(overrides or {})
    return f"{preset} · {changed}" if changed else preset


class SavedConfig(models.Model):
    """A named pipeline config; its content lives in immutable ``ConfigVersion`` rows."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_configs"
    )
    workspace = models.ForeignKey(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="saved_configs"
    )
    name = models.CharField(max_length=100)
    #: the base preset of the latest version ("auto" included)
    base_preset = models.CharField(max_length=60, default="auto")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name", "pk")
        constraints = (
            models.UniqueConstraint(
                fields=["workspace", "name"], name="saved_config_unique_name_per_workspace"
            ),
        )

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("tuning:config", args=[self.pk])

    @property
    def latest(self) -> ConfigVersion | None:
        return self.versions.order_by("-number").first()


class ConfigVersion(models.Model):
    """One immutable state of a saved config: editing adds a version, never changes one."""

    saved_config = models.ForeignKey(SavedConfig, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    base_preset = models.CharField(max_length=60, default="auto")
    #: field overrides applied on top of the base preset
    overrides: models.JSONField[dict[str, Any]] = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-number",)
        constraints = (
            models.UniqueConstraint(
                fields=["saved_config", "number"], name="config_version_unique_number"
            ),
        )

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        return f"{self.saved_config.name} v{self.number}"


class Side(models.TextChoices):
    A = "a", "A"
    B = "b", "B"


class Comparison(models.Model):
    """Config A against config B on one or more sessions."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="comparisons"
    )
    workspace = models.ForeignKey(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="comparisons"
    )
    sessions = models.ManyToManyField(Transcript, related_name="comparisons")
    a_preset = models.CharField(max_length=60, default="auto")
    a_overrides: models.JSONField[dict[str, Any]] = models.JSONField(default=dict, blank=True)
    a_version = models.ForeignKey(
        ConfigVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    b_preset = models.CharField(max_length=60, default="auto")
    b_overrides: models.JSONField[dict[str, Any]] = models.JSONField(default=dict, blank=True)
    b_version = models.ForeignKey(
        ConfigVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at", "-pk")

    def __str__(self) -> str:
        return f"comparison {self.pk}"

    def get_absolute_url(self) -> str:
        return reverse("tuning:comparison", args=[self.pk])

    def side_label(self, side: str) -> str:
        version: ConfigVersion | None = getattr(self, f"{side}_version")
        if version is not None:
            return version.label
        preset: str = getattr(self, f"{side}_preset")
        overrides: dict[str, Any] = getattr(self, f"{side}_overrides")
        return config_label(preset, overrides)

    @property
    def a_label(self) -> str:
        return self.side_label(Side.A)

    @property
    def b_label(self) -> str:
        return self.side_label(Side.B)


class ComparisonRun(models.Model):
    """A run one side of a comparison uses (the same run may serve both sides)."""

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="items")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    side = models.CharField(max_length=1, choices=Side.choices)

    class Meta:
        constraints = (
            models.UniqueConstraint(
                fields=["comparison", "side", "run"], name="comparison_run_unique"
            ),
        )

    def __str__(self) -> str:
        return f"{self.comparison} {self.side}: run {self.run_id}"


class Sweep(models.Model):
    """One numeric config field varied over a list of values, on one or more sessions."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sweeps"
    )
    workspace = models.ForeignKey(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="sweeps"
    )
    sessions = models.ManyToManyField(Transcript, related_name="sweeps")
    base_preset = models.CharField(max_length=60, default="auto")
    base_overrides: models.JSONField[dict[str, Any]] = models.JSONField(default=dict, blank=True)
    base_version = models.ForeignKey(
        ConfigVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    field = models.CharField(max_length=100)
    values: models.JSONField[list[Any]] = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at", "-pk")

    def __str__(self) -> str:
        return f"sweep {self.pk} of {self.field}"

    def get_absolute_url(self) -> str:
        return reverse("tuning:sweep", args=[self.pk])

    @property
    def base_label(self) -> str:
        if self.base_version is not None:
            return self.base_version.label
        return config_label(self.base_preset, self.base_overrides)


class SweepRun(models.Model):
    """The run of one sweep value on one session."""

    sweep = models.ForeignKey(Sweep, on_delete=models.CASCADE, related_name="items")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    value: models.JSONField[Any] = models.JSONField()

    def __str__(self) -> str:
        return f"{self.sweep} = {self.value}: run {self.run_id}"
