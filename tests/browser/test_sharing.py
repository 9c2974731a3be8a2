"""Sharing in headless Chromium: share a report, open the link logged out, read-only, charts
drawn under the CSP; revoke it and see the 410 page."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.browser.test_browser import sign_up, upload
from tests.conftest import corpus_file


def test_share_open_logged_out_revoke_410(page: Any, browser: Any, live_server: Any) -> None:
    sign_up(page, "sharer")
    upload(page, corpus_file("marot__spotter__tool_heavy.jsonl"))
    page.locator("#share-button").click()
    page.wait_for_url(re.compile(r".*/sessions/\d+/share/.*"))
    assert "Anyone with the link" in page.locator("#share-dialog").inner_text()
    page.locator("#share-submit").click()
    page.locator("#share-created").wait_for()
    url = page.locator("#share-url").input_value()
    assert "/s/cls_" in url

    stranger = browser.new_context(base_url=live_server.url)
    other = stranger.new_page()
    csp_errors: list[str] = []
    other.on(
        "console",
        lambda msg: csp_errors.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    other.goto(url)
    other.locator("#shared-report").wait_for()
    assert "shared by sharer" in other.locator("#shared-banner").inner_text()
    other.locator("#chart-context .main-svg").first.wait_for()
    # the owner's report's tools and waste cards, chart drawn under the same CSP
    other.locator("#chart-tools .main-svg").first.wait_for()
    assert other.locator("#tool-table tr.tool-row").count() > 0
    assert other.locator("#waste").is_visible()
    assert other.locator("#idle").is_visible()
    assert other.locator("form").count() == 0
    assert other.locator("#share-button").count() == 0
    other.locator("text=Explore requests").click()
    other.wait_for_url(re.compile(r".*/s/cls_[^/]+/requests/0/$"))
    assert other.locator("tr.row").count() > 0
    other.locator("#next-link").click()
    other.wait_for_url(re.compile(r".*/requests/1/$"))
    # a tool's name opens the shared explorer filtered to it
    other.goto(url)
    other.locator("#tool-table a.tool-link").first.click()
    other.wait_for_url(re.compile(r".*/s/cls_[^/]+/requests/\d+/\?tool=.+"))
    filtered = other.locator("tr.row").count()
    assert filtered > 0
    assert "are shown" in other.locator("#tool-filter-note").inner_text()
    other.locator("#tool-filter-clear").click()
    other.locator("#tool-filter-note").wait_for(state="detached")
    assert other.locator("tr.row").count() >= filtered
    assert csp_errors == []

    page.goto("/shares/")
    page.locator("#links-table button.danger").first.click()
    page.wait_for_url("**/shares/")
    assert page.locator("#links-table tr[data-state=revoked]").count() == 1

    response = other.goto(url)
    assert response is not None
    assert response.status == 410
    assert "revoked" in other.locator("#error-message").inner_text()
    stranger.close()


def test_html_export_opens_offline_from_disk(page: Any, browser: Any, tmp_path: Any) -> None:
    sign_up(page, "exporter")
    upload(page, corpus_file("marot__spotter__tool_heavy.jsonl"))
    href = page.locator("#export-html").get_attribute("href")
    assert href
    response = page.request.get(href)
    assert response.status == 200
    path = tmp_path / "report.html"
    path.write_bytes(response.body())

    offline = browser.new_context(offline=True)
    requests: list[str] = []
    offline.route(
        "**/*",
        lambda route: (
            route.continue_()
            if route.request.url.startswith("file://")
            else (requests.append(route.request.url), route.abort())
        ),
    )
    other = offline.new_page()
    errors: list[str] = []
    other.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    other.goto(path.as_uri())
    other.locator("#chart-context .main-svg").first.wait_for()
    other.locator("#chart-fidelity .main-svg").first.wait_for()
    other.locator("#chart-tools .main-svg").first.wait_for()
    assert other.locator("#tool-table tr.tool-row").count() > 0
    assert other.locator("#waste").is_visible()
    assert other.locator("[id^=view-] tr.row").count() > 0
    # the session's date as the pages write it: in the reader's zone and words, not ISO text
    date = other.locator("#export-report time.local-time")
    stamp = date.get_attribute("datetime")
    assert stamp
    local = other.evaluate(
        """(s) => new Date(s).toLocaleString(undefined, {year: "numeric", month: "short",
        day: "numeric", hour: "2-digit", minute: "2-digit"})""",
        stamp,
    )
    expect(date).to_have_text(local)
    assert not re.search(r"\d{4}-\d\d-\d\dT", date.inner_text())
    assert date.get_attribute("title") == f"{stamp} (UTC)"
    assert requests == []
    assert errors == []
    offline.close()
