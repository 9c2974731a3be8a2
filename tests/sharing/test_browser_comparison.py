"""Sharing a comparison in headless Chromium: Share… on the comparison page, the dialog, the
link opened in a fresh logged-out context (tables and charts drawn under the CSP, no forms),
then revoked on the Shared links page and answering 410."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.test_browser import browser, page, sign_up, upload  # noqa: F401  (fixtures)
from tests.conftest import corpus_file

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]


def test_share_a_comparison_open_logged_out_revoke_410(
    page: Any,  # noqa: F811
    browser: Any,  # noqa: F811
    live_server: Any,
    tmp_path: Path,
) -> None:
    sign_up(page, "comparer")
    upload(page, corpus_file("marot__spotter__tool_heavy.jsonl"))
    page.goto("/compare/new/")
    page.locator("input[name=sessions]").first.check()
    page.select_option("#id_a_config", "preset:auto")
    page.select_option("#id_b_config", "preset:aggressive")
    page.click("#start-comparison")
    page.wait_for_url(re.compile(r".*/compare/\d+/$"))
    page.locator("#delta-table").wait_for(timeout=60_000)
    owner_cost = page.locator("#delta-table tr[data-measure='cost_usd'] td").nth(2).inner_text()

    page.click("#share-button")
    page.wait_for_url(re.compile(r".*/compare/\d+/share/$"))
    dialog = page.locator("#share-dialog").inner_text()
    assert "Share this comparison" in dialog
    assert "Anyone with the link" in dialog
    page.locator("#share-submit").click()
    page.locator("#share-created").wait_for()
    url = page.locator("#share-url").input_value()
    assert "/s/cls_" in url

    stranger = browser.new_context(
        base_url=live_server.url, viewport={"width": 1400, "height": 1000}
    )
    other = stranger.new_page()
    csp_errors: list[str] = []
    other.on(
        "console",
        lambda msg: csp_errors.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    other.goto(url)
    other.locator("#shared-comparison").wait_for()
    assert "Read-only shared comparison" in other.locator("#shared-banner").inner_text()
    assert "shared by comparer" in other.locator("#shared-banner").inner_text()
    shared_cost = other.locator("#delta-table tr[data-measure='cost_usd'] td").nth(2).inner_text()
    assert shared_cost == owner_cost
    other.locator(".shared-pair .chart .main-svg").first.wait_for()
    assert other.locator(".shared-pair .chart .main-svg").count() >= 3
    assert other.locator("form").count() == 0
    assert other.locator("#share-button, #delete-form, input, select").count() == 0
    # logged out: no navigation to the owner's pages
    assert other.locator("a[href^='/compare/'], a[href^='/sessions/']").count() == 0
    shots = Path(os.environ.get("SCREENSHOTS_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    other.screenshot(path=str(shots / "shared-comparison.png"), full_page=True)
    assert csp_errors == []

    page.goto("/shares/")
    row = page.locator("#links-table tr[data-state=live]")
    assert "comparison #" in row.inner_text()
    row.locator("button.danger").click()
    page.wait_for_url("**/shares/")
    assert page.locator("#links-table tr[data-state=revoked]").count() == 1

    response = other.goto(url)
    assert response is not None
    assert response.status == 410
    assert "revoked" in other.locator("#error-message").inner_text()
    stranger.close()


def test_share_a_sweep_the_chart_draws_logged_out(
    page: Any,  # noqa: F811
    browser: Any,  # noqa: F811
    live_server: Any,
    tmp_path: Path,
) -> None:
    sign_up(page, "sweeper")
    upload(page, corpus_file("marot__spotter__tool_heavy.jsonl"))
    page.goto("/sweeps/new/")
    page.locator("input[name=sessions]").first.check()
    page.fill("#id_sweep_values", "10, 50, 90")
    page.click("#start-sweep")
    page.wait_for_url(re.compile(r".*/sweeps/\d+/$"))
    page.locator("#chart-sweep .main-svg").first.wait_for(timeout=60_000)
    page.locator("#sweep-progress[data-status=done]").wait_for(timeout=60_000)
    # another measure on y: htmx swaps the chart in, drawn as tall as its figure
    old_title = page.locator("#chart-sweep .ytitle").text_content() or ""
    other_y = page.locator("#id_y option:not([selected])").first.get_attribute("value")
    page.select_option("#id_y", other_y)
    expect(page.locator("#chart-sweep .ytitle")).not_to_have_text(old_title)
    figure_height = page.evaluate(
        "JSON.parse(document.getElementById('chart-sweep-data').textContent).layout.height"
    )
    assert page.locator("#chart-sweep").evaluate("d => d.style.height") == f"{figure_height}px"
    page.click("#share-button")
    page.wait_for_url(re.compile(r".*/sweeps/\d+/share/$"))
    assert "Share this sweep" in page.locator("#share-dialog").inner_text()
    page.locator("#share-submit").click()
    url = page.locator("#share-url").input_value()

    stranger = browser.new_context(
        base_url=live_server.url, viewport={"width": 1400, "height": 1000}
    )
    other = stranger.new_page()
    other.goto(url)
    other.locator("#shared-sweep").wait_for()
    other.locator("#chart-sweep .main-svg").first.wait_for()
    assert other.locator("#sweep-table tr[data-value]").count() == 3
    assert other.locator("form, input, select").count() == 0
    shots = Path(os.environ.get("SCREENSHOTS_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    other.screenshot(path=str(shots / "shared-sweep.png"), full_page=True)
    stranger.close()
