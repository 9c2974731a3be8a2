"""Issue 21 in headless Chromium at 390 and 1280 px: one clear answer on every page.

Request numbers count from 1 wherever a person reads one (the comparison's link to the first
divergence, notes and events on a request); page addresses keep the 0-based index.
"""

from __future__ import annotations

import csv
import json
import os
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from contextlab.jobs import replay as runner
from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript
from contextlab.tuning import services as tuning
from contextlab.tuning.configs import ConfigSpec
from tests.browser.test_browser import sign_up
from tests.conftest import corpus_file, corpus_path, wait_for_run

expect.set_options(timeout=30_000)

WIDTHS = [390, 1280]
#: a session with a recorded compaction and an anchor on the request right after it
COMPACTED = "marot__spotter__8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
SMALL = "marot__spotter__tool_heavy.jsonl"


def _replayed(run: Run) -> Run:
    """The run, finished: replayed in this process unless the test worker took it first."""
    runner.execute_run(run.pk)
    return wait_for_run(run.pk, timeout=300)


def _session(username: str, name: str, make_transcript: Any, django_user_model: Any) -> Any:
    owner = django_user_model.objects.get(username=username)
    # the compacted session is only in the corpus (too large to commit): without it, skip
    path = corpus_path(name) if name == COMPACTED else corpus_file(name)
    transcript: Transcript = make_transcript(path, owner=owner)
    _replayed(transcript.runs.get())
    return transcript


def _viewport(page: Any, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 844 if width < 600 else 900})


def _numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\brequest (\d+)", text, flags=re.IGNORECASE)]


@pytest.mark.parametrize("width", WIDTHS)
def test_request_numbers_count_from_one(
    page: Any, make_transcript: Any, django_user_model: Any, width: int
) -> None:
    _viewport(page, width)
    username = f"numbers-{width}"
    sign_up(page, username)
    owner = django_user_model.objects.get(username=username)

    # the comparison's link names the request it opens, as its own table does
    small = _session(username, SMALL, make_transcript, django_user_model)
    comparison = tuning.create_comparison(
        owner=owner,
        transcripts=[small],
        a=ConfigSpec(),
        b=ConfigSpec(overrides={"autocompact_pct_override": 10.0}),
    )
    for item in comparison.items.select_related("run"):
        _replayed(item.run)
    page.goto(f"/compare/{comparison.pk}/")
    link = page.locator("#first-divergence")
    said = _numbers(link.inner_text())
    assert len(said) == 1, link.inner_text()
    link.click()
    page.wait_for_url(re.compile(r".*/compare/\d+/requests/\d+/\?session=\d+$"))
    index = int(re.findall(r"/requests/(\d+)/", page.url)[0])
    assert said[0] == index + 1
    expect(page.locator("#req-number")).to_have_text(str(said[0]))

    # the note on the request right after a compaction: no 0-based number, no internal names
    transcript = _session(username, COMPACTED, make_transcript, django_user_model)
    run = transcript.runs.get()
    page.goto(f"/sessions/{transcript.pk}/requests/71/?run={run.pk}")
    expect(page.locator("#req-number")).to_have_text("72")
    events = page.locator("#request-events").inner_text()
    assert "compaction" in events, events
    assert 71 not in _numbers(events), events
    assert "after_compaction" not in events, events
    assert "point" not in events, events
    # the navigator's events name the request each opens
    for item in page.locator(".event-item").all()[:20]:
        href = item.locator("a").get_attribute("href") or ""
        shown = re.findall(r"#(\d+)", item.locator(".req").inner_text())
        assert shown
        assert int(shown[0]) == int(re.findall(r"/requests/(\d+)/", href)[0]) + 1


UUID_NAME = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
MARKED_UP = '<teammate-message teammate_id="lead">Fix the flaky login test</teammate-message>'


@pytest.mark.parametrize("width", WIDTHS)
def test_one_name_per_session_on_every_page(
    page: Any, make_transcript: Any, django_user_model: Any, width: int
) -> None:
    """A session uploaded as ``<uuid>.jsonl`` with a title in markup is called by the title's
    words on the list, report, explorer, pickers, share page and export; the file name shows
    as a detail, never as the name."""
    _viewport(page, width)
    username = f"names-{width}"
    sign_up(page, username)
    owner = django_user_model.objects.get(username=username)
    transcript = make_transcript(corpus_file(SMALL), owner=owner, name=UUID_NAME)
    run = _replayed(transcript.runs.get())
    transcript.title = MARKED_UP
    transcript.save(update_fields=["title"])
    name = "Fix the flaky login test"

    def named(selector: str) -> None:
        text = page.locator(selector).first.inner_text()
        assert name in text, f"{page.url} {selector}: {text!r}"
        assert UUID_NAME not in text, f"{page.url} {selector}: {text!r}"
        assert "teammate" not in page.locator("body").inner_text()

    page.goto("/sessions/")
    named(".session-row td:first-child a")
    page.goto(f"/sessions/{transcript.pk}/")
    named("h1")
    assert UUID_NAME in page.locator(".session-details").inner_text()  # the file: a detail
    assert name in page.title()
    page.goto(f"/sessions/{transcript.pk}/requests/0/?run={run.pk}")
    named(".crumbs")
    assert name in page.title()
    for picker in ("/compare/new/", "/sweeps/new/"):
        page.goto(picker)
        named("#session-picker .session-name")
        assert UUID_NAME in page.locator("#session-picker .file-name").first.inner_text()
    from contextlab.sharing import services as sharing

    _, token = sharing.create_share(user=owner, transcript=transcript, run=run)
    page.goto(f"/s/{token}/")
    named("h1")
    exported = page.request.get(f"/sessions/{transcript.pk}/export.html").text()
    heading = re.findall(r"<h1>(.*?)</h1>", exported)
    assert heading == [name], heading
    assert "&lt;teammate" not in exported


#: what a page must not say: the result's keys and ids, not words (issue 21 item 4)
INTERNAL = [
    (re.compile(r"\b[a-z][a-z0-9]*_[a-z0-9_]*[a-z0-9]\b"), "a snake_case key"),
    (
        re.compile(r"\b(?:result|session|request|views|cache)\.[a-z_]+(?:\.[a-z_]+)*\b"),
        "a dotted key",
    ),
    (re.compile(r"\bb-(?:s-)?\d+(?:-\d+)?\b"), "a block id"),
    (re.compile(r"\banswers \d{3}\b"), "an HTTP status"),
]
#: transcript content and the user's own names (shown as they are), the glossary's quoted fields
NOT_OURS = (
    "details.span, pre, code, kbd, .quote, .tool-name, .file-name, .project, .session-about, "
    ".session-name, h1, .crumbs a, .session-row td:first-child a, .workspace-name, "
    "input, textarea, select, script, style"
)


def _our_words(page: Any) -> str:
    """The page's visible text without transcript content and user-given names."""
    return str(
        page.evaluate(
            """(skip) => { const body = document.body.cloneNode(true);
                body.querySelectorAll(skip).forEach(e => e.remove());
                body.style.display = 'block'; document.documentElement.appendChild(body);
                const text = body.innerText; body.remove(); return text; }""",
            NOT_OURS,
        )
    )


def _internal_names(text: str) -> list[str]:
    """Each internal name found, with the words around it (to find where it is said)."""
    return [
        f"{why}: {m[0]!r} in …{text[max(0, m.start() - 60) : m.end() + 30]!r}"
        for pattern, why in INTERNAL
        for m in pattern.finditer(text)
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_pages_speak_plain_words(
    page: Any, make_transcript: Any, django_user_model: Any, width: int
) -> None:
    """Replay a corpus session with a compaction, then read every page of it: no page says
    one of the result's internal names (``after_compaction``, ``result.views``, ``b-116-0``,
    "answers 410", snake_case keys)."""
    _viewport(page, width)
    username = f"words-{width}"
    sign_up(page, username)
    transcript = _session(username, COMPACTED, make_transcript, django_user_model)
    run = transcript.runs.get()
    count = transcript.request_count
    pages = [
        "/sessions/",
        f"/sessions/{transcript.pk}/",
        f"/runs/{run.pk}/",
        f"/sessions/{transcript.pk}/share/",
        "/tune/",
        "/compare/new/",
        "/glossary/",
        "/accounts/tokens/",
        *(
            f"/sessions/{transcript.pk}/requests/{i}/?run={run.pk}"
            for i in sorted({0, 1, 70, 71, 72, count // 2, count - 1})
        ),
    ]
    found: dict[str, list[str]] = {}
    for url in pages:
        response = page.goto(url)
        assert response is not None
        assert response.ok, url
        page.locator("body").wait_for()
        names = _internal_names(_our_words(page))
        if "/requests/" in url:
            # every figure of a request links its glossary entry
            bare = page.locator("#explorer .stats > div:not(:has(a.help))").all_inner_texts()
            names += [f"a figure without its glossary link: {text!r}" for text in bare]
        if names:
            found[url] = sorted(set(names))
    assert found == {}, found


def _screenshot(page: Any, name: str, width: int, tmp_path: Path) -> None:
    out = Path(os.environ.get("SCREENSHOTS_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out / f"{name}-{width}.png"), full_page=True)


def _fits(page: Any, width: int) -> None:
    """The document is no wider than the screen; at 1280 px no table is wider than its room
    (on a phone a wide table may scroll inside its card, except the ones made to stack)."""
    assert page.evaluate("document.documentElement.scrollWidth") <= width, page.url
    cut = page.evaluate(
        """(sel) => Array.from(document.querySelectorAll(sel)).filter(t => t.offsetParent)
            .filter(t => t.scrollWidth > t.parentElement.clientWidth + 1
                      || t.getBoundingClientRect().right > window.innerWidth + 1)
            .map(t => {
                const room = t.parentElement.getBoundingClientRect().right;
                const wide = Array.from(t.querySelectorAll('*'))
                    .filter(e => e.getBoundingClientRect().right > room + 1).slice(-3)
                    .map(e => `${e.tagName}.${e.className}`);
                return `${t.id || t.className}: ${t.scrollWidth}px in ${t.parentElement.clientWidth}px (${wide})`;
            })""",
        "table" if width >= 1000 else "table.stack",
    )
    assert cut == [], f"{page.url}: {cut}"


@pytest.mark.parametrize("width", WIDTHS)
def test_tables_fit_and_a_new_link_can_be_copied(
    page: Any, make_transcript: Any, django_user_model: Any, width: int, tmp_path: Path
) -> None:
    """The sessions table and the share dialog's redaction table fit at 1280 px and at 390 px
    (each row a block of labelled values there), the keep boxes are on screen, a new link has a
    copy button, and home folders are counted apart from secrets."""
    _viewport(page, width)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    username = f"layout21-{width}"
    sign_up(page, username)
    transcript = _session(username, COMPACTED, make_transcript, django_user_model)
    owner = django_user_model.objects.get(username=username)
    other = make_transcript(corpus_file(SMALL), owner=owner, name=UUID_NAME)
    _replayed(other.runs.get())

    page.goto("/sessions/")
    _fits(page, width)
    for cell in page.locator("#session-table tr.session-row").first.locator("td").all():
        box = cell.bounding_box()
        assert box is not None
        assert box["x"] + box["width"] <= width + 1, cell.inner_text()
    _screenshot(page, "sessions", width, tmp_path)

    page.goto(f"/sessions/{transcript.pk}/share/")
    findings = page.locator("#share-findings")
    findings.wait_for()
    _fits(page, width)
    for box in page.locator("#share-findings input[name=keep]").all():
        where = box.bounding_box()
        assert where is not None
        assert where["x"] >= 0, where
        assert where["x"] + where["width"] <= width, where
    home = page.locator("#share-findings tr[data-category=home-path]")
    expect(home).to_contain_text("home folder, not a secret")
    _screenshot(page, "share-dialog", width, tmp_path)

    page.click("#share-submit")
    page.locator("#share-url").wait_for()
    link = page.locator("#share-url").input_value()
    page.click("#copy-share-url")
    expect(page.locator("#copy-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == link
    _fits(page, width)
    _screenshot(page, "share-created", width, tmp_path)

    page.goto(link)
    note = page.locator("#redaction-note").inner_text()
    assert re.search(r"[\d,]+ home-folder paths? shortened to ~", note), note
    _fits(page, width)


def _with_a_pause(source: Path, target: Path, days: int = 2) -> Path:
    """The transcript with every record from its middle on moved ``days`` later: a session
    resumed after a long pause (wall-clock span days, active time minutes)."""
    lines = source.read_text().splitlines()
    middle = len(lines) // 2
    out = []
    for n, line in enumerate(lines):
        record = json.loads(line)
        stamp = record.get("timestamp")
        if n >= middle and isinstance(stamp, str):
            moved = datetime.fromisoformat(stamp.replace("Z", "+00:00")) + timedelta(days=days)
            record["timestamp"] = moved.isoformat().replace("+00:00", "Z")
        out.append(json.dumps(record))
    target.write_text("\n".join(out) + "\n")
    return target


@pytest.mark.parametrize("width", WIDTHS)
def test_no_dead_ends_for_a_new_user_or_a_viewer(
    page: Any, make_transcript: Any, django_user_model: Any, width: int, tmp_path: Path
) -> None:
    """A logged-out visitor learns what ContextLab is; a new user loads the demo session into
    their personal workspace; an info notice is not a problem; a session resumed after days
    shows its active time; a viewer is not sent to Compare; the config hint is not stale; the
    API says where tokens come from."""
    _viewport(page, width)
    page.goto("/accounts/login/")
    welcome = page.locator("#welcome")
    expect(welcome).to_contain_text("model actually saw")
    image = welcome.locator("img")
    image.scroll_into_view_if_needed()
    expect(image).to_have_js_property("complete", True)
    assert image.evaluate("i => i.naturalWidth") > 0
    assert page.locator("#id_username").is_visible()
    _fits(page, width)
    _screenshot(page, "login", width, tmp_path)

    username = f"newcomer-{width}"
    sign_up(page, username)
    _screenshot(page, "sessions-empty", width, tmp_path)
    page.click("#load-demo")
    page.wait_for_url(re.compile(r".*/sessions/\d+/$"))
    owner = django_user_model.objects.get(username=username)
    demo = Transcript.objects.get(owner=owner)
    assert demo.workspace.is_personal
    expect(page.locator("h1").first).not_to_contain_text(".jsonl")
    _replayed(demo.runs.get())
    # the report reloads itself when its replay is done: wait for that before leaving it
    page.wait_for_timeout(1500)
    page.goto("about:blank")

    # an info notice is listed, not counted as a problem
    demo.problems = [
        {"file": "", "line": 3, "code": "kept", "message": "kept as-is", "severity": "info"}
    ]
    demo.save(update_fields=["problems"])
    page.goto("/sessions/")
    expect(page.locator(".session-row")).to_have_count(1)
    assert page.locator(".session-row .badge.warn").count() == 0
    page.goto(f"/sessions/{demo.pk}/")
    expect(page.locator("#notice-count")).to_have_text("1 notice")
    assert page.locator("#problem-count").count() == 0

    # resumed two days later: the wall-clock span and, beside it, the active time
    paused = make_transcript(
        _with_a_pause(corpus_file(SMALL), tmp_path / "paused.jsonl"), owner=owner
    )
    _replayed(paused.runs.get())
    page.goto("/sessions/")
    row = page.locator(".session-row", has=page.locator(f"a[href='/sessions/{paused.pk}/']"))
    duration = row.locator("td[data-label=Duration]")
    expect(duration).to_contain_text("2 d")
    active = duration.locator(".active-time").inner_text()
    assert re.fullmatch(r"active (\d+ min( \d+ s)?|\d+ s)", active), active
    _fits(page, width)
    _screenshot(page, "sessions-active-time", width, tmp_path)

    # the config hint follows what the user has
    page.goto("/compare/new/")
    expect(page.locator("#config-hint")).to_contain_text("No config of your own yet?")
    tuning.save_config(owner=owner, name="mine", preset="auto", overrides={"snip_enabled": True})
    page.goto("/compare/new/")
    expect(page.locator("#config-hint")).not_to_contain_text("No config of your own yet?")

    # the API's own page points to the Tokens page, not to a server command
    docs = page.request.get("/api/openapi.json").json()
    assert "/accounts/tokens/" in docs["info"]["description"]
    assert "manage.py" not in docs["info"]["description"]

    # a viewer of a team's session reads it, and is not sent to Compare
    from contextlab.workspaces import services as workspaces

    team = workspaces.create_workspace(creator=owner, name="Team")
    demo.workspace = team
    demo.save(update_fields=["workspace"])
    django_user_model.objects.create_user(username=f"viewer-{width}", password="a-long-pass-42")
    workspaces.set_member(workspace=team, username=f"viewer-{width}", role="viewer")
    page.context.clear_cookies()
    page.goto("/accounts/login/")
    page.fill("#id_username", f"viewer-{width}")
    page.fill("#id_password", "a-long-pass-42")
    page.click("button[type=submit]")
    page.wait_for_url("**/sessions/")
    page.goto(f"/sessions/{demo.pk}/")
    expect(page.locator("#viewer-note")).to_be_visible()
    assert page.locator("#compare-configs").count() == 0
    assert page.locator("a[href^='/compare/new/']").count() == 0
    _fits(page, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_request_rows_download_as_csv(
    page: Any, make_transcript: Any, django_user_model: Any, width: int, tmp_path: Path
) -> None:
    """The report's "Requests as CSV" downloads one line per request, numbered from 1 as the
    pages are, with the figures the explorer shows; another user gets a 404."""
    _viewport(page, width)
    username = f"csv-{width}"
    sign_up(page, username)
    transcript = _session(username, COMPACTED, make_transcript, django_user_model)
    run = transcript.runs.get()
    page.goto(f"/sessions/{transcript.pk}/")
    with page.expect_download() as download:
        page.click("#requests-csv")
    rows = list(csv.DictReader(Path(download.value.path()).read_text().splitlines()))
    count = Run.objects.get(pk=run.pk).summary["requests"]
    assert len(rows) >= count
    assert [int(r["request"]) for r in rows] == [int(r["index"]) + 1 for r in rows]
    compacted = [r for r in rows if "Compacted" in r["events"]]
    assert compacted, "the recorded compaction is named in its request's events"
    assert all(float(r["cost_usd"]) >= 0 for r in rows)
    assert all(int(r["model_tokens"]) > 0 for r in rows)
    _fits(page, width)
    page.context.clear_cookies()
    sign_up(page, f"other-{width}")
    assert page.request.get(f"/runs/{run.pk}/requests.csv").status == 404


def _luminance(page: Any, selector: str, prop: str) -> float:
    """Relative luminance (0 black … 1 white) of an element's computed colour ``prop``."""
    rgb = page.locator(selector).first.evaluate(f"e => getComputedStyle(e).{prop}")
    r, g, b = (int(v) / 255 for v in re.findall(r"\d+", rgb)[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


@pytest.mark.parametrize("width", WIDTHS)
def test_dark_theme_follows_the_system(
    page: Any, make_transcript: Any, django_user_model: Any, width: int, tmp_path: Path
) -> None:
    """With the system set to dark, pages are dark with light text (and light without it)."""
    _viewport(page, width)
    page.goto("/accounts/login/")
    assert _luminance(page, "body", "backgroundColor") > 0.8
    page.emulate_media(color_scheme="dark")
    username = f"dark-{width}"
    sign_up(page, username)
    transcript = _session(username, SMALL, make_transcript, django_user_model)
    run = transcript.runs.get()
    for name, url in {
        "login-dark": "/accounts/login/",
        "report-dark": f"/sessions/{transcript.pk}/",
        "explorer-dark": f"/sessions/{transcript.pk}/requests/1/?run={run.pk}",
    }.items():
        page.goto(url)
        for surface in ("body", ".card", "button, .button"):
            assert _luminance(page, surface, "backgroundColor") < 0.25, (url, surface)
        assert _luminance(page, ".card", "color") > 0.7, url
        if page.locator("input[type=text], input:not([type])").count():
            field = "input[type=text], input:not([type])"
            assert _luminance(page, field, "backgroundColor") < 0.25, url
        _fits(page, width)
        _screenshot(page, name, width, tmp_path)
