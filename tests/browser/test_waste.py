"""Issue 22, items 3 and 4, in headless Chromium at 1280 and 390 px: the report's waste
findings, each opening the request it names (numbered from 1), and the compact-now-or-wait
table; nothing wider than the screen. ``CONTEXTLAB_SCREENSHOTS=docs/screenshots/issue-22``
keeps the pictures."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from contextlab.jobs.replay import WASTE_KEY
from contextlab.transcripts.models import Transcript
from tests import waste_sessions
from tests.browser.test_browser import sign_up, upload
from tests.browser.test_clear_pages import _internal_names, _our_words
from tests.conftest import wait_for_run

expect.set_options(timeout=30_000)

SHOTS = os.environ.get("CONTEXTLAB_SCREENSHOTS")
KINDS = ("reread", "cleared_output", "unused_result", "unused_tools", "cache_break")


def _fits(page: Any, width: int) -> None:
    """No horizontal overflow; at 1280 px no table wider than its room."""
    assert page.evaluate("document.documentElement.scrollWidth") <= width, page.url
    if width >= 1000:
        cut = page.evaluate(
            """() => Array.from(document.querySelectorAll('#waste table, #idle table'))
                .filter(t => t.scrollWidth > t.parentElement.clientWidth + 1)
                .map(t => t.id)"""
        )
        assert cut == [], cut


def _shoot(page: Any, name: str, width: int, anchor: str) -> None:
    """The section itself, whole (the report around it is in the other screenshots)."""
    if SHOTS:
        page.locator(anchor).screenshot(path=str(Path(SHOTS) / f"{name}-{width}.png"))


@pytest.mark.parametrize("width", [1280, 390])
def test_walk_the_findings_to_their_requests(page: Any, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    sign_up(page, f"waste-{width}")
    upload(page, waste_sessions.FIXTURES / "wasteful.jsonl")
    transcript = Transcript.objects.get()
    run = wait_for_run(transcript.runs.get().pk)
    # the worker (a real Celery worker process) stored the findings with the result
    stored = run.result.data[WASTE_KEY]["waste"]
    report = f"/sessions/{transcript.pk}/?run={run.pk}"
    page.goto(report)
    waste = page.locator("#waste")
    expect(waste).to_be_visible()
    for kind in stored["kinds"]:
        expect(page.locator(f"#waste-{kind['kind']}")).to_have_attribute(
            "data-count", str(kind["count"])
        )
    expect(page.locator("#waste-total")).to_contain_text("$")
    _fits(page, width)
    # plain words: the transcript's file and tool names are set apart, our words name no key
    assert _internal_names(_our_words(page)) == []
    _shoot(page, "report-waste", width, "#waste")
    for kind in KINDS:
        section = page.locator(f"#waste-{kind}")
        assert int(section.get_attribute("data-count") or 0) >= 1, kind
        finding = section.locator("li.finding").first
        expect(finding.locator(".finding-fix")).to_contain_text("Fix:")
        expect(finding).to_contain_text("(estimate)")
        link = finding.locator("a.finding-request").last
        number = int(link.inner_text().removeprefix("request "))
        link.click()
        page.wait_for_url(re.compile(rf".*/requests/{number - 1}/\?run={run.pk}$"))
        expect(page.locator("#req-number")).to_have_text(str(number))
        page.goto(report)
    # the cache break names the real settings that avoid it; the premium is set against it
    expect(page.locator("#waste-cache_break")).to_contain_text("promptCacheTtl")
    expect(page.locator("#waste-cache_break .notice")).to_contain_text("premium")
    # compact now or wait: every pause longer than 5 minutes, each opening its requests
    gaps = page.locator("#idle-gaps tbody tr")
    expect(gaps).to_have_count(5)
    expect(page.locator("#idle-verdict")).not_to_be_empty()
    after = gaps.nth(4).locator("a").last
    number = int(after.inner_text())
    after.click()
    page.wait_for_url(re.compile(rf".*/requests/{number - 1}/\?run={run.pk}$"))
    expect(page.locator("#req-number")).to_have_text(str(number))
    page.goto(report)
    _fits(page, width)
    _shoot(page, "report-idle", width, "#idle")


def test_the_advice_page_answers_compact_now_or_wait_per_session(page: Any) -> None:
    sign_up(page, "waste-adviser")
    upload(page, waste_sessions.FIXTURES / "wasteful.jsonl")
    upload(page, waste_sessions.FIXTURES / "tidy.jsonl")
    page.goto("/advice/new/")
    boxes = page.locator("#session-picker input[name=sessions]")
    for i in range(boxes.count()):
        boxes.nth(i).check()
    page.select_option("#id_goal", "lowest_cost")
    page.fill("input[name=values_autocompact_pct_override]", "90")
    page.fill("input[name=values_cache_ttl]", "1h")
    page.click("#start-advice")
    page.wait_for_url(re.compile(r".*/advice/\d+/$"))
    page.locator("#recommendation").wait_for(timeout=120_000)
    rows = page.locator("#idle-sessions tbody tr")
    expect(rows).to_have_count(2)
    pauses, quiet = (Transcript.objects.get(name=f"{n}.jsonl") for n in ("wasteful", "tidy"))
    wasteful = rows.filter(has=page.locator(f'a[href="/sessions/{pauses.pk}/#idle"]'))
    expect(wasteful.locator('td[data-label="Pauses"]')).to_contain_text("5")
    tidy = rows.filter(has=page.locator(f'a[href="/sessions/{quiet.pk}/#idle"]'))
    expect(tidy).to_contain_text("No pause outlived the cache")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        _fits(page, width)
        _shoot(page, "advice-idle", width, "#idle")
    # the session's name opens its report at the same question, pause by pause
    wasteful.locator("a").first.click()
    page.wait_for_url(re.compile(r".*/sessions/\d+/#idle$"))
    expect(page.locator("#idle-gaps tbody tr")).to_have_count(5)
