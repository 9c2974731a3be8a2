"""In headless Chromium: choose sessions and a goal, run advice, read the recommendation, copy
its settings (the real clipboard), see the Pareto chart."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from contextlab.advice.models import Advice
from tests.browser.test_browser import browser, page, sign_up, upload  # noqa: F401  (fixtures)
from tests.conftest import corpus_file

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]


def test_choose_sessions_goal_run_read_and_copy_the_settings(page: Any) -> None:  # noqa: F811
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    sign_up(page, "adviser")
    upload(page, corpus_file("marot__spotter__tool_heavy.jsonl"))
    upload(page, corpus_file("marot__spotter__short.jsonl"))

    page.goto("/tune/")
    page.click("#new-advice")
    page.wait_for_url(re.compile(r".*/advice/new/$"))
    boxes = page.locator("#session-picker input[name=sessions]")
    assert boxes.count() == 2
    for i in range(2):
        boxes.nth(i).check()
    page.select_option("#id_goal", "lowest_cost")
    page.fill("input[name=values_autocompact_pct_override]", "10, 90")
    # the recorded sessions asked for the 1-hour TTL; their gaps are short
    page.fill("input[name=values_cache_ttl]", "5m")
    page.click("#start-advice")
    page.wait_for_url(re.compile(r".*/advice/\d+/$"))
    # the progress line polls, then the page reloads with the answer
    page.locator("#recommendation").wait_for(timeout=90_000)
    advice = Advice.objects.get()
    best = advice.result["recommendations"][0]
    heading = page.locator("#recommendation h2").inner_text()
    assert best["label"] in heading
    page.locator("#chart-pareto .main-svg").first.wait_for()
    assert best["settings"] == {"promptCacheTtl": "5m"}
    assert float(page.locator("#saving").inner_text().strip("$")) > 0
    page.click("#copy-chosen")
    page.locator("#copy-chosen[data-copied='1']").wait_for()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert json.loads(copied) == best["settings"]
    # every explored config is in the table, the best first
    rows = page.locator("#candidates tbody tr")
    assert rows.count() == len(advice.result["recommendations"])
    assert "selected" in (rows.first.get_attribute("class") or "")
