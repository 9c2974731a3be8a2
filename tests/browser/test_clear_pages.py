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
