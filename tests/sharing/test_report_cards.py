"""The owner's report's waste, compact-now-or-wait and tools cards on a share link's report and
in the HTML export: the same findings and rows, transcript names escaped, their requests
linked within the share (or the file), and no link only the owner may follow."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest
from django.test import Client

from contextlab.jobs import replay as runner
from contextlab.runs.models import Run, RunResult
from contextlab.sharing import services
from tests import waste_sessions

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

HOSTILE_TOOL = "<img src=x onerror=window.__pwned=1>"
ESCAPED_TOOL = "&lt;img src=x onerror=window.__pwned=1&gt;"
KINDS = ("reread", "cleared_output", "unused_result", "unused_tools", "cache_break")


@pytest.fixture
def hostile(tmp_path: Path, make_transcript):
    """The wasteful session with its Grep tool renamed to markup, replayed by the runner."""
    body = (waste_sessions.FIXTURES / "wasteful.jsonl").read_text()
    body = body.replace('"name": "Grep"', f'"name": "{HOSTILE_TOOL}"')
    assert HOSTILE_TOOL in body
    path = tmp_path / "hostile.jsonl"
    path.write_text(body)
    transcript = make_transcript(path)
    runner.execute_run(transcript.runs.get().pk)
    return transcript


def _counts(html: str) -> dict[str, int]:
    return {k: int(n) for k, n in re.findall(r'id="waste-([a-z_]+)" data-count="(\d+)"', html)}


def _tool_cells(html: str) -> list[str]:
    return re.findall(r'<td data-label="Tool" data-value="[^"]*">(.*?)</td>', html)


def _section(html: str, anchor: str) -> str:
    start = html.index(f'id="{anchor}"')
    return html[start : html.index("</section>", start)]


def _owners_cards(alice_client: Client, transcript) -> tuple[dict[str, int], int, str]:
    html = alice_client.get(f"/sessions/{transcript.pk}/").content.decode()
    return _counts(html), len(_tool_cells(html)), html


def test_a_share_link_shows_the_reports_waste_and_tools_cards(alice_client, user, hostile):
    counts, tool_count, owners = _owners_cards(alice_client, hostile)
    assert set(counts) == set(KINDS)
    assert all(counts[k] >= 1 for k in KINDS)
    _, token = services.create_share(user=user, transcript=hostile)
    html = Client().get(f"/s/{token}/").content.decode()  # logged out

    assert _counts(html) == counts
    assert 'id="idle-gaps"' in html
    assert len(re.findall(r'data-label="Compacting saves"', html)) == len(
        re.findall(r'data-label="Compacting saves"', owners)
    )
    # a finding's requests open the shared explorer, numbered from 1
    links = re.findall(
        rf'<a class="finding-request" href="/s/{token}/requests/(\d+)/">request (\d+)</a>', html
    )
    assert links
    assert all(int(number) == int(index) + 1 for index, number in links)

    tools = _section(html, "tools")
    assert len(_tool_cells(tools)) == tool_count
    # the transcript's tool name: escaped text, its link the shared explorer filtered to it
    assert ESCAPED_TOOL in tools
    assert HOSTILE_TOOL not in html
    assert f'href="/s/{token}/requests/' in tools
    assert "tool=%3Cimg%20src%3Dx%20onerror%3Dwindow.__pwned%3D1%3E" in tools
    assert 'id="chart-tools"' in tools
    assert '<script id="chart-tools-data" type="application/json">' in tools
    # the hostile tool's link: the shared explorer says it is filtered, the name escaped
    href = re.search(r'<a class="tool-link" href="([^"]+%3Cimg[^"]*)"', tools)
    assert href is not None
    filtered = Client().get(unescape(href.group(1))).content.decode()
    note = re.search(r'<p class="small notice" id="tool-filter-note">.*?</p>', filtered)
    assert note is not None
    assert ESCAPED_TOOL in note.group(0)
    assert HOSTILE_TOOL not in filtered
    # nothing only the owner may open: the glossary, the CSV, the API
    for owners_only in ("/glossary/", "tools.csv", "/api/runs/"):
        assert owners_only not in _section(html, "waste") + _section(html, "idle") + tools


def test_the_html_export_holds_the_waste_and_tools_cards(alice_client, hostile):
    counts, tool_count, _ = _owners_cards(alice_client, hostile)
    html = alice_client.get(f"/sessions/{hostile.pk}/export.html").content.decode()
    assert _counts(html) == counts
    # a finding's requests are rows of the file's table
    links = re.findall(r'<a class="finding-request" href="#request-(\d+)">request (\d+)</a>', html)
    assert links
    assert all(int(number) == int(index) + 1 for index, number in links)
    assert all(f'id="request-{index}"' in html for index, _ in links)
    tools = _section(html, "tools")
    assert len(_tool_cells(tools)) == tool_count
    assert ESCAPED_TOOL in tools
    assert HOSTILE_TOOL not in html.replace(ESCAPED_TOOL, "")
    # no explorer in a file: names are not links, and nothing points at the server
    assert 'class="tool-link"' not in tools
    assert 'href="/' not in _section(html, "waste") + _section(html, "idle") + tools
    assert '<script id="chart-tools-data" type="application/json">' in tools


def test_a_result_stored_before_the_worker_stored_the_cards_is_shared_with_them(
    alice_client, user, hostile
):
    counts, tool_count, _ = _owners_cards(alice_client, hostile)
    run = hostile.runs.get()
    row = RunResult.objects.get(run=run)
    del row.data[runner.WASTE_KEY]
    del row.data["tool_breakdown"]
    row.save()
    # a new finish time: the processes' copies of the old result are not read
    Run.objects.filter(pk=run.pk).update(finished_at=run.finished_at.replace(microsecond=5))
    _, token = services.create_share(user=user, transcript=hostile)
    html = Client().get(f"/s/{token}/").content.decode()
    assert _counts(html) == counts
    assert len(_tool_cells(_section(html, "tools"))) == tool_count


def test_a_conversation_only_snapshot_without_stored_findings_leaves_the_card_out(user, hostile):
    """Its tool outputs are left out: worked out from it, a file read again would look
    changed. The tools card stays (the token counts stay)."""
    link, token = services.create_share(user=user, transcript=hostile, mode="conversation")
    snapshot = services.snapshot_data(link)
    del snapshot["result"][runner.WASTE_KEY]
    del snapshot["result"]["tool_breakdown"]
    html = Client().get(f"/s/{token}/").content.decode()
    assert 'id="waste"' not in html
    assert 'id="tool-table"' in html
