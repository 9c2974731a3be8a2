"""Request-side advice: choose the sessions, check the goal and knobs, plan the runs.

The candidates are the sessions' own settings (the ``auto`` preset: each session's Claude Code
version and its recorded window) and, one knob at a time, each value to explore on top of it.
Every (session, candidate) is an ordinary what-if run, planned by ``tuning.services.RunPlan``:
an identical run of any member of the session's workspace is reused, the missing ones are
queued as batches for the worker (``contextlab.jobs``), which parses each session once for all
its candidates. A threshold candidate the session never comes near (``never_reached``) replays
exactly as its own settings do, so it uses that run. Cancelling stops the runs no comparison, sweep or other advice uses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from contextlab import engine
from contextlab.advice.models import Advice, AdviceRun
from contextlab.jobs import lifecycle
from contextlab.transcripts.models import MAX_ROW_ID, Transcript
from contextlab.tuning import goals
from contextlab.tuning import services as tuning_services
from contextlab.tuning.configs import ConfigSpec, validate_config
from contextlab.tuning.models import ComparisonRun, SweepRun
from contextlab.workspaces import access
from contextlab.workspaces.models import Role

BASELINE = "baseline"
#: The knobs advice may explore (fields Claude Code has a setting for), with default values.
EXPLORABLE: dict[str, list[Any]] = {
    "autocompact_pct_override": [60, 70, 80, 90],
    "cache_ttl": ["5m", "1h"],
    "auto_compact_window": [100_000, 150_000],
    "autocompact_enabled": [False],
    "max_output_tokens": [8_000, 16_000],
    "context_window": [200_000],
}
DEFAULT_KNOBS = ("autocompact_pct_override", "cache_ttl")
#: At most this many values per knob, and candidates (values over all knobs) per request.
MAX_VALUES = 8
MAX_CANDIDATES = 16
#: At most this many runs (sessions x (candidates + 1)) per request.
MAX_RUNS = 300
MAX_SESSIONS = tuning_services.MAX_SESSIONS
MAX_FILTER_CHARS = 200


@dataclass(frozen=True)
class Filters:
    """How to choose a workspace's sessions (all optional)."""

    project: str = ""
    since: date | None = None
    until: date | None = None
    member: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            key: str(value)
            for key, value in (
                ("project", self.project),
                ("since", self.since or ""),
                ("until", self.until or ""),
                ("member", self.member),
            )
            if value
        }


def candidate_key(overrides: Mapping[str, Any]) -> str:
    return json.dumps(dict(overrides), sort_keys=True) if overrides else BASELINE


def candidate_overrides(key: str) -> dict[str, Any]:
    return {} if key == BASELINE else dict(json.loads(key))


#: Candidate fields whose only effect is the autocompact threshold and the window's limits.
THRESHOLD_ONLY = frozenset({"autocompact_pct_override", "auto_compact_window"})
#: A decision count can pass the largest recorded prompt by the reply's output (Claude Code
#: counts it) and by the count's own error: a threshold above both is never reached.
OUTPUT_MARGIN = 32_000
COUNT_MARGIN = 1.15
#: The largest output reserve a preset takes off the window (2.0.x reserved all of it).
LARGEST_RESERVE = 64_000


def never_reached(transcript: Transcript, config: Mapping[str, Any]) -> bool:
    """True when no request of the session can reach this config's autocompact threshold or
    blocking limit, taken at their lowest (the largest output reserve): its replay is then
    the same as with the session's own settings, whose limits are as high or higher."""
    largest = transcript.max_prompt_tokens
    if not largest or transcript.continues_id is not None:
        return False  # nothing recorded to bound it, or it replays earlier sessions too
    built = engine.PipelineConfig.from_dict(config)
    if built.snip_enabled or built.collapse_enabled:
        return False  # these act on the effective window, not only on the threshold
    low = engine.compute_thresholds(built.replace(max_output_tokens=LARGEST_RESERVE), None)
    return largest * COUNT_MARGIN + OUTPUT_MARGIN < min(
        low.autocompact_threshold, low.blocking_limit
    )


def check_knobs(knobs: Mapping[str, Any] | None) -> dict[str, list[Any]]:
    """The knobs to explore, ``{field: [values]}`` (a list of field names takes the default
    values); ``engine.FieldError`` on ``knobs`` or ``knobs.<field>`` otherwise."""
    if knobs is None or knobs == {}:
        return {name: list(EXPLORABLE[name]) for name in DEFAULT_KNOBS}
    if not isinstance(knobs, Mapping):
        raise engine.FieldError("knobs", "an object of field name → list of values")
    out: dict[str, list[Any]] = {}
    for name, values in knobs.items():
        # only a field-like name is echoed back
        shown = name if isinstance(name, str) and re.fullmatch(r"[a-z_0-9]{1,60}", name) else "?"
        if name not in EXPLORABLE:
            kind = engine.field_kind(name) if isinstance(name, str) else "experiment"
            why = (
                "no Claude Code setting produces it"
                if kind != "knob"
                else "advice does not explore it"
            )
            raise engine.FieldError(
                "knobs", f"{shown!r} cannot be explored ({why}); one of {', '.join(EXPLORABLE)}"
            )
        if values is None:
            values = list(EXPLORABLE[name])
        if not isinstance(values, list) or not values:
            raise engine.FieldError(f"knobs.{name}", "a non-empty list of values")
        if len(values) > MAX_VALUES:
            raise engine.FieldError(f"knobs.{name}", f"at most {MAX_VALUES} values")
        checked: list[Any] = []
        for value in values:
            if isinstance(value, float) and value.is_integer():
                value = int(value)  # 70, as a person types it (a float field takes it)
            try:
                validate_config("auto", {name: value}, prefix="knobs")
            except engine.FieldError as exc:
                raise engine.FieldError(f"knobs.{name}", exc.message) from None
            settings = engine.claude_code_settings({name: value})
            if name in settings.not_expressible:
                raise engine.FieldError(f"knobs.{name}", settings.not_expressible[name])
            if value not in checked:
                checked.append(value)
        out[name] = checked
    if sum(len(v) for v in out.values()) > MAX_CANDIDATES:
        raise engine.FieldError("knobs", f"at most {MAX_CANDIDATES} values over all knobs")
    return out


def candidates(knobs: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    """The sessions' own settings, then each knob value alone on top of them."""
    return [{}] + [{name: value} for name, values in knobs.items() for value in values]


def _day(value: str | date | None, field: str) -> date | None:
    if value is None or value == "":
        return None
    if isinstance(value, date):
        return value
    text = str(value).strip()
    if len(text) == 10:
        try:
            return date.fromisoformat(text)
        except ValueError:
            pass
    raise engine.FieldError(field, f"a date as YYYY-MM-DD, got {str(value)[:20]!r}")


def filters_from(data: Mapping[str, Any]) -> Filters:
    """``Filters`` from a form or request body; ``engine.FieldError`` naming a bad field."""
    texts: dict[str, str] = {}
    for key in ("project", "member"):
        raw = data.get(key) or ""
        if not isinstance(raw, str):
            raise engine.FieldError(key, "must be text")
        if len(raw) > MAX_FILTER_CHARS:
            raise engine.FieldError(key, f"at most {MAX_FILTER_CHARS} characters")
        if "\x00" in raw:
            raise engine.FieldError(key, "Null characters are not allowed")
        texts[key] = raw.strip()
    since = _day(data.get("since"), "since")
    until = _day(data.get("until"), "until")
    if since and until and since > until:
        raise engine.FieldError("until", "the range ends before it starts")
    return Filters(project=texts["project"], since=since, until=until, member=texts["member"])


def workspace_sessions(user: User, workspace_id: int, filters: Filters) -> list[Transcript]:
    """The sessions of a workspace (where ``user`` is an editor) that match the filters."""
    workspace = tuning_services.target_workspace(user, workspace_id)
    found = Transcript.objects.filter(workspace=workspace)
    if filters.project:
        found = found.filter(project__icontains=filters.project)
    if filters.member:
        found = found.filter(owner__username=filters.member)
    tz = timezone.get_current_timezone()
    if filters.since:
        found = found.filter(created_at__gte=datetime.combine(filters.since, time.min, tz))
    if filters.until:
        found = found.filter(created_at__lte=datetime.combine(filters.until, time.max, tz))
    return list(found.order_by("pk")[: MAX_SESSIONS + 1])


def choose_sessions(
    user: User,
    *,
    session_ids: Sequence[int] | None,
    workspace_id: int | None,
    filters: Filters,
) -> list[Transcript]:
    """The sessions named (each one ``user`` may run replays on), or a workspace's that match
    the filters; ``engine.FieldError`` when none, too many, or one is not allowed."""
    if session_ids:
        found = tuning_services.owned_sessions(user, session_ids)
        if found is None:
            raise engine.FieldError("session_ids", "no such session (or you may not run it)")
    elif workspace_id is not None:
        found = workspace_sessions(user, workspace_id, filters)
        if not found:
            raise engine.FieldError("workspace_id", "no session of that workspace matches")
    else:
        raise engine.FieldError("session_ids", "name sessions, or a workspace and filters")
    if len(found) > MAX_SESSIONS:
        raise engine.FieldError(
            "session_ids", f"more than {MAX_SESSIONS} sessions; narrow the filters"
        )
    return found


def create_advice(
    *,
    owner: User,
    transcripts: Sequence[Transcript],
    goal: str,
    cost_cap: float | None,
    knobs: Mapping[str, Any] | None,
    filters: Filters | None = None,
    workspace_id: int | None = None,
) -> Advice:
    """An advice request: its runs planned (identical ones reused), the new ones queued."""
    goals.check_goal(goal, cost_cap)
    explored = check_knobs(knobs)
    options = candidates(explored)
    if not transcripts:
        raise engine.FieldError("session_ids", "pick at least one session")
    if len(transcripts) * len(options) > MAX_RUNS:
        raise engine.FieldError(
            "knobs",
            f"{len(options)} configs on {len(transcripts)} sessions make "
            f"{len(options) * len(transcripts)} runs; at most {MAX_RUNS} (fewer values or "
            "sessions)",
        )
    workspace = tuning_services.target_workspace(
        owner, workspace_id if workspace_id is not None else transcripts[0].workspace_id
    )
    plan = tuning_services.RunPlan(any_owner=True)
    with transaction.atomic():
        advice = Advice.objects.create(
            owner=owner,
            workspace=workspace,
            goal=goal,
            cost_cap=cost_cap if goal == "cost_cap" else None,
            knobs=explored,
            filters=filters.as_dict() if filters else {},
        )
        advice.sessions.set(transcripts)
        items = []
        for transcript in transcripts:
            own = None
            for overrides in options:
                spec = ConfigSpec(preset="auto", overrides=overrides)
                if own is not None and set(overrides) <= THRESHOLD_ONLY:
                    config, _ = tuning_services.resolved_for(transcript, spec, prefix="knobs")
                    if never_reached(transcript, config):
                        # the same replay as the session's own settings: use that run
                        items.append(
                            AdviceRun(advice=advice, run=own, candidate=candidate_key(overrides))
                        )
                        continue
                run = plan.ensure(owner=owner, transcript=transcript, spec=spec, prefix="knobs")
                own = own or run
                items.append(AdviceRun(advice=advice, run=run, candidate=candidate_key(overrides)))
        AdviceRun.objects.bulk_create(items, ignore_conflicts=True)
        tuning_services.enqueue(plan.new)
    return advice


def _unshared_runs(advice: Advice) -> list[int]:
    run_ids = set(advice.items.values_list("run_id", flat=True))
    shared = (
        set(ComparisonRun.objects.filter(run_id__in=run_ids).values_list("run_id", flat=True))
        | set(SweepRun.objects.filter(run_id__in=run_ids).values_list("run_id", flat=True))
        | set(
            AdviceRun.objects.filter(run_id__in=run_ids)
            .exclude(advice=advice)
            .values_list("run_id", flat=True)
        )
    )
    return sorted(run_ids - shared)


def cancel(advice: Advice) -> int:
    """Stop the advice's queued and running runs nothing else uses; how many were stopped."""
    return len(lifecycle.cancel(_unshared_runs(advice), "Cancelled by its owner (the advice)."))


def delete(advice: Advice) -> None:
    """Delete the advice; its runs stay with their sessions (active unshared ones stop)."""
    with transaction.atomic():
        lifecycle.cancel(
            _unshared_runs(advice), "Cancelled: the advice it belonged to was deleted."
        )
        advice.delete()


def readable(user: User, pk: int, need: Role = access.READ) -> Advice:
    """An advice request ``user`` may read (or act on, with ``need``); 404 otherwise."""
    if not 1 <= pk <= MAX_ROW_ID:
        raise Http404("no such advice")
    return access.item_for(user, Advice.objects.select_related("workspace"), pk, need)
