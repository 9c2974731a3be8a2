"""Request-side tuning: validate and save configs, start comparisons and sweeps, report them.

Runs are shared: a comparison or sweep reuses any run of the same session (what-if mode) whose
resolved config and summarizer are identical and that is queued, running or done; only the
missing ones are created (by ``jobs.lifecycle.create``, as a single run is). New runs are
enqueued after commit as batches (``jobs.tasks.replay_batch``) so a worker parses and tokenizes a
session once for all the configs it replays.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Q

from contextlab import engine
from contextlab.jobs import lifecycle, tasks
from contextlab.runs import services as run_services
from contextlab.runs.models import Run
from contextlab.summaries import services as summaries
from contextlab.summaries.models import Backend
from contextlab.transcripts.models import MAX_ROW_ID, Transcript
from contextlab.tuning.configs import ConfigSpec, prefixed, validate_config
from contextlab.tuning.models import (
    Comparison,
    ComparisonRun,
    ConfigVersion,
    SavedConfig,
    Side,
    Sweep,
    SweepRun,
)
from contextlab.workspaces import access
from contextlab.workspaces import services as workspace_services
from contextlab.workspaces.models import Workspace

#: New runs of one request are split into at most this many batches per session, so that
#: this many workers can share the work while each parses the session only once.
PARALLEL_BATCHES = 2
#: Most sessions one comparison or sweep may span.
MAX_SESSIONS = 50
#: Most runs one sweep may queue (sessions x values): a 50 x 50 sweep held the only worker
#: for hours while other users' uploads waited.
MAX_SWEEP_RUNS = 250


#: The name this module used for a bad tuning request (``a.config.<name>``, ``values``…); the
#: engine's one field-error type.
TuningError = engine.FieldError


# --- configs ----------------------------------------------------------------------------------


def target_workspace(user: User, workspace_id: int | None) -> Workspace:
    """The workspace a new config, comparison or sweep goes to: the one named, where ``user``
    must be an editor, else their personal workspace. ``engine.FieldError`` on
    ``workspace_id`` otherwise (a workspace one cannot see reads as missing)."""
    if workspace_id is None:
        return workspace_services.personal_workspace(user)
    role = access.role_in(user, workspace_id) if 1 <= workspace_id <= MAX_ROW_ID else None
    if role is None:
        raise engine.FieldError("workspace_id", "no such workspace")
    if not role.allows(access.WRITE):
        raise engine.FieldError(
            "workspace_id", f"you are a {role} of that workspace; creating needs editor"
        )
    return Workspace.objects.get(pk=workspace_id)


def save_config(
    *,
    owner: User,
    name: str,
    preset: str,
    overrides: dict[str, Any],
    saved: SavedConfig | None = None,
    workspace: Workspace | None = None,
) -> ConfigVersion:
    """Save a config: a new ``SavedConfig`` with version 1 (in ``workspace``, by default the
    owner's personal one), or a new version of ``saved`` (in its workspace).

    Versions are never changed, so runs made with an older version keep their config. Saving
    what the latest version already holds returns that version.
    """
    name = (name or "").strip()
    if not name:
        raise engine.FieldError("name", "give the config a name")
    if len(name) > 100:
        raise engine.FieldError("name", "at most 100 characters")
    preset = preset or "auto"
    validate_config(preset, overrides)
    with transaction.atomic():
        if saved is None:
            workspace = workspace or workspace_services.personal_workspace(owner)
            try:
                with transaction.atomic():
                    saved = SavedConfig.objects.create(
                        owner=owner, workspace=workspace, name=name, base_preset=preset
                    )
            except IntegrityError:
                raise engine.FieldError(
                    "name", f"{workspace.name} already has a config called {name!r}"
                ) from None
        else:
            saved = SavedConfig.objects.select_for_update().get(pk=saved.pk)
            if name != saved.name:
                taken = SavedConfig.objects.filter(workspace_id=saved.workspace_id, name=name)
                if taken.exclude(pk=saved.pk).exists():
                    raise engine.FieldError(
                        "name", f"this workspace already has a config called {name!r}"
                    )
                saved.name = name
        latest = saved.latest
        if latest is not None and latest.base_preset == preset and latest.overrides == overrides:
            saved.save()
            return latest
        saved.base_preset = preset
        saved.save()
        return ConfigVersion.objects.create(
            saved_config=saved,
            number=(latest.number + 1) if latest else 1,
            base_preset=preset,
            overrides=overrides,
        )


def delete_owned(item: SavedConfig | Comparison | Sweep) -> None:
    """Delete a saved config (all its versions), a comparison or a sweep, and nothing else.

    Runs stay with their sessions: the session pages, other comparisons and sweeps may use
    them, and a later comparison with the same config reuses them. Comparisons and sweeps built
    on a deleted config keep its preset and overrides, so they still show and reuse the same
    settings (labelled by the preset and what they change, "auto · autocompact 70 %", instead of the
    config's name). Its runs that are
    still queued or running and that no other comparison or sweep uses are cancelled, so a
    deleted sweep stops holding the workers.
    """
    if isinstance(item, Comparison | Sweep):
        kind = "comparison" if isinstance(item, Comparison) else "sweep"
        with transaction.atomic():
            lifecycle.cancel(
                _unshared_runs(item), f"Cancelled: the {kind} it belonged to was deleted."
            )
            item.delete()
        return
    item.delete()


# --- runs -------------------------------------------------------------------------------------


def _unshared_runs(item: Comparison | Sweep) -> list[int]:
    """Ids of the item's runs that no other comparison or sweep uses."""
    run_ids = set(item.items.values_list("run_id", flat=True))
    in_comparisons = ComparisonRun.objects.filter(run_id__in=run_ids)
    in_sweeps = SweepRun.objects.filter(run_id__in=run_ids)
    if isinstance(item, Comparison):
        in_comparisons = in_comparisons.exclude(comparison=item)
    else:
        in_sweeps = in_sweeps.exclude(sweep=item)
    shared = set(in_comparisons.values_list("run_id", flat=True)) | set(
        in_sweeps.values_list("run_id", flat=True)
    )
    return sorted(run_ids - shared)


def cancel_owned(item: Comparison | Sweep) -> tuple[int, int]:
    """Stop the item's queued and running runs that no other comparison or sweep uses (they
    end failed, "Cancelled"); the item stays, with what finished. Returns (stopped, still
    active because another comparison or sweep uses them)."""
    kind = "comparison" if isinstance(item, Comparison) else "sweep"
    stopped = lifecycle.cancel(_unshared_runs(item), f"Cancelled by its owner (the {kind}).")
    active = Run.objects.filter(
        pk__in=item.items.values_list("run_id", flat=True),
        status__in=(Run.Status.QUEUED, Run.Status.RUNNING),
    ).count()
    return len(stopped), active


def owned_sessions(owner: User, ids: Sequence[int]) -> list[Transcript] | None:
    """The sessions with these ids that ``owner`` may run replays on (editor or owner of their
    workspace), in order; None if any is missing or not allowed."""
    unique = list(dict.fromkeys(int(i) for i in ids))
    if any(not 1 <= i <= MAX_ROW_ID for i in unique):
        return None  # no row has such an id (and SQLite cannot even compare past 2**63)
    found = {t.pk: t for t in access.sessions(owner, access.WRITE).filter(pk__in=unique)}
    if len(found) != len(unique):
        return None
    return [found[i] for i in unique]


def _check_sessions(transcripts: Sequence[Transcript]) -> None:
    if not transcripts:
        raise engine.FieldError("session_ids", "pick at least one session")
    if len(transcripts) > MAX_SESSIONS:
        raise engine.FieldError("session_ids", f"at most {MAX_SESSIONS} sessions at once")


def resolved_for(
    transcript: Transcript, spec: ConfigSpec, *, prefix: str = ""
) -> tuple[dict[str, Any], str]:
    """The config dict and preset name a run of ``spec`` on ``transcript`` replays with."""
    try:
        config, preset_name = engine.resolve_request_config(
            spec.preset,
            spec.overrides,
            version=transcript.version or None,
            max_recorded_prompt=transcript.max_prompt_tokens or None,
            recorded_auto_compactions=run_services.recorded_auto_compactions(transcript),
            recorded_window=run_services.recorded_window(transcript),
            agent=transcript.agent,
        )
    except engine.FieldError as exc:
        raise engine.FieldError(
            prefixed(prefix, exc.field), f"{exc.message} (session {transcript.display_name})"
        ) from None
    return config.to_dict(), preset_name


def reusable_run(
    *,
    owner: User,
    transcript: Transcript,
    config: dict[str, Any],
    summarizer: str = Backend.EXTRACTIVE,
    summary_model: str = "",
    any_owner: bool = False,
) -> Run | None:
    """The newest what-if run of this session with exactly this config and summarizer that is
    not failed (a run whose summaries an LLM wrote is no stand-in for an extractive one); with
    ``any_owner``, whoever started it (every member of the session's workspace sees its runs),
    else only ``owner``'s. A finished run is reused only if this engine version stored it (an
    older engine's result may differ); a queued or running one will be replayed by this one.

    Configs are compared as dicts in Python (JSON equality in SQL differs between SQLite and
    PostgreSQL); only the small config and summarizer columns of the candidates are read.
    """
    wanted = summaries.summarizer_key(summarizer, summary_model)
    candidates = Run.objects.filter(
        Q(status__in=(Run.Status.RUNNING, Run.Status.QUEUED))
        | Q(status=Run.Status.DONE, engine_version=engine.ENGINE_VERSION),
        transcript=transcript,
        mode=Run.Mode.WHATIF,
    )
    if not any_owner:
        candidates = candidates.filter(owner=owner)
    rows = candidates.values_list(
        "pk", "status", "config", "summarizer_settings__backend", "summarizer_settings__model"
    )
    matches = [
        (status != Run.Status.DONE, -pk)
        for pk, status, cfg, backend, model in rows
        if cfg == config and summaries.summarizer_key(backend, model) == wanted
    ]
    if not matches:
        return None
    # prefer a finished run, then the newest
    return Run.objects.get(pk=-min(matches)[1])


@dataclass
class RunPlan:
    """Runs found or created for one request, and which are new (to enqueue).

    Its runs' summaries are written by ``summarizer`` (comparisons and sweeps use the
    extractive default), and only runs with that summarizer are reused.
    """

    runs: list[Run] = field(default_factory=list)
    new: list[Run] = field(default_factory=list)
    summarizer: str = Backend.EXTRACTIVE
    summary_model: str = ""
    #: reuse the runs of every member of a session's workspace, not only the owner's
    any_owner: bool = False
    _made: dict[tuple[int, str], Run] = field(default_factory=dict)

    def ensure(self, *, owner: User, transcript: Transcript, spec: ConfigSpec, prefix: str) -> Run:
        config, preset_name = resolved_for(transcript, spec, prefix=prefix)
        key = (transcript.pk, json.dumps(config, sort_keys=True))
        run = self._made.get(key) or reusable_run(
            owner=owner,
            transcript=transcript,
            config=config,
            summarizer=self.summarizer,
            summary_model=self.summary_model,
            any_owner=self.any_owner,
        )
        if run is None:
            # created as start_run creates one, from the config the engine resolved above
            run = lifecycle.create(
                owner=owner,
                transcript=transcript,
                mode=Run.Mode.WHATIF,
                preset=spec.preset,
                overrides=spec.overrides,
                config=config,
                resolved_preset=preset_name,
                summarizer=self.summarizer,
                summary_model=self.summary_model,
            )
            self.new.append(run)
        self._made[key] = run
        self.runs.append(run)
        return run


def batches(runs: Sequence[Run], parallel: int = PARALLEL_BATCHES) -> list[list[int]]:
    """Run ids grouped per session, each session's runs split into a few batches.

    With at least ``parallel`` sessions each gets one batch (the sessions spread over the
    workers); with fewer, a session's runs are split so ``parallel`` workers share them.
    """
    by_session: dict[int, list[int]] = defaultdict(list)
    for run in runs:
        by_session[run.transcript_id].append(run.pk)
    per_session = max(1, math.ceil(parallel / max(1, len(by_session))))
    out: list[list[int]] = []
    for ids in by_session.values():
        parts = min(per_session, len(ids))
        size = math.ceil(len(ids) / parts)
        out.extend(ids[i : i + size] for i in range(0, len(ids), size))
    return out


def enqueue(runs: Sequence[Run]) -> None:
    """Queue new runs after commit, as batches that share each session's parsing."""
    tasks.queue_batches(batches(runs))


def create_comparison(
    *,
    owner: User,
    transcripts: Sequence[Transcript],
    a: ConfigSpec,
    b: ConfigSpec,
    workspace: Workspace | None = None,
) -> Comparison:
    """A comparison of A and B on the sessions, reusing identical runs, queuing the rest; it
    belongs to ``workspace`` (by default the owner's personal one)."""
    _check_sessions(transcripts)
    plan = RunPlan()
    with transaction.atomic():
        comparison = Comparison.objects.create(
            owner=owner,
            workspace=workspace or workspace_services.personal_workspace(owner),
            a_preset=a.preset,
            a_overrides=a.overrides,
            a_version=a.version,
            b_preset=b.preset,
            b_overrides=b.overrides,
            b_version=b.version,
        )
        comparison.sessions.set(transcripts)
        items = []
        for transcript in transcripts:
            for side, spec in ((Side.A, a), (Side.B, b)):
                run = plan.ensure(owner=owner, transcript=transcript, spec=spec, prefix=side)
                items.append(ComparisonRun(comparison=comparison, run=run, side=side))
        ComparisonRun.objects.bulk_create(items, ignore_conflicts=True)
        enqueue(plan.new)
    return comparison


def sweep_values(field_name: str, values: str | Sequence[Any], base: ConfigSpec) -> list[Any]:
    """Parsed sweep values; ``engine.FieldError`` on ``field`` (bad field) or ``values``."""
    numeric = {spec["name"] for spec in engine.compare.numeric_fields()}
    known = {spec["name"] for spec in engine.field_specs()}
    if field_name not in known:
        raise engine.FieldError("field", f"unknown field {field_name!r}")
    if field_name not in numeric:
        raise engine.FieldError("field", f"{field_name} is not numeric; a sweep varies a number")
    if not isinstance(values, str) and not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        raise engine.FieldError("values", "values must be numbers")
    try:
        parsed = engine.compare.parse_sweep_values(
            field_name, values, base=validate_config(base.preset, base.overrides, prefix="base")
        )
    except engine.FieldError as exc:
        raise engine.FieldError("values", f"{field_name}: {exc.message}") from None
    except ValueError as exc:
        raise engine.FieldError("values", f"not a list or range of numbers ({exc})") from None
    return parsed


def create_sweep(
    *,
    owner: User,
    transcripts: Sequence[Transcript],
    base: ConfigSpec,
    field_name: str,
    values: str | Sequence[Any],
    workspace: Workspace | None = None,
) -> Sweep:
    """A sweep: one run per value per session (identical runs reused); it belongs to
    ``workspace`` (by default the owner's personal one)."""
    _check_sessions(transcripts)
    parsed = sweep_values(field_name, values, base)
    if len(transcripts) * len(parsed) > MAX_SWEEP_RUNS:
        raise engine.FieldError(
            "values",
            f"{len(parsed)} values on {len(transcripts)} sessions make "
            f"{len(parsed) * len(transcripts)} runs; at most {MAX_SWEEP_RUNS} per sweep "
            "(fewer values or sessions)",
        )
    plan = RunPlan()
    with transaction.atomic():
        sweep = Sweep.objects.create(
            owner=owner,
            workspace=workspace or workspace_services.personal_workspace(owner),
            base_preset=base.preset,
            base_overrides=base.overrides,
            base_version=base.version,
            field=field_name,
            values=parsed,
        )
        sweep.sessions.set(transcripts)
        items = []
        for transcript in transcripts:
            for value in parsed:
                spec = ConfigSpec(
                    preset=base.preset, overrides={**base.overrides, field_name: value}
                )
                run = plan.ensure(owner=owner, transcript=transcript, spec=spec, prefix="values")
                items.append(SweepRun(sweep=sweep, run=run, value=value))
        SweepRun.objects.bulk_create(items)
        enqueue(plan.new)
    return sweep


# --- reports ----------------------------------------------------------------------------------
