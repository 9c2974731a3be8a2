"""Codex sessions in Chromium: uploaded beside Claude Code's, named by their agent in the list,
found by the search and by the agent filter; the list shot at 1280 and 390 px."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from contextlab.transcripts.models import Transcript
from tests.browser.test_browser import sign_up
from tests.conftest import wait_for_run

expect.set_options(timeout=30_000)

ROOT = Path(__file__).resolve().parent.parent.parent
CODEX = ROOT / "tests" / "fixtures" / "codex"
DEMO = ROOT / "contextlab" / "demo"
#: where the screenshots go when set (docs/screenshots/ for the committed ones)
SHOTS = os.environ.get("CONTEXTLAB_SCREENSHOTS")


def test_codex_rows_name_their_agent_and_filter(page: Any, celery_worker_process: Any) -> None:
    sign_up(page, "codex-user")
    page.goto("/sessions/")
    files = [
        CODEX / "v0_64_remote_compaction.jsonl",
        CODEX / "v0_58_calls.jsonl",
        DEMO / "marot__spotter__short.jsonl",
    ]
    page.set_input_files("#upload-input", [str(f) for f in files])
    rows = page.locator("#session-table tr.session-row")
    expect(rows).to_have_count(3)
    for transcript in Transcript.objects.all():
        assert wait_for_run(transcript.runs.get().pk).status == "done"
    page.reload()
    codex_rows = rows.filter(has=page.locator('.agent[data-agent="codex"]'))
    expect(codex_rows).to_have_count(2)
    expect(codex_rows.first).to_contain_text("Codex 0.")
    expect(rows.filter(has=page.locator('.agent[data-agent="claude_code"]'))).to_have_count(1)
    # the search finds sessions by agent
    page.fill("#session-search", "codex")
    expect(page.locator("#session-table tr.session-row:visible")).to_have_count(2)
    page.fill("#session-search", "")
    if SHOTS:
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.screenshot(path=f"{SHOTS}/sessions-agents-{width}.png", full_page=True)
        page.set_viewport_size({"width": 1280, "height": 900})
    # the agent filter keeps one agent's sessions
    page.click(".agent-filter >> text=Codex")
    expect(rows).to_have_count(2)
    expect(page.locator('.agent-filter a[aria-current="page"]')).to_have_text("Codex")
    page.click(".agent-filter >> text=all")
    expect(rows).to_have_count(3)
