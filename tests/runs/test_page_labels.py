"""What a reader sees named and formatted the same on every page: the agent that wrote the
session (a Codex session is not "Claude Code"), dollar amounts in the one ``usd`` format (no
"$0.0000" beside "$0.00"), a request's time as a local time on the shared explorer as on the
owner's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.test import Client

from contextlab.jobs import replay as runner
from contextlab.runs.templatetags.humanize_tokens import usd
from contextlab.sharing import services
from contextlab.transcripts.templatetags.agents import agent_label

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CODEX = FIXTURES / "codex" / "v0_64_remote_compaction.jsonl"
CLAUDE = FIXTURES / "waste" / "tidy.jsonl"


def _replayed(make_transcript, path: Path):
    """A session uploaded from ``path`` with its recorded run done."""
    transcript = make_transcript(path)
    runner.execute_run(transcript.runs.get().pk)
    return transcript


def _shared(user, make_transcript, path: Path = CLAUDE):
    """A replayed session and the token of a share link to it."""
    transcript = _replayed(make_transcript, path)
    _, token = services.create_share(user=user, transcript=transcript)
    return transcript, token


def _agent_fact(html: str) -> str:
    """The facts list's agent row: "<dt>agent</dt><dd>version</dd>"."""
    found = re.search(r"<dt>([^<]*)</dt><dd>(\d[^<]*)</dd>", html)
    assert found, "no agent/version row"
    return f"{found[1]} {found[2]}"


@pytest.mark.parametrize(("path", "label"), [(CODEX, "Codex"), (CLAUDE, "Claude Code")])
def test_report_share_and_export_name_the_agent_that_wrote_the_session(
    alice_client: Client, user, make_transcript, path: Path, label: str
) -> None:
    transcript, token = _shared(user, make_transcript, path)
    transcript.refresh_from_db()
    version = transcript.version
    assert version
    pages = {
        "report": alice_client.get(f"/sessions/{transcript.pk}/").content.decode(),
        "share": Client().get(f"/s/{token}/").content.decode(),
        "export": alice_client.get(f"/sessions/{transcript.pk}/export.html").content.decode(),
    }
    for page, html in pages.items():
        assert _agent_fact(html) == f"{label} {version}", page
        # compact now or wait: only Claude Code has a setting that compacts at a pause
        assert 'id="idle"' in html, page
        assert ("idleCompaction" in html) == (label == "Claude Code"), page
    # the request explorer: the agent's own context count, which its thresholds compare against
    explorer = alice_client.get(f"/sessions/{transcript.pk}/requests/1/").content.decode()
    assert f"{label}&#x27;s count" in explorer or f"{label}'s count" in explorer
    assert (
        f"Thresholds ({label}&#x27;s count)" in explorer
        or f"Thresholds ({label}'s count)" in explorer
    )
    if label == "Codex":
        assert "Claude Code" not in explorer
        for page, html in pages.items():
            assert "<dt>Claude Code</dt>" not in html, page
            # the waste card's note on unrecorded tool definitions names no other agent
            assert "tool definitions Claude Code sent" not in html, page


def test_a_snapshot_from_before_transcripts_named_their_agent_is_claude_codes() -> None:
    assert agent_label(None) == "Claude Code"
    assert agent_label("") == "Claude Code"
    assert agent_label("codex") == "Codex"


def test_the_shared_explorer_shows_the_request_time_as_a_local_time(
    alice_client: Client, user, make_transcript
) -> None:
    transcript, token = _shared(user, make_transcript)
    owners = alice_client.get(f"/sessions/{transcript.pk}/requests/0/").content.decode()
    shared = Client().get(f"/s/{token}/requests/0/").content.decode()
    # the owner's explorer: a <time> the page's script writes in the reader's zone
    stamp = re.search(r'<dt>Time</dt><dd><time class="local-time" datetime="([^"]+)">', owners)
    assert stamp
    assert f'<dt>Time</dt><dd><time class="local-time" datetime="{stamp[1]}">' in shared


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "$0.00"),
        (0.00001, "<$0.0001"),
        (0.000049, "<$0.0001"),
        (0.0001, "$0.0001"),
        (0.0012, "$0.0012"),
        (0.01, "$0.01"),
        (1234.5, "$1,234.50"),
        (-0.00001, "−<$0.0001"),
        (None, "—"),
    ],
)
def test_usd_never_writes_a_nonzero_amount_as_zero(value: float | None, shown: str) -> None:
    assert usd(value) == shown


def test_only_the_pages_whose_script_sorts_the_tools_table_mark_it_sortable(
    alice_client: Client, user, make_transcript
) -> None:
    """The export has no sorting script: its table is ``unsorted`` (no "↕" on the columns)."""
    transcript, token = _shared(user, make_transcript)
    table = re.compile(r'<table class="([^"]*)" id="tool-table">')
    report = alice_client.get(f"/sessions/{transcript.pk}/").content.decode()
    share = Client().get(f"/s/{token}/").content.decode()
    export = alice_client.get(f"/sessions/{transcript.pk}/export.html").content.decode()
    for html, unsorted in ((report, False), (share, False), (export, True)):
        found = table.search(html)
        assert found
        assert ("unsorted" in found[1].split()) is unsorted


def test_a_session_that_records_no_usage_has_its_cost_labelled_an_estimate(
    alice_client: Client, make_transcript, tmp_path: Path
) -> None:
    """Its recorded replay's cost is the replay's estimate throughout: the report and the
    sessions list say so instead of "recorded usage"."""
    lines = []
    for line in CLAUDE.read_text().splitlines():
        record = json.loads(line)
        record.get("message", {}).pop("usage", None)
        lines.append(json.dumps(record))
    path = tmp_path / "no_usage.jsonl"
    path.write_text("\n".join(lines) + "\n")
    transcript = _replayed(make_transcript, path)
    report = alice_client.get(f"/sessions/{transcript.pk}/").content.decode()
    headline = re.search(r'id="cost-headline".*?class="label">([^<]*)<', report, re.S)
    assert headline
    assert headline[1].strip() == "cost (estimated: no usage recorded)"
    sessions = alice_client.get("/sessions/").content.decode()
    assert "cost-estimated" in sessions
    # a session that records its usage keeps the recorded label, no "est."
    recorded = _replayed(make_transcript, CLAUDE)
    report = alice_client.get(f"/sessions/{recorded.pk}/").content.decode()
    headline = re.search(r'id="cost-headline".*?class="label">([^<]*)<', report, re.S)
    assert headline
    assert headline[1].strip() == "cost (recorded usage)"
    assert alice_client.get("/sessions/").content.decode().count("cost-estimated") == 1
