"""The report's waste findings and compact-now-or-wait answer for one finished run, with links
to the requests they name (numbered from 1 on the page). The worker stores them with the result
(``jobs.replay.waste_report``); a result stored before it did is worked out here, on first view."""

from __future__ import annotations

import hashlib
import re
from typing import Any, cast

from django.core.cache import cache

from contextlab import engine
from contextlab.jobs import replay
from contextlab.runs import charts, services
from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript

#: findings listed per kind on the page (the API gives them all; the kind's row counts them)
SHOWN_PER_KIND = 25
#: names in a fix set as code: environment variables, settings.json keys and values, a tool's
#: input, files
_NAMES = re.compile(
    r'(\b[A-Z][A-Z0-9]*_[A-Z0-9_]+(?:=\w+)?\b|"[a-zA-Z]+": "[^"]+"|\bhead_limit\b'
    r"|\.mcp\.json|CLAUDE\.md|claude mcp)"
)


def fix_parts(fix: str) -> list[dict[str, Any]]:
    """A fix as text and code parts, so the page sets the names it gives as code."""
    return [{"text": part, "code": bool(n % 2)} for n, part in enumerate(_NAMES.split(fix)) if part]


def _shown(finding: dict[str, Any]) -> dict[str, Any]:
    """A finding as the page shows it: its subject (transcript content) apart from our words."""
    subject = str(finding.get("subject") or "")
    text = str(finding["text"])
    rest = text[len(subject) :] if subject and text.startswith(subject) else text
    return {
        **finding,
        "subject": subject if rest is not text else "",
        "rest": rest,
        "subject_class": "file-name" if finding["kind"] == "reread" else "tool-name",
        "fix_parts": fix_parts(str(finding["fix"])),
    }


def _is_current(report: Any) -> bool:
    """Whether ``report`` is a stored ``jobs.replay.waste_report`` of this engine version."""
    return isinstance(report, dict) and report.get("engine_version") == engine.ENGINE_VERSION


def _found(report: dict[str, Any]) -> dict[str, Any]:
    return {"waste": report["waste"], "idle": report["idle"]}


def run_waste_report(transcript: Transcript, run: Run, data: dict[str, Any]) -> dict[str, Any]:
    """The run's ``jobs.replay.waste_report``: as the worker stored it with the result, else (a
    result stored before it did, or by another engine version) worked out here once per
    finished run and kept in the cache."""
    stored = data.get(replay.WASTE_KEY)
    if _is_current(stored):
        return cast(dict[str, Any], stored)
    stamp = run.finished_at.isoformat() if run.finished_at else "active"
    # the sessions it continues are part of its messages: a link made or undone changes them
    files = "+".join([t.sha256 for t in transcript.earlier_sessions()] + [transcript.sha256])
    digest = hashlib.sha256(files.encode()).hexdigest()[:16]
    key = f"run-waste:v{engine.ENGINE_VERSION}:{run.pk}:{stamp}:{digest}"
    report: dict[str, Any] | None = cache.get(key) if run.finished_at else None
    if report is None:
        report = replay.waste_report(data, services.session_messages(transcript))
        if run.finished_at:
            cache.set(key, report, timeout=3600)
    return report


def run_waste(transcript: Transcript, run: Run, data: dict[str, Any]) -> dict[str, Any]:
    """``{"waste": engine.waste_findings(...), "idle": engine.idle_compaction(...)}`` of the
    run (``run_waste_report``)."""
    return _found(run_waste_report(transcript, run, data))


def snapshot_waste(snapshot: dict[str, Any]) -> dict[str, Any] | None:
    """``run_waste`` of a share's snapshot: as the snapshot holds it (redacted with the rest),
    else worked out from the snapshot's messages; None for a conversation-only snapshot
    without it (its tool outputs are left out: files read again would look changed)."""
    data = snapshot["result"]
    stored = data.get(replay.WASTE_KEY)
    if _is_current(stored):
        return _found(stored)
    if snapshot.get("mode", "full") != "full":
        return None
    return _found(replay.waste_report(data, snapshot["messages"]))


def page_waste(
    transcript: Transcript, run: Run, data: dict[str, Any], url: charts.RequestUrl
) -> dict[str, Any]:
    """``run_waste`` as the report shows it (``shown_waste``)."""
    return shown_waste(run_waste(transcript, run, data), url)


def shown_waste(found: dict[str, Any], url: charts.RequestUrl) -> dict[str, Any]:
    """Waste findings and the idle answer for a page: each kind with its findings (at most
    ``SHOWN_PER_KIND``), each finding's requests as links, and each idle gap's two requests
    as links."""
    waste, idle = found["waste"], found["idle"]

    def links(positions: list[int], roles: list[str]) -> list[dict[str, Any]]:
        return [
            {"number": i + 1, "url": url(i), "role": role}
            for i, role in zip(positions, roles, strict=False)
        ]

    kinds = []
    for kind in waste["kinds"]:
        mine = [f for f in waste["findings"] if f["kind"] == kind["kind"]]
        kinds.append(
            {
                **kind,
                "findings": [
                    {**_shown(f), "links": links(f["requests"], f["request_roles"])}
                    for f in mine[:SHOWN_PER_KIND]
                ],
                "hidden": max(0, len(mine) - SHOWN_PER_KIND),
                "tools_called": waste["tools_called"] if kind["kind"] == "unused_tools" else [],
            }
        )
    gaps = [
        {
            **g,
            "links": links([g["before"], g["request"]], ["before", "after"]),
            "gap": engine.format_duration(g["gap_seconds"]),
        }
        for g in idle["gaps"]
    ]
    return {
        "kinds": kinds,
        "total_cost_usd": waste["total_cost_usd"],
        "count": len(waste["findings"]),
        "idle": {**idle, "gaps": gaps},
    }
