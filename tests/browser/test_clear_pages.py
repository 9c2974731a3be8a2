"""Issue 21 in headless Chromium at 390 and 1280 px: one clear answer on every page.

Request numbers count from 1 wherever a person reads one (the comparison's link to the first
divergence, notes and events on a request); page addresses keep the 0-based index.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from contextlab.jobs import replay as runner
from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript
from contextlab.tuning import services as tuning
from contextlab.tuning.configs import ConfigSpec
from tests.browser.test_browser import sign_up
from tests.conftest import corpus_file, wait_for_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]

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
    transcript: Transcript = make_transcript(corpus_file(name), owner=owner)
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
        if names:
            found[url] = sorted(set(names))
    assert found == {}, found
