"""The real thing in headless Chromium: sign up, upload, watch the run, report, explorer, XSS."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from contextlab.runs.models import Run
from tests.conftest import corpus_file, require_services, settle_runs, wait_for_run

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_services()
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: apt-get install -y chromium", pytrace=False)
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are safe.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, live_server: Any, celery_worker_process: Any) -> Iterator[Any]:
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": 1400, "height": 1000}
    )
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.csp_errors = []
    page.dialogs = []
    page.on(
        "console",
        lambda msg: (
            page.csp_errors.append(msg.text) if "Content Security Policy" in msg.text else None
        ),
    )
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    yield page
    context.close()
    settle_runs()  # the worker must not be writing while the test's database is flushed


def sign_up(page: Any, username: str = "browser-user") -> None:
    page.goto("/accounts/signup/")
    page.fill("#id_username", username)
    page.fill("#id_password1", "a-long-pass-42")
    page.fill("#id_password2", "a-long-pass-42")
    page.click("button[type=submit]")
    page.wait_for_url("**/sessions/")


def upload(page: Any, path: Path) -> None:
    """Upload through the page's file input; wait for both progress bars to finish."""
    page.goto("/sessions/")
    page.set_input_files("#upload-input", str(path))
    item = page.locator(".upload-item").last
    item.locator(".open-session").wait_for()
    assert item.locator("progress").first.get_attribute("value") == "100"
    # the processing bar is the run-progress partial, polled every second until done
    item.locator("text=Open the report").wait_for(timeout=60_000)
    item.locator(".open-session").click()
    page.wait_for_url(re.compile(r".*/sessions/\d+/$"))


def test_sign_up_upload_report_click_and_keyboard(page: Any) -> None:
    sign_up(page)
    upload(page, corpus_file("marot__spotter__tool_heavy.jsonl"))
    # the report: charts drawn by plotly.js under the CSP
    page.locator("#chart-context .main-svg").first.wait_for()
    assert page.locator("#fidelity").is_visible()
    # click a point of the model-view line: plotly_click opens that request
    point = page.locator("#chart-context .scatterlayer .trace").nth(1).locator("path.point").nth(1)
    page.locator("#chart-context").scroll_into_view_if_needed()
    box = point.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_url(re.compile(r".*/requests/1/\?run=\d+$"))
    # the page numbers requests from 1; the URL keeps the 0-based index
    assert page.locator("#req-number").inner_text() == "2"
    # keyboard: → and j go forward, ← and k go back (htmx swaps the explorer, URL follows)
    page.keyboard.press("ArrowRight")
    page.wait_for_url(re.compile(r".*/requests/2/\?run=\d+$"))
    expect(page.locator("#req-number")).to_have_text("3")
    page.keyboard.press("k")
    page.wait_for_url(re.compile(r".*/requests/1/\?run=\d+$"))
    page.keyboard.press("ArrowLeft")
    page.wait_for_url(re.compile(r".*/requests/0/\?run=\d+$"))
    assert page.locator("#req-number").inner_text() == "1"
    page.keyboard.press("j")
    page.wait_for_url(re.compile(r".*/requests/1/\?run=\d+$"))
    assert page.locator("tr.row").count() > 0
    # the back button restores the previous request, as a whole page
    page.go_back()
    page.wait_for_url(re.compile(r".*/requests/0/\?run=\d+$"))
    page.locator(".topbar").wait_for()
    expect(page.locator("#req-number")).to_have_text("1")
    # the slider jumps to any request (by its number: request 3 is index 2)
    page.locator("#req-slider").fill("3")
    page.wait_for_url(re.compile(r".*/requests/2/\?run=\d+$"))
    expect(page.locator("#req-number")).to_have_text("3")
    assert page.csp_errors == []


def test_persisted_preview_opens_the_full_original(page: Any) -> None:
    sign_up(page, "preview-user")
    upload(page, FIXTURES / "persisted_preview.jsonl")
    run = wait_for_run(Run.objects.get(transcript__name="persisted_preview.jsonl").pk)
    report = page.url
    for index in range(run.summary["requests"]):
        page.goto(f"{report}requests/{index}/?run={run.pk}")
        if page.locator("details.original").count():
            break
    else:
        pytest.fail("no request shows a persisted preview")
    row_id = page.locator("tr.row:has(details.original)").first.get_attribute("id")
    page.locator("details.original summary").first.click()
    full = page.locator("details.original pre.text.full").first
    full.wait_for()
    assert len(full.inner_text()) > 2000
    # a deep link to that block scrolls to it and marks it
    target = page.url.split("#")[0] + f"#{row_id}"
    page.goto(report)
    page.goto(target)
    page.locator(f"tr#{row_id}.target").wait_for()
    assert page.csp_errors == []


def test_hostile_transcript_renders_as_text_and_runs_nothing(page: Any) -> None:
    sign_up(page, "xss-user")
    upload(page, FIXTURES / "hostile.jsonl")
    run = wait_for_run(Run.objects.get(transcript__name="hostile.jsonl").pk)
    report = page.url
    page.locator("#chart-context .main-svg").first.wait_for()
    shown_as_text = False
    for index in range(run.summary["requests"]):
        page.goto(f"{report}requests/{index}/?run={run.pk}")
        page.locator("#explorer").wait_for()
        page.evaluate("document.querySelectorAll('#explorer details').forEach(d => d.open = true)")
        page.wait_for_timeout(200)
        assert page.evaluate("typeof window.__xss") == "undefined"
        shown_as_text |= "<script>window.__xss=1</script>" in page.locator("#explorer").inner_text()
    assert shown_as_text, "the payload should be visible as plain text"
    assert page.locator("#explorer img").count() == 0
    # the only SVG is the page's own mini context chart: none comes from the transcript
    assert page.locator("#explorer svg").count() == 1
    assert page.locator("#explorer svg#mini-chart").count() == 1
    assert page.locator("#explorer a[href^='javascript:']").count() == 0
    assert page.dialogs == []


def test_drag_and_drop_upload_of_several_files(page: Any) -> None:
    sign_up(page, "drop-user")
    page.goto("/sessions/")
    good = (FIXTURES / "persisted_preview.jsonl").read_text()
    data_transfer = page.evaluate_handle(
        """([good]) => {
            const dt = new DataTransfer();
            dt.items.add(new File([good], "dropped.jsonl", {type: "application/octet-stream"}));
            dt.items.add(new File(["just some notes"], "notes.txt", {type: "text/plain"}));
            return dt;
        }""",
        [good],
    )
    page.dispatch_event("#upload-form", "drop", {"dataTransfer": data_transfer})
    items = page.locator(".upload-item")
    expect(items).to_have_count(2)
    ok = page.locator(".upload-item.ok")
    ok.locator("text=Open the report").wait_for(timeout=60_000)
    expect(ok.locator(".name")).to_contain_text("dropped.jsonl")
    expect(page.locator(".upload-item.error .upload-msg")).to_contain_text("unsupported file type")
