"""Recorded facts first, in Chromium (issue #20, items 1 and 2): the sessions list and the
report's first cost tile show one recorded cost; the request page shows the recorded cache with
the estimate beside it, labelled."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from contextlab.runs import services
from contextlab.runs.templatetags.humanize_tokens import tokens, usd
from contextlab.transcripts.models import Transcript
from tests.browser.test_browser import sign_up, upload
from tests.conftest import wait_for_run

expect.set_options(timeout=30_000)

DEMO = Path(__file__).resolve().parent.parent.parent / "contextlab" / "demo"
#: where screenshots go when ``CONTEXTLAB_SCREENSHOTS`` names a folder (docs/screenshots/)
SHOTS = os.environ.get("CONTEXTLAB_SCREENSHOTS")


def _shoot(page: Any, name: str) -> None:
    if not SHOTS:
        return
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(Path(SHOTS) / f"{name}-{width}.png"), full_page=False)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_list_report_and_request_page_show_the_recording_first(page: Any) -> None:
    sign_up(page, "facts-user")
    upload(page, DEMO / "marot__spotter__tool_heavy.jsonl")
    transcript = Transcript.objects.get()
    run = wait_for_run(transcript.runs.get().pk)
    summary = run.summary
    data = services.result_data(run)
    assert data is not None
    rows = data["requests"]
    assert summary["recorded_cache_requests"] == len(rows)

    # one cost answer: the list and the report's first cost tile show the same recorded cost
    page.goto("/sessions/")
    listed = page.locator("#session-table tr.session-row td.session-cost")
    expect(listed).to_have_text(usd(summary["cost_usd"]))
    list_cost = listed.inner_text()
    page.goto(f"/sessions/{transcript.pk}/?run={run.pk}")
    headline = page.locator("#cost-headline")
    expect(headline.locator(".stat")).to_have_text(list_cost)
    expect(headline).to_contain_text("recorded usage")
    # the replay's estimate is secondary, labelled, after it
    estimate = page.locator("#cost-estimate")
    expect(estimate).to_contain_text("replay estimate")
    expect(estimate.locator(".stat")).to_have_text(usd(summary["estimate"]["cost_usd"]))
    _shoot(page, "report-recorded-cost")

    # a recorded hit is shown as a hit, with the estimate beside it, labelled
    i = next(
        i
        for i, r in enumerate(rows)
        if r["cache"]["source"] == "recorded" and r["cache"]["hit"] and i > 0
    )
    row = rows[i]
    page.goto(f"/sessions/{transcript.pk}/requests/{i}/?run={run.pk}")
    sentence = page.locator("#cache-sentence")
    expect(sentence).to_contain_text("Cache hit (recorded)")
    expect(sentence).to_contain_text(f"{tokens(row['cache']['read'])} tokens read")
    figure = page.locator(".cache-figure")
    expect(figure).to_have_attribute("data-source", "recorded")
    expect(figure.locator(".stat")).to_have_text(tokens(row["recorded"]["cache_read"]))
    expect(figure.locator(".source-label")).to_have_text("recorded")
    expect(figure.locator(".estimate-label")).to_have_text(
        f"estimate {tokens(row['cache_estimate']['read'])}"
    )
    cost = page.locator(".cost-figure")
    expect(cost.locator(".stat")).to_have_text(usd(row["recorded_cost_usd"]))
    expect(cost.locator(".estimate-label")).to_have_text(
        f"replay estimate {usd(row['cost_estimate_usd'])}"
    )
    flagged = page.locator("#cache-disagrees")
    expect(flagged).to_have_count(1 if row["cache_disagrees"] else 0)
    _shoot(page, "request-recorded-cache")
    assert page.csp_errors == []


def test_an_unknown_model_is_priced_by_the_stated_rule_on_every_page(
    page: Any, tmp_path: Path
) -> None:
    source = (DEMO / "marot__spotter__tool_heavy.jsonl").read_text(encoding="utf-8")
    assert "claude-opus-4-6" in source
    renamed = tmp_path / "unknown_model.jsonl"
    renamed.write_text(source.replace("claude-opus-4-6", "claude-opus-4-4"), encoding="utf-8")
    sign_up(page, "price-user")
    upload(page, renamed)
    transcript = Transcript.objects.get()
    run = wait_for_run(transcript.runs.get().pk)
    (note,) = run.summary["pricing_notes"]
    assert note.startswith("claude-opus-4-4 is not in the price table: priced as Claude Opus 4.5")
    page.goto("/sessions/")
    badge = page.locator("#session-table tr.session-row td.session-cost .price-assumed")
    expect(badge).to_have_text("assumed price")
    expect(badge).to_have_attribute("title", note)
    page.goto(f"/sessions/{transcript.pk}/?run={run.pk}")
    expect(page.locator("#pricing-notes")).to_contain_text(note)
    page.goto(f"/sessions/{transcript.pk}/requests/1/?run={run.pk}")
    expect(page.locator(".cost-figure .price-note")).to_have_text(note)
    _shoot(page, "request-unknown-model")
    assert page.csp_errors == []


def test_a_whatif_shows_recorded_cost_plus_its_change_with_a_band(page: Any) -> None:
    from contextlab.jobs import replay as runner
    from contextlab.runs.models import Run

    sign_up(page, "whatif-cost-user")
    upload(page, DEMO / "marot__spotter__tool_heavy.jsonl")
    transcript = Transcript.objects.get()
    recorded = wait_for_run(transcript.runs.get().pk)
    whatif = services.start_run(
        owner=recorded.owner,
        transcript=transcript,
        mode="whatif",
        overrides={"autocompact_pct_override": 70},
    )
    runner.execute_run(whatif.pk)
    whatif = Run.objects.get(pk=whatif.pk)
    paid = recorded.summary["cost_usd"]
    change = whatif.summary["estimate"]["cost_usd"] - recorded.summary["estimate"]["cost_usd"]
    page.goto(f"/sessions/{transcript.pk}/?run={whatif.pk}")
    headline = page.locator("#cost-headline")
    expect(headline.locator(".stat")).to_have_text(usd(paid + change))
    expect(headline).to_contain_text(f"recorded {usd(paid)}")
    expect(headline).to_contain_text("±")
    estimate = page.locator("#cost-estimate")
    expect(estimate).to_contain_text("what-if estimate")
    flagged = recorded.summary["cache_disagreements"]
    if flagged:
        expect(estimate).to_contain_text(
            f"disagreed with the recording on {flagged} of "
            f"{recorded.summary['recorded_cache_requests']} recorded requests"
        )
    _shoot(page, "report-whatif-cost")
    assert page.csp_errors == []
