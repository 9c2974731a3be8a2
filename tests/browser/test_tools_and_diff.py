"""Tools, the tool filter and the diff of two requests, in Chromium at 1280 and 390 px: the
report's tools table (sortable, with its bar chart and CSV), the explorer filtered to one tool
from the query string (keyboard reachable), and request A against request B.

With ``TOOLS_SCREENSHOTS=<folder>`` the pages are also saved there (docs/screenshots/)."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from contextlab.transcripts import services as transcripts
from tests.conftest import corpus_file, wait_for_run

SESSION = "marot__spotter__tool_heavy.jsonl"
SHOTS = os.environ.get("TOOLS_SCREENSHOTS", "")
HOSTILE_TOOL = "<img src=x onerror=window.__pwned=1>"


def _shot(page: Any, name: str, width: int, selector: str | None = None) -> None:
    """The page (or the element ``selector`` picks) as ``<name>-<width>.png`` in SHOTS."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        path = str(Path(SHOTS) / f"{name}-{width}.png")
        if selector:
            page.locator(selector).screenshot(path=path)
        else:
            page.screenshot(path=path, full_page=True)


def _no_horizontal_overflow(page: Any) -> None:
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 1, f"the page scrolls sideways by {overflow}px"


def _tables_fit(page: Any) -> None:
    """At 1280 px every table fits its box (at 390 px, only the page must not overflow)."""
    if page.viewport_size["width"] < 1280:
        return
    wide = page.evaluate(
        "Array.from(document.querySelectorAll('table')).filter(t => t.offsetParent)"
        ".filter(t => t.scrollWidth > t.parentElement.clientWidth + 1).length"
    )
    assert wide == 0, f"{wide} table(s) wider than their box"


def _log_in(page: Any, user: Any, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "pw-42-long")
    page.click("button[type=submit]")
    page.wait_for_url("**/sessions/")


@pytest.mark.parametrize("width", [1280, 390])
def test_tools_table_filter_and_request_diff(page: Any, django_user_model: Any, width: int) -> None:
    user = django_user_model.objects.create_user(username=f"tools{width}", password="pw-42-long")
    with corpus_file(SESSION).open("rb") as fh:
        transcript, _ = transcripts.create_transcript(owner=user, name=SESSION, content=fh)
    run = wait_for_run(transcript.runs.get().pk)
    assert run.status == "done", run.error
    breakdown = run.result.data["tool_breakdown"]
    bash = next(t for t in breakdown["tools"] if t["tool"] == "Bash")
    _log_in(page, user, width)

    # the report: one row per tool, its recorded calls, a chart, a CSV
    page.goto(transcript.get_absolute_url())
    rows = page.locator("#tool-table tr.tool-row")
    expect(rows).to_have_count(len(breakdown["tools"]))
    bash_row = rows.filter(has=page.locator("a.tool-link", has_text=re.compile(r"^Bash$")))
    expect(bash_row.locator("td").nth(1)).to_have_text(str(bash["calls"]))
    expect(page.locator("#tools")).to_contain_text("estimate")
    page.locator("#chart-tools .main-svg").first.wait_for()
    assert page.locator("#chart-tools .bars path").count() >= len(breakdown["tools"][:15])
    if width > 600:  # the header's sort buttons (the stacked rows at 390 px have no header)
        page.locator("#tool-table th button.sort", has_text="Calls").click()
        calls = [
            int(c)
            for c in page.locator("#tool-table tr.tool-row td:nth-child(2)").all_inner_texts()
        ]
        assert calls == sorted(calls)
    with page.expect_download() as download:
        page.locator("#tools-csv").click()
    csv_text = Path(download.value.path()).read_text()
    assert csv_text.splitlines()[0].startswith("tool,calls,errors")
    assert any(line.startswith(f"Bash,{bash['calls']},") for line in csv_text.splitlines())
    _no_horizontal_overflow(page)
    _tables_fit(page)
    _shot(page, "report-tools", width, "#tools")

    # the tool's name opens the explorer filtered to it: only its calls and results
    bash_row.locator("a.tool-link").click()
    # opened at the request after its first call: the first to send the call and its result
    first = bash["requests"][0] + 1
    page.wait_for_url(re.compile(rf".*/requests/{first}/\?run={run.pk}&tool=Bash$"))
    expect(page.locator("#req-number")).to_have_text(str(first + 1))
    expect(page.locator("#tool-select")).to_have_value("Bash")
    shown = page.locator("tr.row")
    assert shown.count() > 0
    assert shown.locator("td.col.repl .tool-name").all_inner_texts() == ["Bash"] * shown.count()
    expect(page.locator("#tool-requests")).to_contain_text(f"{len(bash['requests'])} request")
    # the next request that calls it keeps the filter
    later = [i for i in bash["requests"] if i > first]
    if later:
        page.locator("#tool-next").click()
        page.wait_for_url(re.compile(rf".*/requests/{later[0]}/\?run={run.pk}&tool=Bash$"))
    _no_horizontal_overflow(page)
    page.locator("#tool-filter").scroll_into_view_if_needed()
    _shot(page, "explorer-tool-filter", width, "#explorer")
    # keyboard: focus the picker, choose another tool, submit with Enter
    other = next(t["tool"] for t in breakdown["tools"] if t["tool"] != "Bash" and t["requests"])
    page.locator("#tool-select").focus()
    page.locator("#tool-select").select_option(other)
    page.keyboard.press("Tab")
    expect(page.locator("#tool-filter button[type=submit]")).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*[?&]tool=" + re.escape(other) + r"$"))
    expect(page.locator("#tool-select")).to_have_value(other)

    # compare with the previous request, then any two by number
    last = run.summary["requests"]
    page.goto(f"/sessions/{transcript.pk}/requests/{last - 1}/?run={run.pk}")
    page.locator("#compare-previous").click()
    page.wait_for_url(re.compile(rf".*/compare-requests/\?run={run.pk}&a={last - 1}&b={last}$"))
    expect(page.locator("#compare-summary h2")).to_have_text(f"Request {last - 1} → request {last}")
    expect(page.locator("#diff-added-list")).to_be_visible()
    assert page.locator("#diff-added-list tr.diff-item").count() > 0
    _no_horizontal_overflow(page)
    _tables_fit(page)
    _shot(page, "compare-requests", width)
    page.fill("#request-a", "1")
    page.fill("#request-b", str(last))
    page.locator("#request-b").press("Enter")
    page.wait_for_url(re.compile(rf".*a=1&b={last}$"))
    expect(page.locator("#compare-summary h2")).to_have_text(f"Request 1 → request {last}")
    # B against A: what was added is what comes back removed
    added = page.locator("#diff-added-list tr.diff-item").count()
    page.goto(f"/sessions/{transcript.pk}/compare-requests/?run={run.pk}&a={last}&b=1")
    assert page.locator("#diff-removed-list tr.diff-item").count() == added
    # the report's button opens the form empty; any two numbers compare
    page.goto(transcript.get_absolute_url())
    page.locator("#compare-requests").click()
    page.wait_for_url(re.compile(rf".*/compare-requests/\?run={run.pk}$"))
    expect(page.locator("#compare-summary")).to_have_count(0)
    # out of range: a clear message, the form kept
    page.goto(f"/sessions/{transcript.pk}/compare-requests/?run={run.pk}&a=0&b={last + 5}")
    expect(page.locator("#compare-error")).to_contain_text(f"from 1 to {last}")
    assert page.csp_errors == []


def test_tool_names_from_the_transcript_are_escaped(page: Any, django_user_model: Any) -> None:
    """A tool named with markup shows as text in the table, the picker and the filter."""
    user = django_user_model.objects.create_user(username="tools-xss", password="pw-42-long")
    body = corpus_file(SESSION).read_text().replace('"name":"Bash"', f'"name":"{HOSTILE_TOOL}"')
    assert HOSTILE_TOOL in body
    transcript, _ = transcripts.create_transcript(
        owner=user, name="hostile-tools.jsonl", content=io.BytesIO(body.encode())
    )
    run = wait_for_run(transcript.runs.get().pk)
    assert run.status == "done", run.error
    _log_in(page, user, 1280)
    page.goto(transcript.get_absolute_url())
    expect(page.locator("#tool-table")).to_contain_text("<img src=x onerror=window.__pwned=1>")
    link = page.locator("a.tool-link", has_text="<img")
    link.click()
    page.wait_for_url(re.compile(r".*tool=%3Cimg.*"))
    expect(page.locator("#tool-requests")).to_contain_text("<img src=x")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img[src=x]").count() == 0
