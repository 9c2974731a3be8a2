"""The sessions list in Chromium: it updates itself after an upload, and searches and sorts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from contextlab.runs.templatetags.humanize_tokens import usd
from contextlab.transcripts.models import Transcript
from tests.browser.test_browser import sign_up
from tests.conftest import wait_for_run

expect.set_options(timeout=30_000)

DEMO = Path(__file__).resolve().parent.parent.parent / "contextlab" / "demo"


def test_the_list_updates_after_uploads_and_searches_and_sorts(page: Any) -> None:
    sign_up(page, "list-user")
    page.goto("/sessions/")
    expect(page.locator("#sessions")).to_contain_text("No sessions yet.")
    files = [DEMO / "marot__spotter__tool_heavy.jsonl", DEMO / "marot__spotter__short.jsonl"]
    page.set_input_files("#upload-input", [str(f) for f in files])
    # no reload: the table appears with a row per session, one file name per row
    rows = page.locator("#session-table tr.session-row")
    expect(rows).to_have_count(2)
    expect(page.locator("#sessions")).not_to_contain_text("No sessions yet.")
    for transcript in Transcript.objects.all():
        wait_for_run(transcript.runs.get().pk)
    page.reload()
    counts = {t.name: t.request_count for t in Transcript.objects.all()}
    assert len(set(counts.values())) == 2, counts
    headers = [h.strip().lower() for h in page.locator("#session-table thead th").all_inner_texts()]
    requests_col, compactions_col = headers.index("requests"), headers.index("compactions")
    # sort by requests, both ways
    page.click(f"#session-table th:nth-child({requests_col + 1}) button")
    names = rows.locator("td:first-child .file-name").all_inner_texts()
    assert names == sorted(counts, key=counts.__getitem__)
    page.click(f"#session-table th:nth-child({requests_col + 1}) button")
    names = rows.locator("td:first-child .file-name").all_inner_texts()
    assert names == sorted(counts, key=counts.__getitem__, reverse=True)
    # the recorded replay's figures are on the row
    heavy = rows.filter(has_text="tool_heavy")
    summary = Transcript.objects.get(name=files[0].name).runs.get().summary
    expect(heavy.locator("td").nth(compactions_col)).to_have_text(
        str(summary["compactions"]) if summary["compactions"] else "—"
    )
    # the project is the folder the session ran in (the demo's: .../spotter)
    expect(heavy.locator("td").nth(headers.index("project"))).to_have_text("spotter")
    # search keeps the matching rows only
    page.fill("#session-search", "short")
    expect(rows.filter(has_text="short")).to_be_visible()
    expect(heavy).to_be_hidden()
    page.fill("#session-search", "no-such-session")
    expect(page.locator("#session-search-empty")).to_be_visible()
    assert page.csp_errors == []


def test_a_row_fills_in_when_its_replay_finishes_without_a_reload(page: Any) -> None:
    sign_up(page, "row-fill-user")
    page.goto("/sessions/")
    page.set_input_files("#upload-input", str(DEMO / "marot__spotter__tool_heavy.jsonl"))
    row = page.locator("#session-table tr.session-row")
    expect(row).to_have_count(1)
    headers = [h.strip().lower() for h in page.locator("#session-table thead th").all_inner_texts()]
    transcript = Transcript.objects.get()
    summary = wait_for_run(transcript.runs.get().pk).summary
    # the row's replay cell saw the run finish and the list came back with its figures
    cost = row.locator("td").nth(headers.index("cost"))
    # the recorded replay's cost: the recorded usage, as the report's first cost tile shows it
    expect(cost).to_have_text(usd(summary["cost_usd"]))
    expect(row.locator("td").nth(headers.index("date"))).not_to_have_text("—")
    assert page.csp_errors == []
