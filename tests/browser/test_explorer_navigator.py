"""The explorer in Chromium: event navigator (list, strip, n / p, filters), "changed rows only",
the mini context chart, and the per-request breakdown (stacked bar, tokens on rows, what a
compaction removed). Expected values come from the engine's own result, not hard-coded."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from contextlab import engine
from contextlab.jobs import replay as runner
from contextlab.runs import services
from contextlab.runs.models import Run
from tests.browser.test_browser import sign_up
from tests.conftest import wait_for_run

expect.set_options(timeout=30_000)

FIXTURE = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl"
)


def _whatif_run(username: str, make_transcript: Any, django_user_model: Any) -> Run:
    """The fixture session replayed with an early autocompact: a compaction, cache misses, and
    requests that mix kept and changed rows. (At 20 % the summary and the restored files alone
    pass the threshold, so every request after the first compaction compacts again, as Claude
    Code would: no request then keeps an intact row beside a changed one.)"""
    owner = django_user_model.objects.get(username=username)
    transcript = make_transcript(FIXTURE, owner=owner)
    wait_for_run(transcript.runs.get().pk)
    run = services.start_run(
        owner=owner,
        transcript=transcript,
        mode="whatif",
        overrides={"autocompact_pct_override": 30},
    )
    runner.execute_run(run.pk)  # unless the test worker took it first: then wait for it
    return wait_for_run(run.pk)


def _url(run: Run, index: int) -> str:
    return f"/sessions/{run.transcript_id}/requests/{index}/?run={run.pk}"


def _request_with_intact_and_changed_rows(run: Run, result: dict[str, Any]) -> int:
    """A request whose shown rows (history replaced by a summary is hidden) mix both."""
    messages = services.session_messages(run.transcript)["main"]
    for i, req in enumerate(result["requests"]):
        if i + 1 >= len(result["requests"]):
            break
        view = engine.side_by_side(messages, result, req["index"])
        shown = [r for r in view["rows"] if not (r["badge"] == "summarized" and r["model"] is None)]
        badges = {r["badge"] == "intact" for r in shown}
        if badges == {True, False}:
            return i
    raise AssertionError("no request mixes intact and changed rows")


def _index_of(page: Any) -> int:
    match = re.search(r"/requests/(\d+)/", page.url)
    assert match, page.url
    return int(match.group(1))


def test_event_navigator_keys_filters_and_changed_rows(
    page: Any, make_transcript: Any, django_user_model: Any
) -> None:
    sign_up(page, "nav-user")
    run = _whatif_run("nav-user", make_transcript, django_user_model)
    result = services.result_data(run)
    assert result is not None
    events = engine.request_events(result["requests"])
    kinds = {e["kind"] for e in events}
    assert {"compaction", "cache_miss"} <= kinds
    page.goto(_url(run, 0))
    # the list, the strip and one filter per kind present, with its count
    expect(page.locator("#event-list .event-item")).to_have_count(len(events))
    expect(page.locator("#event-strip .strip-tick")).to_have_count(len(events))
    for kind in kinds:
        count = sum(1 for e in events if e["kind"] == kind)
        label = page.locator(f"#event-filters label.k-{kind}")
        expect(label).to_contain_text(str(count))
    # the mini chart marks the current request
    assert page.locator("#mini-chart .mini-current").count() == 1
    # requests are numbered from 1 in the page
    expect(page.locator("#req-number")).to_have_text("1")

    def next_event(after: int, allowed: set[str]) -> int:
        return min(e["request"] for e in events if e["request"] > after and e["kind"] in allowed)

    first = next_event(0, kinds)
    page.keyboard.press("n")
    page.wait_for_url(re.compile(rf".*/requests/{first}/\?run={run.pk}$"))
    expect(page.locator("#req-number")).to_have_text(str(first + 1))
    expect(page.locator("#event-list .event-item.current").first).to_be_visible()
    second = next_event(first, kinds)
    page.keyboard.press("n")
    page.wait_for_url(re.compile(rf".*/requests/{second}/\?run={run.pk}$"))
    page.keyboard.press("p")
    page.wait_for_url(re.compile(rf".*/requests/{first}/\?run={run.pk}$"))

    # hide the compactions: n skips the requests that only compacted, and the filter is kept
    page.locator("#event-filters input[data-kind=compaction]").uncheck()
    expect(page.locator("#event-list .event-item.k-compaction").first).to_be_hidden()
    expect(page.locator("#event-list .event-item.k-cache_miss").first).to_be_visible()
    here = _index_of(page)
    target = next_event(here, kinds - {"compaction"})
    page.keyboard.press("n")
    page.wait_for_url(re.compile(rf".*/requests/{target}/\?run={run.pk}$"))
    expect(page.locator("#event-filters input[data-kind=compaction]")).not_to_be_checked()
    expect(page.locator("#event-list .event-item.k-compaction").first).to_be_hidden()

    # "changed rows only": every row left is one the pipeline changed
    mixed = _request_with_intact_and_changed_rows(run, result)
    page.goto(_url(run, mixed))
    all_rows = page.locator("#explorer-rows tr.row").count()
    page.click("#changed-toggle")
    page.wait_for_url(re.compile(r".*changed=1.*"))
    expect(page.locator("#changed-toggle")).to_have_attribute("aria-pressed", "true")
    changed = page.locator("#explorer-rows tr.row")
    assert 0 < changed.count() < all_rows
    assert page.locator("#explorer-rows tr.row.b-intact").count() == 0
    # navigation keeps the toggle
    page.keyboard.press("ArrowRight")
    page.wait_for_url(re.compile(rf".*/requests/{mixed + 1}/\?run={run.pk}&changed=1$"))

    # a click on a strip tick opens its request
    page.locator("#event-filters input[data-kind=compaction]").check()
    tick = page.locator("#event-strip .strip-tick").first
    tick.click()
    page.wait_for_url(re.compile(rf".*/requests/{events[0]['request']}/.*"))
    assert page.csp_errors == []


def test_breakdown_accounts_for_the_prompt(
    page: Any, make_transcript: Any, django_user_model: Any
) -> None:
    sign_up(page, "breakdown-user")
    run = _whatif_run("breakdown-user", make_transcript, django_user_model)
    result = services.result_data(run)
    assert result is not None
    requests = result["requests"]
    compaction = next(
        e["request"] for e in engine.request_events(requests) if e["kind"] == "compaction"
    )
    page.goto(_url(run, compaction))
    req = requests[compaction]
    # the stacked bar: one segment per part; the parts add up to what the model saw
    parts = page.locator("#parts tbody tr")
    assert parts.count() >= 2
    expect(page.locator("#stack-bar .seg")).to_have_count(parts.count())
    expect(parts.first).to_contain_text("system + tools (estimated)")
    prefix = int((result["session"]["calibration"] or {})["prefix_tokens"])
    assert prefix > 0
    tokens = page.locator("#stack-bar .seg").evaluate_all(
        "segs => segs.map(s => parseInt(s.style.flexGrow, 10))"
    )
    assert tokens[0] == min(prefix, req["model_tokens"])
    assert abs(sum(tokens) - req["model_tokens"]) <= len(tokens)
    expect(page.locator("#parts")).to_contain_text("summaries")
    # what the compaction removed, by kind, with a total
    removed = page.locator("#removed")
    expect(removed).to_contain_text("in all")
    assert removed.locator("tr").count() >= 2
    # tokens on every row the model saw, and the heaviest blocks link to their rows
    model_cells = page.locator("#explorer-rows td.model .cell-head")
    assert model_cells.count() > 0
    for i in range(model_cells.count()):
        expect(model_cells.nth(i).locator(".tok")).to_have_text(re.compile(r"^[\d.,]+k? tok$"))
    heaviest = page.locator("#heaviest a").first
    href = heaviest.get_attribute("href")
    assert href
    assert href.startswith("#b-")
    assert page.locator(href).count() == 1
    # the cache outcome reads as a sentence, and the time is shown in the viewer's zone
    expect(page.locator("#cache-sentence")).to_contain_text(re.compile(r"^Cache (hit|miss)"))
    assert page.csp_errors == []
