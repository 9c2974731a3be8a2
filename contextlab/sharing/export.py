"""One self-contained HTML file of a session report: opens from disk with no request to any
server, under a CSP as strict as the site's (scripts allowed by hash, no inline handlers, data
as JSON blocks). Built from the same redacted snapshot a share link serves."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string

from contextlab.comments import presenting as comments
from contextlab.engine import RequestRow, as_result, describe_event
from contextlab.runs import charts, explorer, report
from contextlab.runs.models import Run
from contextlab.sharing import pages, services
from contextlab.summaries import services as summaries
from contextlab.transcripts.models import Transcript

#: the same plotly.js bundle the site serves (static/vendor/plotly/, see its README)
PLOTLY_JS = Path(settings.BASE_DIR) / "static" / "vendor" / "plotly" / "plotly-basic.min.js"
EXPORT_JS = Path(settings.BASE_DIR) / "static" / "js" / "export.js"
APP_CSS = Path(settings.BASE_DIR) / "static" / "css" / "app.css"
#: the explorer rows of one picked request shown in full up to this many characters a text
FULL_TEXT_CHARS = 20_000


def _sha256(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


def default_picks(requests: list[RequestRow]) -> list[int]:
    """The last main-thread request (it holds the whole history) and every compaction."""
    picks = [
        i for i, r in enumerate(requests) if any(e["action"] == "compacted" for e in r["events"])
    ]
    main = [i for i, r in enumerate(requests) if r["thread"] == "main"]
    if main:
        picks.append(main[-1])
    return sorted(set(picks))


def _cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        item = {"badge": row.get("badge"), "cache": row.get("cache") or "none"}
        for side in ("repl", "model"):
            cell = row.get(side)
            if isinstance(cell, dict):
                text = cell.get("text") or ""
                item[side] = {
                    **cell,
                    "text": text[:FULL_TEXT_CHARS],
                    "cut": max(0, len(text) - FULL_TEXT_CHARS),
                }
        out.append(item)
    return out


def html_export(
    transcript: Transcript,
    run: Run,
    *,
    keep: list[str] | None = None,
    picks: list[int] | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """The file's text and the redaction findings. Raises ``services.ShareBlocked`` when the
    finished file still holds a finding not kept."""
    return render_html(services.snapshot_source(transcript, run), keep=keep, picks=picks)


def render_html(
    source: dict[str, Any], *, keep: list[str] | None = None, picks: list[int] | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """``html_export`` of a snapshot source (``services.snapshot_source``)."""
    keep = sorted(set(keep or []))
    redacted = services.redact_snapshot(source, keep)
    snapshot = redacted.data
    data = snapshot["result"]
    result = as_result(data)
    requests = result["requests"]

    def url(i: int) -> str:
        return f"#request-{i}"

    picked = [
        i
        for i in (picks if picks is not None else default_picks(requests))
        if 0 <= i < len(requests)
    ]

    def comment_url(index: int, block: str) -> str:
        return f"#view-{index}" if index in picked else f"#request-{index}"

    comment_items = comments.shared_items(snapshot.get("comments") or [], keep, comment_url)
    views = []
    for index in picked:
        # the explorer's own builder, on the redacted snapshot: every row, none folded
        shown = explorer.request_view(data, snapshot["messages"], index)
        views.append(
            {
                "index": index,
                "req": shown["req"],
                "rows": _cells(shown["rows"]),
                "comments": [c for c in comment_items if c["request"] == index],
            }
        )
    plotly_js = PLOTLY_JS.read_text()
    export_js = EXPORT_JS.read_text()
    css = APP_CSS.read_text()
    # a "</script" inside the inlined code would end the element early
    for code in (plotly_js, export_js):
        if re.search(r"</script", code, re.IGNORECASE):
            raise ValueError("inlined script contains </script")
    context = {
        "transcript": snapshot["transcript"],
        "run": snapshot["run"],
        "summary": result["summary"],
        "fidelity": charts.fidelity(result),
        "figures": {
            "chart-context-data": charts.figure_json(charts.build_context_figure(result, url)),
            "chart-cache-data": charts.figure_json(charts.build_cache_figure(result, url)),
            "chart-cost-data": charts.figure_json(charts.build_cost_figure(result, url)),
            "chart-fidelity-data": charts.figure_json(charts.build_fidelity_figure(result, url)),
        },
        "subagents": report.subagent_rows(data),
        "summaries": summaries.run_summaries(data, snapshot["messages"]),
        "rows": [
            {
                "index": i,
                "thread": r["thread"],
                "model_tokens": r["model_tokens"],
                "recorded": charts.recorded_prompt(r),
                "cost_usd": r["cost_usd"],
                "events": "; ".join(describe_event(e) for e in r["events"]),
                "picked": i in picked,
            }
            for i, r in enumerate(requests)
        ],
        # the waste findings link their requests to the table's rows, as the charts do
        **pages.report_cards(snapshot, url, explorer=False),
        "views": views,
        "comments": comment_items,
        "kept": keep,
        "redaction_note": services.redaction_note(redacted.findings, keep),
        "plotly_js": plotly_js,
        "export_js": export_js,
        "css": css,
        "csp": "default-src 'none'; "
        f"script-src {_sha256(plotly_js)} {_sha256(export_js)}; "
        "style-src 'unsafe-inline'; img-src data: blob:; font-src data:; connect-src 'none'; "
        "object-src 'none'; base-uri 'none'; form-action 'none'",
    }
    html = render_to_string("sharing/export.html", context)
    # the outgoing bytes, less what we put there ourselves (two scripts, their CSP hashes),
    # scanned again
    ours = html.replace(plotly_js, "").replace(export_js, "").replace(context["csp"], "")
    services.check_outgoing(ours, keep)
    return html, redacted.findings
