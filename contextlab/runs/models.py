"""A replay of one session under one pipeline config, run by a Celery worker."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse

from contextlab.runs.labels import run_label
from contextlab.transcripts.models import Transcript


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    class Stage(models.TextChoices):
        """What the worker is doing, so the progress bar says what it measures."""

        NONE = "", "not started"
        COUNTING = "counting", "counting tokens"
        REPLAYING = "replaying", "replaying"

    class Mode(models.TextChoices):
        RECORDED = "recorded"
        WHATIF = "whatif", "what-if"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs"
    )
    transcript = models.ForeignKey(Transcript, on_delete=models.CASCADE, related_name="runs")
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.RECORDED)
    preset = models.CharField(max_length=60, blank=True)
    #: the user's field overrides, as submitted
    overrides: models.JSONField[dict[str, Any]] = models.JSONField(default=dict, blank=True)
    #: the resolved PipelineConfig (``to_dict()``) the worker replays with
    config: models.JSONField[dict[str, Any]] = models.JSONField(default=dict)
    #: the preset name resolve_config reports (e.g. what "auto" chose)
    resolved_preset = models.CharField(max_length=60, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    #: what progress_done / progress_total count: characters while counting tokens, then requests
    progress_stage = models.CharField(max_length=10, choices=Stage.choices, blank=True, default="")
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    #: the engine's result summary (small; the full result is in RunResult)
    summary: models.JSONField[dict[str, Any]] = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    #: refreshed by the worker while it replays; a stale one means the worker died
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    #: a live session grew: the next replay goes on from the last one's state (only the new
    #: requests, the calibration as fitted then) instead of replaying the session whole
    live_continue = models.BooleanField(default=False)
    #: the stored result went on from an earlier replay's state: its estimates are under a
    #: calibration fitted before the last requests, until a whole replay replaces it
    provisional = models.BooleanField(default=False)
    #: ``engine.ENGINE_VERSION`` of the worker that stored the result (0: stored before runs
    #: recorded it); only a run of the current version is reused by a comparison or sweep
    engine_version = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ("-created_at", "-pk")
        indexes = (models.Index(fields=["status", "heartbeat_at"]),)

    def __str__(self) -> str:
        return f"run {self.pk} ({self.mode}, {self.status})"

    def get_absolute_url(self) -> str:
        return reverse("runs:detail", args=[self.pk])

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)

    @property
    def progress(self) -> float:
        """Fraction done, 0..1."""
        if self.status == self.Status.DONE:
            return 1.0
        if not self.progress_total:
            return 0.0
        return min(1.0, self.progress_done / self.progress_total)

    @property
    def percent(self) -> int:
        return round(self.progress * 100)

    @property
    def label(self) -> str:
        return run_label(self.mode, self.preset, self.overrides)


#: ``RunResult.data``'s key, in the place of ``requests``, when the requests are stored in
#: ``RunResultPart`` rows (its value: how many requests)
REQUESTS_IN_PARTS = "_requests_in_parts"
#: ``RunResult.data``'s key of a live session's provisional result stored in parts of a fixed
#: number of requests (``jobs.lifecycle``): which store wrote them (not part of the result)
LIVE_PARTS_KEY = "_live_parts"
#: ``RunResult.data``'s key, in the place of ``views``, when a live session's provisional
#: result keeps its view log in ``RunResultViewPart`` rows (its value: each list's name and
#: length, in the order of ``views``' keys)
VIEWS_IN_PARTS = "_views_in_parts"


class RunResult(models.Model):
    """The engine's ``ReplayResult.to_json()``, stored once per finished run.

    Requests of more than ``RUN_RESULT_PART_CHARS`` characters of JSON are stored in parts
    (``RunResultPart``, ``engine.json_list_parts``): ``data`` then holds the rest, with
    ``REQUESTS_IN_PARTS`` where ``requests`` was (one JSON value of every request would not fit
    PostgreSQL's ``jsonb``, 256 MB a value, past sessions of about 4.5 GB). Fewer are in
    ``data``, as every result stored before parts: read a result with ``read``."""

    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="result"
    )
    data: models.JSONField[dict[str, Any]] = models.JSONField()

    def __str__(self) -> str:
        return f"result of run {self.run_id}"

    def read(self) -> dict[str, Any]:
        """The engine's result as stored, its requests and views put back in their place."""
        data: dict[str, Any] = self.data
        if REQUESTS_IN_PARTS not in data and VIEWS_IN_PARTS not in data:
            return data
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key == REQUESTS_IN_PARTS:
                out["requests"] = self.requests()
            elif key == VIEWS_IN_PARTS:
                out["views"] = self.views()
            elif key != LIVE_PARTS_KEY:
                out[key] = value
        return out

    def requests(self) -> list[dict[str, Any]]:
        """The result's requests, in order."""
        if REQUESTS_IN_PARTS not in self.data:
            return list(self.data.get("requests") or [])
        requests: list[dict[str, Any]] = []
        # one part's value fetched at a time (a long session's requests are hundreds of MB)
        for part in (
            self.parts.order_by("seq").values_list("data", flat=True).iterator(chunk_size=1)
        ):
            requests.extend(part)
        return requests

    def views(self) -> dict[str, list[dict[str, Any]]]:
        """The result's ``views`` (the replay's transform log and synthetic messages)."""
        lengths = self.data.get(VIEWS_IN_PARTS)
        if not isinstance(lengths, dict):
            views: dict[str, list[dict[str, Any]]] = self.data.get("views") or {}
            return views
        out: dict[str, list[dict[str, Any]]] = {name: [] for name in lengths}
        for kind, part in self.view_parts.order_by("kind", "seq").values_list("kind", "data"):
            out[kind].extend(part)
        return out


class RunResultPart(models.Model):
    """Consecutive requests of a run's result (``RunResult``), a list of at most
    ``RUN_RESULT_PART_CHARS`` characters of JSON (one request longer than that alone)."""

    result = models.ForeignKey(RunResult, on_delete=models.CASCADE, related_name="parts")
    seq = models.PositiveIntegerField()
    data: models.JSONField[list[dict[str, Any]]] = models.JSONField()

    class Meta:
        constraints = (models.UniqueConstraint(fields=["result", "seq"], name="run_result_part"),)

    def __str__(self) -> str:
        return f"part {self.seq} of the result of run {self.result_id}"


class RunResultViewPart(models.Model):
    """Consecutive entries of one list of a live session's provisional result's ``views``
    (``kind``: ``transforms`` or ``synthetic``; ``RunResult.views``). An append adds entries
    at the end and closes a few earlier transforms: only the parts it changed are written
    (``jobs.lifecycle._store_live_views``), where the head's ``views`` (about 1 MB of JSON
    at 64 MB) was written whole at every append."""

    result = models.ForeignKey(RunResult, on_delete=models.CASCADE, related_name="view_parts")
    kind = models.CharField(max_length=32)
    seq = models.PositiveIntegerField()
    data: models.JSONField[list[dict[str, Any]]] = models.JSONField()

    class Meta:
        constraints = (
            models.UniqueConstraint(fields=["result", "kind", "seq"], name="run_result_view_part"),
        )

    def __str__(self) -> str:
        return f"{self.kind} part {self.seq} of the result of run {self.result_id}"
