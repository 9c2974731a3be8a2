"""What the advice page and API read: progress while the runs replay, then recommendations.

Each candidate is measured against the sessions' own settings (the ``baseline`` candidate) on
every session: the saving in estimated cost, the change in the share of the history the model
saw and in compactions, and the sessions where it would have hurt. The saving's band comes
from the fidelity figures: each session's saving is widened by the p90 relative error of its
baseline replay against the recorded usage (a session without recorded usage takes the widest
band of the others). Both sides are replays, so both are estimates; the page says so.
"""

from __future__ import annotations

from typing import Any, cast

from django.db import transaction

from contextlab import engine
from contextlab.advice.models import Advice, AdviceRun
from contextlab.advice.services import BASELINE, candidate_key, candidate_overrides
from contextlab.runs import services as run_services
from contextlab.runs.models import Run
from contextlab.tuning import goals
from contextlab.tuning.models import derived_status

#: A session "hurts" when it loses more than this share of the history it kept.
HISTORY_HURT = 0.05
#: How many recommendations the answer lists (the best first).
SHOWN = 8


def advice_runs(advice: Advice) -> dict[tuple[int, str], Run]:
    items = AdviceRun.objects.filter(advice=advice).select_related("run", "run__transcript")
    return {(item.run.transcript_id, item.candidate): item.run for item in items}


def progress(advice: Advice) -> dict[str, Any]:
    """Status and how many runs are done, for polling."""
    runs = list(advice_runs(advice).values())
    for run in runs:
        if run.status == Run.Status.RUNNING:
            run_services.refresh_run(run)
    done = sum(1 for run in runs if run.status == Run.Status.DONE)
    failed = sum(1 for run in runs if run.status == Run.Status.FAILED)
    status = derived_status(runs)
    if status == Run.Status.FAILED and done + failed < len(runs):
        status = Run.Status.RUNNING  # the others still run; the answer leaves failed ones out
    return {"status": status, "done": done, "failed": failed, "total": len(runs)}


def _measures(run: Run | None) -> dict[str, Any] | None:
    if run is None or run.status != Run.Status.DONE or not run.summary:
        return None
    summary = run.summary
    return {
        "requests": int(summary.get("requests") or 0),
        "cost_usd": float(summary.get("cost_usd") or 0.0),
        "mean_history_share": float(summary.get("mean_history_share") or 0.0),
        "compactions": int(summary.get("compactions") or 0),
    }


def _weighted_share(items: list[dict[str, Any]]) -> float:
    requests = sum(int(i["requests"]) for i in items) or 1
    return float(sum(float(i["mean_history_share"]) * int(i["requests"]) for i in items)) / requests


def _error_band(run: Run | None) -> float | None:
    """The p90 relative error of a baseline replay against the recorded usage (None: no
    recorded usage to compare with)."""
    data = run_services.result_data(run) if run is not None else None
    if not data:
        return None
    value = engine.result_fidelity(cast(engine.ResultJson, data))["p90_rel_error"]
    return float(value) if value is not None else None


def recommend(advice: Advice) -> dict[str, Any]:
    """The recommendations (computed once every run has finished, then kept on the advice)."""
    if advice.result is not None:
        return dict(advice.result)
    runs = advice_runs(advice)
    sessions = list(advice.sessions.order_by("pk"))
    base: dict[int, dict[str, Any]] = {}
    bands: dict[int, float | None] = {}
    for transcript in sessions:
        measured = _measures(runs.get((transcript.pk, BASELINE)))
        if measured is not None:
            base[transcript.pk] = measured
            bands[transcript.pk] = _error_band(runs.get((transcript.pk, BASELINE)))
    known = [b for b in bands.values() if b is not None]
    widest = max(known) if known else 0.0
    names = {t.pk: t.name for t in sessions}
    keys = sorted({key for (_, key) in runs}, key=lambda k: (k != BASELINE, k))
    answers: list[dict[str, Any]] = []
    failed: list[str] = []
    for key in keys:
        rows = []
        for pk in base:
            measured = _measures(runs.get((pk, key)))
            if measured is None:
                break
            rows.append((pk, measured))
        else:
            answers.append(_candidate(key, rows, base, bands, widest, names, advice.goal))
            continue
        failed.append(key)
    base_items = list(base.values())
    baseline = {
        "cost_usd": round(sum(i["cost_usd"] for i in base_items), 6),
        "mean_history_share": round(_weighted_share(base_items), 4) if base_items else 0.0,
        "compactions": sum(i["compactions"] for i in base_items),
    }
    points = [(a["cost_usd"], a["mean_history_share"]) for a in answers]
    for answer, front in zip(answers, _pareto(points), strict=True):
        answer["pareto"] = front
    eligible = [
        a for a in answers if advice.goal != "cost_cap" or a["cost_usd"] <= (advice.cost_cap or 0.0)
    ]
    ranked = sorted(
        eligible, key=lambda a: (goals.score(advice.goal, a), a["candidate"] != BASELINE)
    )
    result = {
        "ttl": ttl_answers(runs, list(base), names),
        "idle": idle_answers(runs, list(base), names),
        "goal": advice.goal,
        "goal_label": goals.GOALS.get(advice.goal, advice.goal),
        "cost_cap": advice.cost_cap,
        "sessions": len(base),
        "sessions_without_baseline": [names[t.pk] for t in sessions if t.pk not in base],
        "baseline": baseline,
        "recommendations": ranked[:SHOWN],
        "candidates": answers,
        "failed_candidates": [candidate_overrides(k) for k in failed],
    }
    with transaction.atomic():
        Advice.objects.filter(pk=advice.pk, result__isnull=True).update(result=result)
    advice.result = result
    return result


def _candidate(
    key: str,
    rows: list[tuple[int, dict[str, Any]]],
    base: dict[int, dict[str, Any]],
    bands: dict[int, float | None],
    widest: float,
    names: dict[int, str],
    goal: str,
) -> dict[str, Any]:
    overrides = candidate_overrides(key)
    per_session = []
    hurts = []
    low = high = saving = 0.0
    for pk, measured in rows:
        before = base[pk]
        session_saving = before["cost_usd"] - measured["cost_usd"]
        band = bands[pk] if bands[pk] is not None else widest
        half = abs(session_saving) * float(band or 0.0)
        kept = measured["mean_history_share"] - before["mean_history_share"]
        compactions = measured["compactions"] - before["compactions"]
        saving += session_saving
        low += session_saving - half
        high += session_saving + half
        row = {
            "session_id": pk,
            "name": names[pk],
            "saving_usd": round(session_saving, 6),
            "saving_low_usd": round(session_saving - half, 6),
            "saving_high_usd": round(session_saving + half, 6),
            "history_kept_delta": round(kept, 4),
            "compactions_delta": compactions,
        }
        per_session.append(row)
        why = []
        if session_saving + half < 0:
            why.append(f"costs ${-session_saving:.4f} more")
        if kept < -HISTORY_HURT:
            why.append(f"keeps {-kept:.0%} less of the history")
        if compactions > 0 and goal in ("fewest_compactions", "most_history"):
            why.append(f"{compactions} more compaction{'s' if compactions != 1 else ''}")
        if why:
            hurts.append({**row, "why": "; ".join(why)})
    measured_items = [m for _, m in rows]
    base_items = [base[pk] for pk, _ in rows]
    cc = engine.claude_code_settings(overrides)
    return {
        "candidate": key,
        "label": ", ".join(f"{k} = {_shown(v)}" for k, v in overrides.items())
        or "your sessions' own settings",
        "preset": "auto",
        "config": overrides,
        "settings": cc.settings,
        "settings_json": cc.settings_json(),
        "env_lines": cc.env_lines(),
        "not_expressible": cc.not_expressible,
        "min_version": cc.min_version,
        "cost_usd": round(sum(m["cost_usd"] for m in measured_items), 6),
        "mean_history_share": round(_weighted_share(measured_items), 4),
        "compactions": sum(m["compactions"] for m in measured_items),
        "saving_usd": round(saving, 6),
        "saving_low_usd": round(low, 6),
        "saving_high_usd": round(high, 6),
        "history_kept_delta": round(
            _weighted_share(measured_items) - _weighted_share(base_items), 4
        ),
        "compactions_delta": sum(m["compactions"] for m in measured_items)
        - sum(b["compactions"] for b in base_items),
        "hurts": hurts,
        "per_session": per_session,
    }


#: Gaps a 5-minute cache outlives, a 1-hour one outlives, and neither (seconds).
FIVE_MINUTES = 300
ONE_HOUR = 3600


def ttl_answers(
    runs: dict[tuple[int, str], Run], sessions: list[int], names: dict[int, str]
) -> list[dict[str, Any]]:
    """Is the 1-hour cache worth it, per session: its real gaps between requests (of a thread),
    what its TTL was, and its replay under each TTL. Empty unless both TTLs were explored."""
    five, hour = candidate_key({"cache_ttl": "5m"}), candidate_key({"cache_ttl": "1h"})
    out = []
    for pk in sessions:
        at_five, at_hour = _measures(runs.get((pk, five))), _measures(runs.get((pk, hour)))
        baseline = runs.get((pk, BASELINE))
        data = run_services.result_data(baseline) if baseline is not None else None
        if at_five is None or at_hour is None or not data:
            continue
        rows = list(engine.as_result(data)["requests"])
        seen = [g for g in engine.gaps(rows) if g is not None]
        ttls = [str(r.get("ttl") or "") for r in rows]
        out.append(
            {
                "session_id": pk,
                "name": names[pk],
                "requests": len(rows),
                "gaps_under_5m": sum(1 for g in seen if g <= FIVE_MINUTES),
                "gaps_5m_to_1h": sum(1 for g in seen if FIVE_MINUTES < g <= ONE_HOUR),
                "gaps_over_1h": sum(1 for g in seen if g > ONE_HOUR),
                "recorded_ttl": max(set(ttls), key=ttls.count) if ttls else "",
                "cost_5m_usd": round(at_five["cost_usd"], 6),
                "cost_1h_usd": round(at_hour["cost_usd"], 6),
                # positive: the 1-hour writes cost less than the reads they keep
                "one_hour_saves_usd": round(at_five["cost_usd"] - at_hour["cost_usd"], 6),
                "verdict": _ttl_verdict(at_five["cost_usd"] - at_hour["cost_usd"]),
            }
        )
    return out


def idle_answers(
    runs: dict[tuple[int, str], Run], sessions: list[int], names: dict[int, str]
) -> list[dict[str, Any]]:
    """Compact now or wait, per session: each idle gap longer than its cache TTL priced both
    ways (``engine.idle_compaction``), summed, on the session's recorded replay (the recorded
    cache, as its report shows it), else on the advice's baseline run."""
    out = []
    recorded = {
        run.transcript_id: run
        for run in Run.objects.filter(
            transcript_id__in=sessions, mode=Run.Mode.RECORDED, status=Run.Status.DONE
        ).order_by("pk")
    }
    for pk in sessions:
        source = recorded.get(pk) or runs.get((pk, BASELINE))
        data = run_services.result_data(source) if source is not None else None
        if not data:
            continue
        answer = engine.idle_compaction(engine.as_result(data))
        gaps = answer["gaps"]
        out.append(
            {
                "session_id": pk,
                "name": names[pk],
                "gaps": len(gaps),
                "compact_wins": answer["compact_wins"],
                "paid_usd": round(sum(g["paid_usd"] for g in gaps), 6),
                "compact_usd": round(
                    sum(
                        g["summary_call_usd"] + g["smaller_prompt_usd"] - g["later_reads_saved_usd"]
                        for g in gaps
                    ),
                    6,
                ),
                "saving_usd": answer["saving_usd"],
                "best_saving_usd": answer["best_saving_usd"],
                "sizes_recorded": answer["sizes_recorded"],
                "verdict": answer["verdict"],
            }
        )
    return out


def _shown(value: Any) -> str:
    """A knob value as the page names it: 70, not 70.0."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _ttl_verdict(saves: float) -> str:
    if abs(saves) < 5e-7:
        return "the same"
    return f"{'1 hour' if saves > 0 else '5 minutes'} saves ${abs(saves):.4f}"


def _pareto(points: list[tuple[float, float]]) -> list[bool]:
    """Which (cost, history kept) points no other beats on both (cheaper and keeping more)."""
    out = []
    for i, (cost, kept) in enumerate(points):
        dominated = any(
            c <= cost and k >= kept and (c < cost or k > kept)
            for j, (c, k) in enumerate(points)
            if j != i
        )
        out.append(not dominated)
    return out


def answer(advice: Advice) -> dict[str, Any]:
    """What ``GET /api/advice/{id}`` returns: status and progress, then the recommendations."""
    state = progress(advice)
    body: dict[str, Any] = {
        "id": advice.pk,
        "workspace_id": advice.workspace_id,
        "url": advice.get_absolute_url(),
        "goal": advice.goal,
        "cost_cap": advice.cost_cap,
        "knobs": advice.knobs,
        "filters": advice.filters,
        "session_ids": sorted(advice.sessions.values_list("pk", flat=True)),
        **state,
        "recommendations": None,
        "baseline": None,
    }
    if state["status"] in (Run.Status.DONE, Run.Status.FAILED) and state["done"]:
        result = recommend(advice)
        body["recommendations"] = result["recommendations"]
        body["baseline"] = result["baseline"]
        body["candidates"] = result["candidates"]
        body["failed_candidates"] = result["failed_candidates"]
        body["ttl"] = result.get("ttl", [])
        # advice answered before the idle question was asked: answer it now from its runs
        body["idle"] = (
            result["idle"]
            if "idle" in result
            else idle_answers(
                advice_runs(advice),
                sorted(advice.sessions.values_list("pk", flat=True)),
                {t.pk: t.name for t in advice.sessions.all()},
            )
        )
    return body
