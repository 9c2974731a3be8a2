"""Form errors in the browser, and the layout at phone and desktop widths.

Every form shows a 4xx answer beside the field it names (a 422 form swapped in by htmx, or the
whole page for the plain forms); a 5xx or a network failure of an htmx request or an upload
shows the banner. Screenshots of the main pages at 390 and 1280 px are written to the test's
temporary folder, or to SCREENSHOTS_DIR when set (docs/screenshots/ holds the committed ones).
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from contextlab.jobs import replay as runner
from contextlab.transcripts.models import Transcript
from tests.browser.test_browser import sign_up
from tests.conftest import wait_for_run

# the machine may be shared and slow: expect() waits as long as the pages' own calls (30 s)
expect.set_options(timeout=30_000)

ROOT = Path(__file__).resolve().parent.parent.parent
DEMO = ROOT / "contextlab" / "demo" / "marot__spotter__tool_heavy.jsonl"


def _session_of(username: str, make_transcript: Any, django_user_model: Any) -> Transcript:
    """A transcript of the signed-up user, replayed (recorded mode) in this process."""
    owner = django_user_model.objects.get(username=username)
    transcript: Transcript = make_transcript(DEMO, owner=owner)
    run = transcript.runs.get()
    runner.execute_run(run.pk)  # unless the test worker took it first: then wait for it
    wait_for_run(run.pk)
    return transcript


def _open_report(
    page: Any, username: str, make_transcript: Any, django_user_model: Any
) -> Transcript:
    """Sign ``username`` up, give them a replayed session and open its report."""
    sign_up(page, username)
    transcript = _session_of(username, make_transcript, django_user_model)
    page.goto(f"/sessions/{transcript.pk}/")
    return transcript


def _submit_run_form(page: Any, config: str, cap: str = "") -> None:
    page.fill("#id_config", config)
    page.fill("#id_spend_cap_usd", cap)
    page.click("#run-form button[type=submit]")


def test_whatif_form_shows_each_error_beside_its_field(
    page: Any, make_transcript: Any, django_user_model: Any
) -> None:
    _open_report(page, "form-user", make_transcript, django_user_model)

    # out of range: the 422 form is swapped in, the message right under the textarea
    _submit_run_form(page, '{"autocompact_pct_override": 150}')
    error = page.locator("#id_config-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("autocompact_pct_override")
    assert (
        page.evaluate("document.getElementById('id_config').nextElementSibling.id")
        == "id_config-error"
    )
    expect(page.locator("#id_config")).to_have_class(re.compile(r"\binvalid\b"))
    expect(page.locator("#id_config")).to_have_value('{"autocompact_pct_override": 150}')

    # malformed JSON
    _submit_run_form(page, "{oops")
    expect(page.locator("#id_config-error")).to_contain_text("not valid JSON")

    # another field: the error moves beside it
    _submit_run_form(page, "", cap="lots")
    expect(page.locator("#id_spend_cap_usd-error")).to_contain_text("must be a number")
    expect(page.locator("#id_config-error")).to_have_count(0)
    expect(page.locator("#error-banner")).to_be_hidden()
    assert page.csp_errors == []


def test_server_errors_and_network_failures_show_the_banner(
    page: Any, make_transcript: Any, django_user_model: Any
) -> None:
    transcript = _open_report(page, "banner-user", make_transcript, django_user_model)
    banner = page.locator("#error-banner")
    expect(banner).to_be_hidden()

    runs_url = re.compile(rf".*/sessions/{transcript.pk}/runs/$")
    # a 500 from the server (fulfilled by the route): the banner, the form stays as it was
    page.route(
        runs_url,
        lambda route: route.fulfill(status=500, body="<h1>boom</h1>", content_type="text/html"),
    )
    _submit_run_form(page, '{"autocompact_pct_override": 80}')
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("500")
    expect(page.locator("#id_config")).to_have_value('{"autocompact_pct_override": 80}')
    page.click("#error-banner-close")
    expect(banner).to_be_hidden()
    page.unroute(runs_url)

    # the network fails
    page.route(runs_url, lambda route: route.abort())
    page.click("#run-form button[type=submit]")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("could not be reached")
    page.unroute(runs_url)

    # a real 4xx that names no field (the form's CSRF cookie is gone): beside the form's button
    page.click("#error-banner-close")
    page.context.clear_cookies(name="csrftoken")
    page.click("#run-form button[type=submit]")
    problem = page.locator("#run-form-problem")
    expect(problem).to_be_visible()
    expect(problem).to_contain_text("Reload the page")
    expect(banner).to_be_hidden()

    # the login expired: never the login page inside the form, a banner instead
    page.reload()
    page.context.clear_cookies(name="sessionid")
    page.click("#run-form button[type=submit]")
    expect(banner).to_contain_text("session has expired")
    expect(page.locator("#run-form #id_username")).to_have_count(0)
    assert page.csp_errors == []


def test_tuning_forms_show_errors_beside_their_fields(
    page: Any, make_transcript: Any, django_user_model: Any
) -> None:
    sign_up(page, "tune-user")
    _session_of("tune-user", make_transcript, django_user_model)

    # config form: inline check as you type, then the name on save
    page.goto("/configs/new/")
    page.evaluate("document.querySelectorAll('details.field-group').forEach(d => d.open = true)")
    page.fill("#f-autocompact_pct_override", "150")
    expect(page.locator("#err-autocompact_pct_override")).not_to_be_empty()
    page.fill("#f-autocompact_pct_override", "")
    expect(page.locator("#err-autocompact_pct_override")).to_be_empty()
    page.evaluate("document.getElementById('id_name').removeAttribute('required')")
    page.click("#save-config")
    expect(page.locator("#name-error")).to_contain_text("name")
    assert page.evaluate("document.getElementById('id_name').nextElementSibling.id") == "name-error"
    # the inline check fails on the network: the banner says so
    page.route(re.compile(r".*/configs/check/$"), lambda route: route.abort())
    page.evaluate("document.querySelectorAll('details.field-group').forEach(d => d.open = true)")
    page.fill("#f-autocompact_pct_override", "70")
    expect(page.locator("#error-banner")).to_contain_text("could not be reached")
    page.unroute(re.compile(r".*/configs/check/$"))

    # compare: bad overrides on side B, under B's textarea
    page.goto("/compare/new/")
    page.locator("#session-picker input[type=checkbox]").first.check()
    page.fill("#id_b_overrides", "{not json")
    page.click("#start-comparison")
    error = page.locator("#id_b_overrides-error")
    expect(error).to_contain_text("b.config")
    assert (
        page.evaluate("document.getElementById('id_b_overrides').nextElementSibling.id")
        == "id_b_overrides-error"
    )
    # no session picked: under the picker
    page.locator("#session-picker input[type=checkbox]").first.uncheck()
    page.fill("#id_b_overrides", "")
    page.click("#start-comparison")
    expect(page.locator("#session-picker-error")).to_be_visible()

    # sweep: bad values, under the values input
    page.goto("/sweeps/new/")
    page.locator("#session-picker input[type=checkbox]").first.check()
    page.fill("#id_sweep_values", "-10,5")
    page.click("#start-sweep")
    expect(page.locator("#id_sweep_values-error")).to_contain_text("values")
    assert (
        page.evaluate("document.getElementById('id_sweep_values').nextElementSibling.id")
        == "id_sweep_values-error"
    )
    assert page.csp_errors == []


def test_upload_failures_show_the_banner(page: Any) -> None:
    sign_up(page, "upload-fail-user")
    page.goto("/sessions/")
    upload_url = re.compile(r".*/sessions/upload/$")
    page.route(
        upload_url,
        lambda route: route.fulfill(status=502, body="bad gateway", content_type="text/plain"),
    )
    page.set_input_files("#upload-input", str(DEMO))
    expect(page.locator(".upload-item.error .upload-msg")).to_contain_text("502")
    expect(page.locator("#error-banner")).to_contain_text("502")
    page.unroute(upload_url)
    page.click("#error-banner-close")
    page.route(upload_url, lambda route: route.abort())
    page.set_input_files("#upload-input", str(DEMO))
    expect(page.locator("#error-banner")).to_contain_text("could not be reached")


def _no_horizontal_scroll(page: Any, width: int) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth")
    assert overflow <= width, f"{page.url} is {overflow}px wide at a {width}px viewport"


def _nav_words_apart(page: Any) -> None:
    """Each nav item has room around it: no two run together."""
    boxes = page.evaluate(
        """Array.from(document.querySelectorAll('.topbar nav > *'))
            .filter(e => e.offsetParent !== null)
            .map(e => { const r = e.getBoundingClientRect(); return [r.left, r.right, r.top]; })"""
    )
    for (_, right, top), (left, _, next_top) in itertools.pairwise(boxes):
        if abs(top - next_top) < 4:  # same line
            assert left - right >= 8, f"nav items {right}→{left} run together"


@pytest.mark.parametrize("width", [390, 1280])
def test_pages_fit_the_screen_and_are_screenshotted(
    page: Any, make_transcript: Any, django_user_model: Any, tmp_path: Path, width: int
) -> None:
    out = Path(os.environ.get("SCREENSHOTS_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": width, "height": 844 if width < 600 else 900})
    page.goto("/accounts/login/")
    _no_horizontal_scroll(page, width)
    page.screenshot(path=str(out / f"login-{width}.png"))

    username = f"layout-{width}"
    sign_up(page, username)
    transcript = _session_of(username, make_transcript, django_user_model)
    run = transcript.runs.get()
    shots = {
        "sessions": "/sessions/",
        "report": f"/sessions/{transcript.pk}/",
        "explorer": f"/sessions/{transcript.pk}/requests/3/?run={run.pk}",
        "tune": "/tune/",
        "config": "/configs/new/",
        "compare": "/compare/new/",
        "not-found": "/sessions/987654/",
    }
    for name, url in shots.items():
        page.goto(url)
        page.locator(".topbar").wait_for()
        _no_horizontal_scroll(page, width)
        _nav_words_apart(page)
        page.screenshot(path=str(out / f"{name}-{width}.png"))
    # the what-if form with an error beside its field
    page.goto(f"/sessions/{transcript.pk}/")
    _submit_run_form(page, '{"autocompact_pct_override": 150}')
    page.locator("#id_config-error").wait_for()
    page.locator("#whatif").scroll_into_view_if_needed()
    _no_horizontal_scroll(page, width)
    page.locator("#whatif").screenshot(path=str(out / f"whatif-error-{width}.png"))
    assert page.csp_errors == []


#: the report's charts with a legend (the fidelity chart has one trace and none)
LEGEND_CHARTS = ("chart-context", "chart-cache", "chart-cost", "chart-tools")


def _legends_clear_of_axes(page: Any) -> None:
    """Each chart's legend lies below its x-axis title (and tick labels) and inside the chart;
    every chart's title fits its width."""
    for chart in LEGEND_CHARTS:
        div = page.locator(f"#{chart}")
        legend = div.locator("g.legend")
        legend.wait_for(state="attached")
        boxes = page.evaluate(
            """(id) => {
              const div = document.getElementById(id);
              const box = (el) => { const r = el.getBoundingClientRect(); return [r.top, r.bottom]; };
              const axis = [...div.querySelectorAll('.xtitle, .xtick text')].map(box);
              return {div: box(div), legend: box(div.querySelector('g.legend')),
                      axisBottom: Math.max(...axis.map(b => b[1]))};
            }""",
            chart,
        )
        top, bottom = boxes["legend"]
        assert top >= boxes["axisBottom"] - 1, f"{chart}: legend runs into the x axis"
        assert bottom <= boxes["div"][1] + 1, f"{chart}: legend cut off below the chart"
    # a plotly title does not wrap: each fits its chart's width
    overflowing = page.evaluate(
        """() => [...document.querySelectorAll('[data-chart]')].filter(div =>
              [...div.querySelectorAll('.gtitle, .gtitle-subtitle')].some(t =>
                t.getBoundingClientRect().right > div.getBoundingClientRect().right + 1)
            ).map(div => div.id)"""
    )
    assert overflowing == []


@pytest.mark.parametrize("width", [390, 1280])
def test_report_legends_titles_and_buttons_keep_clear_of_each_other(
    page: Any, make_transcript: Any, django_user_model: Any, width: int
) -> None:
    """A legend placed at a fraction of the plot's height wrapped to more rows on a phone and
    ran into the axis title, or (a window narrowed after the charts were drawn) past the
    figure's foot, cut off; a long chart title ran past a phone's screen; the session card's
    wrapped buttons touched its facts."""
    username = f"legends-{width}"
    sign_up(page, username)
    transcript = _session_of(username, make_transcript, django_user_model)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/sessions/{transcript.pk}/")
    # the session card's buttons (wrapped onto lines of their own on a phone) clear its facts
    delete = page.locator("#delete-form button").bounding_box()
    facts = page.locator("#session-card .facts").bounding_box()
    assert delete
    assert facts
    assert facts["y"] - (delete["y"] + delete["height"]) >= 4
    for chart in LEGEND_CHARTS:
        page.locator(f"#{chart} .main-svg").first.wait_for()
    _legends_clear_of_axes(page)
    # drawn wide, then the window narrowed: plotly lays the charts out again at the new width
    page.set_viewport_size({"width": 1280 if width < 600 else 390, "height": 900})
    page.wait_for_timeout(1000)
    _legends_clear_of_axes(page)


def test_search_boxes_are_styled_as_the_fields_beside_them(page: Any) -> None:
    """The search pages' text box had the browser's bare style: thinner than the selects and
    button in the same row."""
    sign_up(page, "search-style")
    page.goto("/search/?q=anything")
    box = page.locator(".search-form input[type=search]").bounding_box()
    select = page.locator(".search-form select").first.bounding_box()
    assert box
    assert select
    assert abs(box["height"] - select["height"]) <= 3, (box["height"], select["height"])


def test_the_tools_tables_sort_buttons_show_the_keyboard_focus(
    page: Any, make_transcript: Any, django_user_model: Any
) -> None:
    """The sort buttons are unstyled (``all: unset``), which took their focus ring too."""
    _open_report(page, "sort-focus", make_transcript, django_user_model)
    buttons = page.locator("#tool-table th button.sort")
    buttons.nth(1).focus()
    page.keyboard.press("Shift+Tab")  # a key moves the focus: the browser shows its ring
    focused = page.evaluate(
        """() => { const e = document.activeElement, s = getComputedStyle(e);
                   return [e.matches('#tool-table button.sort'), s.outlineStyle, s.outlineWidth]; }"""
    )
    assert focused == [True, "solid", "2px"]
    # and Enter sorts by that column
    page.keyboard.press("Enter")
    expect(page.locator("#tool-table th").first).to_have_attribute("aria-sort", "ascending")


def _tables_fit(page: Any, width: int) -> None:
    """No table scrolls sideways: each lies within the screen and no box around it scrolls."""
    wide = page.evaluate(
        """(width) => [...document.querySelectorAll('main table')]
            .filter(t => t.checkVisibility())
            .filter(t => {
              if (t.getBoundingClientRect().right > width) return true;
              for (let p = t.parentElement; p && p !== document.body; p = p.parentElement)
                if (p.scrollWidth > p.clientWidth + 1) return true;
              return false;
            }).map(t => t.id || (t.closest('section') || {}).id || t.className)""",
        width,
    )
    assert wide == [], f"{page.url}: {wide} scroll sideways at {width}px"


def _stacked_cells_keep_their_headings(page: Any, table: str) -> None:
    """Stacked, a table's header row is hidden: each heading a cell had (but the first, which
    heads its row) shows above its value instead, so nothing the wide table says is lost."""
    found = page.evaluate(
        """(sel) => [...document.querySelectorAll(sel)].filter(t => t.checkVisibility())
            .map(t => {
              const heads = [...t.querySelectorAll(':scope > thead th')].slice(1)
                .map(th => th.textContent.trim().toLowerCase()).filter(Boolean);
              const shown = new Set();
              t.querySelectorAll(':scope > tbody > tr > td').forEach(td => {
                const label = getComputedStyle(td, '::before').content;
                if (td.checkVisibility() && label && label !== 'none')
                  shown.add(JSON.parse(label).toLowerCase());
              });
              return {heads, shown: [...shown],
                      headerShown: [...t.querySelectorAll(':scope > thead')]
                        .some(h => h.checkVisibility())};
            })""",
        table,
    )
    assert found, f"{table} not on {page.url}"
    for each in found:
        assert not each["headerShown"]
        assert set(each["heads"]) <= set(each["shown"]), (table, each)


def test_runs_and_compare_tables_fit_a_phone_with_every_heading(
    page: Any, make_transcript: Any, django_user_model: Any, tmp_path: Path
) -> None:
    """At 390 px the report's Runs table, a comparison's delta table and its per-request
    figures, a sweep's table and the Tune lists scrolled sideways: stacked, each row's cells
    wrap under their headings; at 1280 px they are tables as before."""
    out = Path(os.environ.get("SCREENSHOTS_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    transcript = _open_report(page, "phone-tables", make_transcript, django_user_model)
    page.goto("/compare/new/")
    page.locator("input[name=sessions]").first.check()
    page.select_option("#id_a_config", "preset:auto")
    page.select_option("#id_b_config", "preset:aggressive")
    page.click("#start-comparison")
    page.wait_for_url(re.compile(r".*/compare/\d+/$"))
    comparison = page.url
    page.locator("#delta-table").wait_for(timeout=120_000)
    page.goto("/sweeps/new/")
    page.locator("input[name=sessions]").first.check()
    page.fill("#id_sweep_values", "60, 90")
    page.click("#start-sweep")
    page.wait_for_url(re.compile(r".*/sweeps/\d+/$"))
    sweep = page.url
    page.locator("#sweep-progress[data-status=done]").wait_for(timeout=120_000)
    pages = {
        "report-runs": (f"/sessions/{transcript.pk}/", "#run-table, #problem-table"),
        "config-fields": (f"/sessions/{transcript.pk}/", "#config-fields"),
        "compare-delta": (comparison, "#delta-table"),
        "compare-request": (comparison + "requests/1/", "#ab-stats"),
        "sweep-table": (sweep, "#sweep-table"),
        "tune-lists": ("/tune/", "#comparisons table, #sweeps table"),
    }
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 844 if width < 600 else 900})
        for name, (url, table) in pages.items():
            page.goto(url)
            # the runs a comparison made, folded under its row on the report, and the what-if
            # form's table of config fields, opened
            page.evaluate(
                "document.querySelectorAll('#runs details, details.fields')"
                ".forEach(d => d.open = true)"
            )
            page.locator(table.split(",")[0]).first.wait_for()
            _no_horizontal_scroll(page, width)
            _tables_fit(page, width)
            if width < 600:
                _stacked_cells_keep_their_headings(page, table)
            else:  # a table as before, its header row shown
                assert page.locator(table).first.locator("thead").is_visible()
            page.locator(table.split(",")[0]).first.scroll_into_view_if_needed()
            page.screenshot(path=str(out / f"{name}-{width}.png"))
    assert page.csp_errors == []


def _column(page: Any, table: str, column: int) -> list[float]:
    return page.evaluate(
        """([sel, i]) => [...document.querySelectorAll(sel + ' tbody tr')]
            .filter(r => !r.hidden).map(r => parseFloat(r.cells[i].dataset.value) || 0)""",
        [table, column],
    )


def test_sortable_tables_sort_by_tap_and_keyboard_on_a_phone(
    browser: Any, live_server: Any, make_transcript: Any, django_user_model: Any, tmp_path: Path
) -> None:
    """On a phone the tools table and the sessions list stack their rows, which hid their
    header row and so every way to sort them, while the tools card still said "Click a column
    to sort". Stacked, their sort buttons stay as a "Sort by" row: a tap sorts, and so do
    Enter and Space from the keyboard; the hint names no pointer."""
    context = browser.new_context(
        base_url=live_server.url,
        viewport={"width": 390, "height": 844},
        has_touch=True,
        is_mobile=True,
    )
    phone = context.new_page()
    phone.set_default_timeout(30_000)
    out = Path(os.environ.get("SCREENSHOTS_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    sign_up(phone, "phone-sorter")
    transcript = _session_of("phone-sorter", make_transcript, django_user_model)
    _session_of("phone-sorter", make_transcript, django_user_model)  # a second row to sort
    phone.goto(f"/sessions/{transcript.pk}/")
    hint = phone.locator("#tools p.small").first.inner_text()
    assert "click" not in hint.lower()
    assert "Sort by any column" in hint
    table = "#tool-table"
    assert phone.locator(f"{table} thead").is_visible()
    calls = phone.locator(f"{table} th button.sort", has_text="Calls")
    box = calls.bounding_box()
    assert box
    assert box["height"] >= 24  # a finger's target
    calls.tap()
    expect(phone.locator(f"{table} th").nth(1)).to_have_attribute("aria-sort", "ascending")
    assert _column(phone, table, 1) == sorted(_column(phone, table, 1))
    calls.tap()
    expect(phone.locator(f"{table} th").nth(1)).to_have_attribute("aria-sort", "descending")
    assert _column(phone, table, 1) == sorted(_column(phone, table, 1), reverse=True)
    # the keyboard: Tab reaches the buttons, Enter and Space sort
    sent = phone.locator(f"{table} th button.sort", has_text="Sent, all requests")
    sent.focus()
    phone.keyboard.press("Enter")
    expect(phone.locator(f"{table} th").nth(5)).to_have_attribute("aria-sort", "ascending")
    assert _column(phone, table, 5) == sorted(_column(phone, table, 5))
    phone.keyboard.press("Space")
    expect(phone.locator(f"{table} th").nth(5)).to_have_attribute("aria-sort", "descending")
    assert _column(phone, table, 5) == sorted(_column(phone, table, 5), reverse=True)
    phone.locator("#tools").scroll_into_view_if_needed()
    phone.screenshot(path=str(out / "tools-sort-390.png"))

    phone.goto("/sessions/")
    table = "#session-table"
    assert phone.locator(f"{table} thead").is_visible()
    requests = phone.locator(f"{table} th button.sort", has_text="Requests")
    requests.tap()
    column = phone.evaluate(
        """() => [...document.querySelectorAll('#session-table thead th')]
            .findIndex(th => th.textContent.trim() === 'Requests')"""
    )
    expect(phone.locator(f"{table} th").nth(column)).to_have_attribute("aria-sort", "ascending")
    assert _column(phone, table, column) == sorted(_column(phone, table, column))
    requests.focus()
    phone.keyboard.press("Enter")
    expect(phone.locator(f"{table} th").nth(column)).to_have_attribute("aria-sort", "descending")
    _no_horizontal_scroll(phone, 390)
    phone.screenshot(path=str(out / "sessions-sort-390.png"))
    context.close()
