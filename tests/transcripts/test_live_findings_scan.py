"""A live session's update works its waste findings out going on from the last version's
waste scan (kept in the storage every worker host reads) over the appended messages: the
findings stored are those of a whole computation at every version; a scan of another file
version is not gone on from; deleting the session deletes the scan."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextlab import blobs, engine
from contextlab.jobs import replay as runner
from contextlab.runs import services as run_services
from contextlab.runs.models import RunResult
from contextlab.transcripts.models import Transcript
from tests.transcripts.test_live_provisional import CUTS, _grow_to, _live_session

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


@pytest.fixture(autouse=True)
def _no_refit(settings) -> None:
    settings.LIVE_REFIT_PERCENT = 100_000


@pytest.fixture
def scans(monkeypatch) -> list[bool]:
    """For each waste scan of the main thread: whether it went on from a kept state (held
    in the worker's memory, or stored)."""
    went_on: list[bool] = []
    real = engine.scan_main_thread_on

    def scan(session: engine.Session, kept: bytes | None = None, held: Any = None) -> Any:
        found = real(session, kept, held)
        went_on.append(found.went_on)
        return found

    monkeypatch.setattr(engine, "scan_main_thread_on", scan)
    return went_on


@pytest.fixture
def findings(monkeypatch) -> list[bool]:
    """For each live version's findings (rows and tools breakdown): whether they went on
    from the last version's kept in the worker's memory."""
    went_on: list[bool] = []
    real = engine.live_findings

    def live(data: Any, session: engine.Session, kept: Any = None) -> engine.LiveFindings:
        found = real(data, session, kept)
        went_on.append(found.went_on)
        return found

    monkeypatch.setattr(engine, "live_findings", live)
    return went_on


def _whole_waste(session_id: int, data: dict[str, Any]) -> str:
    messages = run_services.session_messages(Transcript.objects.get(pk=session_id))
    return json.dumps(runner.waste_report(data, messages), sort_keys=True)


def test_each_updates_findings_go_on_from_the_last_scan_and_are_the_whole_ones(
    client, auth_header, django_capture_on_commit_callbacks, scans, findings
):
    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    assert scans == [False]  # the first growth's (no state yet; the upload's is not live)
    assert findings == [False]
    for cut in CUTS[2:]:
        _grow_to(client, auth_header, session_id, cut, capture)
        scans.clear()
        findings.clear()
        # the last in a worker that holds neither (another host's): it goes on from the
        # stored scan, and works the rows and tools breakdown out whole
        another_host = cut == CUTS[-1]
        if another_host:
            runner._HELD_SCANS.clear()
            runner._KEPT_FINDINGS.clear()
        runner.execute_run(run.pk)
        run.refresh_from_db()
        assert run.provisional
        assert scans == [True]
        # the rows and tools breakdown too, in the worker that took the last version
        assert findings == [not another_host]
        data = RunResult.objects.get(run=run).read()
        assert json.dumps(data[runner.WASTE_KEY], sort_keys=True) == _whole_waste(session_id, data)
        # and the tools breakdown, from rows that hold no text, is the whole one
        messages = run_services.session_messages(Transcript.objects.get(pk=session_id))
        assert json.dumps(data[engine.TOOL_BREAKDOWN_KEY], sort_keys=True) == json.dumps(
            engine.tool_breakdown(data, messages), sort_keys=True
        )
        transcript = Transcript.objects.get(pk=session_id)
        kept = blobs.read_bytes(runner.waste_scan_name(run.pk)) or b""
        assert f"sha256={transcript.sha256}\n".encode() in kept.split(b"\n", 1)[0] + b"\n"


def test_a_scan_of_another_version_is_not_gone_on_from(
    client, auth_header, django_capture_on_commit_callbacks, scans
):
    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    name = runner.waste_scan_name(run.pk)

    def stored_for_another_file() -> None:
        kept = blobs.read_bytes(name) or b""
        head, _, state = kept.partition(b"\n")
        owner = head.rsplit(b"sha256=", 1)[0] + b"sha256=" + b"0" * 64 + b"\n"
        blobs.write_bytes(name, owner + state)

    # kept for a file this session never was, in a worker that holds no scan of it
    stored_for_another_file()
    runner._HELD_SCANS.clear()
    _grow_to(client, auth_header, session_id, CUTS[2], capture)
    scans.clear()
    runner.execute_run(run.pk)
    assert scans == [False]
    # and in a worker that holds one of another file
    stored_for_another_file()
    held_owner, held = runner._HELD_SCANS[run.pk]
    runner._HELD_SCANS[run.pk] = (held_owner.replace(b"sha256=", b"sha256=0"), held)
    _grow_to(client, auth_header, session_id, CUTS[3], capture)
    scans.clear()
    runner.execute_run(run.pk)
    assert scans == [False]
    data = RunResult.objects.get(run=run).read()
    assert json.dumps(data[runner.WASTE_KEY], sort_keys=True) == _whole_waste(session_id, data)


def test_deleting_the_session_deletes_its_runs_waste_scan(
    client, auth_header, django_capture_on_commit_callbacks
):
    from contextlab.transcripts import services

    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    assert blobs.read_bytes(runner.waste_scan_name(run.pk)) is not None
    with capture(execute=True):
        services.delete_transcript(transcript=Transcript.objects.get(pk=session_id))
    assert blobs.read_bytes(runner.waste_scan_name(run.pk)) is None


def test_a_session_past_the_kept_size_keeps_no_findings_in_memory(
    client, auth_header, django_capture_on_commit_callbacks, scans, findings, monkeypatch
):
    """A session of more than ``KEPT_FINDINGS_MAX_BYTES`` keeps neither its rows nor its
    scan in the worker's memory between appends: its next update goes on from the stored
    scan and works the rest out whole, with the same findings."""
    monkeypatch.setattr(runner, "KEPT_FINDINGS_MAX_BYTES", 1000)
    runner._KEPT_FINDINGS.clear()
    runner._HELD_SCANS.clear()
    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    assert run.pk not in runner._KEPT_FINDINGS
    assert run.pk not in runner._HELD_SCANS
    _grow_to(client, auth_header, session_id, CUTS[2], capture)
    scans.clear()
    findings.clear()
    runner.execute_run(run.pk)
    assert scans == [True]
    assert findings == [False]
    data = RunResult.objects.get(run=run).read()
    assert json.dumps(data[runner.WASTE_KEY], sort_keys=True) == _whole_waste(session_id, data)
