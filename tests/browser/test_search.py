"""Search in Chromium, at 1280 and 390 px: a phrase of a real session's late prompt is found
from the explorer's box ("/" focuses it) and from the workspace search page in the nav, and
its hit opens the request that first holds it with the block in view and marked.

With ``SEARCH_SCREENSHOTS=<folder>`` the pages are also saved there (docs/screenshots/)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from contextlab.runs.services import session_messages
from contextlab.transcripts import services as transcripts
from tests.conftest import CORPUS, HAVE_CORPUS, corpus_file, wait_for_run

#: a real session with a typed prompt late in it (request 90-odd of 99, row ~500 of the
#: explorer: past the first page); the committed demo session without the corpus
SESSION = "recent/entireio__git-sync__74_fd06e0aef8_0_full.jsonl"
FALLBACK = "marot__spotter__tool_heavy.jsonl"
SHOTS = os.environ.get("SEARCH_SCREENSHOTS", "")


def _late_phrase(transcript: Any) -> tuple[int, str]:
    """(message index, three consecutive plain words) of the session's last typed prompt."""
    found: tuple[int, str] | None = None
    for row in session_messages(transcript)["main"]:
        if row["kind"] != "prompt":
            continue
        for block in row["blocks"]:
            tokens = block["text"].split() if block["type"] == "text" else []
            runs = [
                " ".join(tokens[i : i + 3])
                for i in range(len(tokens) - 2)
                if all(w.isalpha() and len(w) > 2 for w in tokens[i : i + 3])
            ]
            if runs:
                found = (row["index"], runs[-1])
    assert found is not None
    return found


def _shot(page: Any, name: str, width: int) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}-{width}.png"), full_page=False)


def _no_horizontal_overflow(page: Any) -> None:
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 1, f"the page scrolls sideways by {overflow}px"


def _in_view(page: Any, selector: str) -> None:
    box = page.locator(selector).bounding_box()
    viewport = page.viewport_size
    assert box is not None
    assert box["y"] < viewport["height"]
    assert box["y"] + box["height"] > 0


@pytest.mark.parametrize("width", [1280, 390])
def test_late_prompt_is_found_and_its_hit_opens_its_request(
    page: Any, django_user_model: Any, width: int
) -> None:
    user = django_user_model.objects.create_user(username=f"finder{width}", password="pw-42-long")
    path = CORPUS / SESSION if HAVE_CORPUS else corpus_file(FALLBACK)
    with path.open("rb") as fh:
        transcript, _ = transcripts.create_transcript(owner=user, name=path.name, content=fh)
    run = wait_for_run(transcript.runs.get().pk)
    assert run.status == "done", run.error
    message, phrase = _late_phrase(transcript)
    result = run.result.read()["requests"]
    request = next(r for r in result if r["thread"] == "main" and r["view"]["end"] > message)
    number, block = request["index"] + 1, f"b-{message}-0"

    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "pw-42-long")
    page.click("button[type=submit]")
    page.wait_for_url("**/sessions/")

    # the explorer's box: "/" focuses it, the hits come by htmx
    page.goto(f"/sessions/{transcript.pk}/requests/0/")
    page.keyboard.press("/")
    box = page.locator("[data-search-box]")
    expect(box).to_be_focused()
    box.fill(f'"{phrase}"')
    box.press("Enter")
    # the phrase may be quoted earlier (a tool's output): the prompt's hit is among them
    hit = page.locator(".search-hit-item").filter(has_text=f"Request {number}").first
    expect(hit).to_contain_text("prompt")
    expect(hit.locator("mark").first).to_be_visible()
    _no_horizontal_overflow(page)
    _shot(page, "search-session", width)
    hit.locator("a.search-hit-link").click()
    page.wait_for_url(re.compile(rf".*/requests/{request['index']}/\?block={block}#{block}$"))
    expect(page.locator("#req-number")).to_have_text(str(number))
    expect(page.locator(f"tr#{block}")).to_have_class(re.compile(r"\bsearch-hit\b"))
    _in_view(page, f"tr#{block}")
    _no_horizontal_overflow(page)
    _shot(page, "search-hit-explorer", width)

    # the workspace search page, from the nav
    page.goto("/sessions/")
    if width < 600 and not page.locator("nav.nav a[href='/search/']").is_visible():
        page.goto("/search/")
    else:
        page.locator("nav.nav a[href='/search/']").click()
    page.wait_for_url("**/search/")
    page.keyboard.press("/")
    box = page.locator("[data-search-box]")
    expect(box).to_be_focused()
    box.fill(f'"{phrase}"')
    # the hits of every session read, newest session first; this one's prompt among them
    hit = page.locator(".search-hit-item").filter(has_text=f"Request {number}").first
    expect(hit).to_contain_text("prompt")
    expect(hit.locator(".hit-session")).to_be_visible()
    _no_horizontal_overflow(page)
    _shot(page, "search-workspace", width)
    hit.locator("a.search-hit-link").click()
    page.wait_for_url(re.compile(rf".*/requests/{request['index']}/\?block={block}#{block}$"))
    _in_view(page, f"tr#{block}")
    # many hits: tools, paths and kinds, each snippet escaped
    page.goto("/search/?q=" + ("git+commit" if HAVE_CORPUS else "the"))
    expect(page.locator(".search-hit-item").nth(2)).to_be_visible()
    assert page.locator(".search-hit-item mark").count() > 2
    _no_horizontal_overflow(page)
    _shot(page, "search-workspace-hits", width)
    assert page.csp_errors == []
