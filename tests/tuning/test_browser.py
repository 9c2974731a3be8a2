"""In headless Chromium: build a config from a preset, compare it, read the delta, jump to the
first divergence and step through the A-vs-B view with the keyboard."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from contextlab.tuning.models import ConfigVersion
from tests.browser.test_browser import browser, page, sign_up, upload  # noqa: F401  (fixtures)
from tests.conftest import corpus_file

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]


def number(text: str) -> float:
    return float(re.sub(r"[^0-9.\-]", "", text.replace("−", "-")) or 0)


def test_build_a_config_compare_it_and_jump_to_the_divergence(page: Any) -> None:  # noqa: F811
    sign_up(page, "tuner")
    upload(page, corpus_file("marot__spotter__tool_heavy.jsonl"))
    session_url = page.url

    # a config from a preset, with inline validation naming the field and its range
    page.goto("/configs/new/?preset=claude-code-2.1.74")
    page.fill("#id_name", "early-compact")
    page.click("details.field-group:has(#f-autocompact_pct_override) > summary")
    page.fill("#f-autocompact_pct_override", "-5")
    page.locator("#f-autocompact_pct_override").dispatch_event("change")
    error = page.locator("#err-autocompact_pct_override")
    error.wait_for(state="visible")
    assert "greater than 0 and at most 100" in error.inner_text()
    assert "autocompact_pct_override" in page.locator("#config-errors").inner_text()
    page.fill("#f-autocompact_pct_override", "10")
    page.locator("#f-autocompact_pct_override").dispatch_event("change")
    page.locator("#config-diff tr[data-field='autocompact_pct_override']").wait_for()
    assert page.locator("#err-autocompact_pct_override").inner_text() == ""
    page.click("#save-config")
    page.wait_for_url(re.compile(r".*/configs/\d+/\?saved=1$"))
    assert "Saved as version 1" in page.locator("#saved-note").inner_text()
    version = ConfigVersion.objects.get(saved_config__name="early-compact")
    assert version.overrides == {"autocompact_pct_override": 10.0}

    # compare the session's own preset (A) with the saved config (B), from the session report
    page.goto(session_url)
    page.click("#compare-configs")
    page.wait_for_url(re.compile(r".*/compare/new/\?session=\d+$"))
    page.select_option("#id_a_config", "preset:auto")
    page.select_option("#id_b_config", f"version:{version.pk}")
    page.click("#start-comparison")
    page.wait_for_url(re.compile(r".*/compare/\d+/$"))
    # the progress partial polls, then the page reloads with the results
    page.locator("#delta-table").wait_for(timeout=60_000)
    row = page.locator("#delta-table tr[data-measure='compactions'] td")
    a, b = number(row.nth(1).inner_text()), number(row.nth(2).inner_text())
    assert b > a
    # compactions are not the goal (cost is, by default): said neutrally, without a verdict
    assert row.nth(5).inner_text().strip() == "more in B"
    cost = page.locator("#delta-table tr[data-measure='cost_usd'] td")
    cost_a, cost_b = number(cost.nth(1).inner_text()), number(cost.nth(2).inner_text())
    assert cost.nth(5).inner_text().strip() == ("B better" if cost_b < cost_a else "A better")
    expect(page.locator("#verdict")).to_contain_text("For the lowest cost")
    page.locator("#chart-context .main-svg").first.wait_for()

    # jump to the first request where A and B diverge, then step with the keyboard
    page.click("#first-divergence")
    page.wait_for_url(re.compile(r".*/compare/\d+/requests/1/\?session=\d+$"))
    # numbered from 1 on the page (the URL keeps the index)
    assert page.locator("#req-number").inner_text() == "2"
    assert page.locator("#explorer tr.row.differs").count() > 0
    assert (
        page.locator("#explorer td.side-a").count() == page.locator("#explorer td.side-b").count()
    )
    page.keyboard.press("ArrowRight")
    page.wait_for_url(re.compile(r".*/requests/2/\?session=\d+$"))
    assert page.locator("#req-number").inner_text() == "3"
    page.keyboard.press("ArrowLeft")
    page.wait_for_url(re.compile(r".*/requests/1/\?session=\d+$"))
    assert page.locator("#req-number").inner_text() == "2"
    # a deep link opens the same view
    page.goto(page.url)
    assert page.locator("#req-number").inner_text() == "2"
    # the slider jumps to a request by its number
    page.locator("#req-slider").fill("1")
    page.wait_for_url(re.compile(r".*/requests/0/\?session=\d+$"))
    expect(page.locator("#req-number")).to_have_text("1")
    assert page.csp_errors == []
