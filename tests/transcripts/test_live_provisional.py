"""A live session's run goes on from its last replay's state after each append (only the new
requests replayed, earlier rows as stored, the result provisional and labelled so), and is
replayed whole, replacing the provisional result, once the session ends (no append for
``LIVE_FINAL_AFTER``) or its reader presses "Replay in full"."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from contextlab import blobs, engine
from contextlab.engine.replay import thread as thread_replay
from contextlab.jobs import lifecycle
from contextlab.jobs import replay as runner
from contextlab.runs.models import Run, RunResult
from contextlab.transcripts.models import Transcript
from tests.transcripts.test_live_append import FULL, append, create

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

LINES = FULL.read_bytes().splitlines(keepends=True)
# cut where a user line starts: every response before the cut is whole
CUTS = (10, 25, 31, len(LINES))
LABEL = "live: estimates provisional until the session ends"


@pytest.fixture(autouse=True)
def _no_refit(settings) -> None:
    """This session doubles with each append: go on from the state whatever it grew by (the
    refit share is the engine's test's)."""
    settings.LIVE_REFIT_PERCENT = 100_000


@pytest.fixture
def replayed_requests(monkeypatch) -> list[tuple[str, int]]:
    """(thread, request index) of every request any replay (either pass) begins: its messages
    enter the view (``_enter_request``, also where the calibration's probe measures a request
    no step acts on without a step context)."""
    seen: list[tuple[str, int]] = []
    real = thread_replay.ThreadReplay._enter_request

    def enter(self: Any, req: Any, at: Any) -> Any:
        seen.append((self.thread.id, req.index))
        return real(self, req, at)

    monkeypatch.setattr(thread_replay.ThreadReplay, "_enter_request", enter)
    return seen


def _grow_to(client, headers, session_id: int, cut: int, capture) -> None:
    transcript = Transcript.objects.get(pk=session_id)
    with capture(execute=False):
        response = append(
            client,
            headers,
            session_id,
            transcript.received,
            b"".join(LINES[transcript_lines(transcript) : cut]),
        )
    assert response.status_code == 200, response.content


def transcript_lines(transcript: Transcript) -> int:
    return len(open(transcript.path, "rb").read().splitlines())


def _live_session(client, headers, capture) -> tuple[int, Run]:
    """A session uploaded with its first request, and grown once (a whole replay: the run had
    no state yet); its run done."""
    with capture(execute=False):
        created = create(client, headers, b"".join(LINES[: CUTS[0]]))
    run = Run.objects.get(transcript_id=created["id"])
    runner.execute_run(run.pk)
    _grow_to(client, headers, created["id"], CUTS[1], capture)
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert run.live_continue
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert not run.provisional  # no state to go on from: replayed whole
    assert blobs.read_bytes(lifecycle.live_state_name(run.pk)) is not None
    return created["id"], run


def _whole_replay(transcript: Transcript) -> dict[str, Any]:
    session = engine.load_session(transcript.path, name=transcript.name)
    config, preset = engine.resolve_session_config(session)
    data: dict[str, Any] = json.loads(
        json.dumps(engine.replay(session, config, preset_name=preset).to_json())
    )
    return data


def _replays_whole(run: Run, session_id: int) -> None:
    """The run's next replay is a whole one: not provisional, and the requests JSON a replay of
    the file from scratch gives."""
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert not run.provisional
    stored = RunResult.objects.get(run=run).read()["requests"]
    whole = _whole_replay(Transcript.objects.get(pk=session_id))
    assert json.dumps(stored, sort_keys=True) == json.dumps(whole["requests"], sort_keys=True)


@pytest.mark.slow  # replays after three appends, and once more whole
def test_an_append_replays_only_its_requests_and_the_ended_session_is_replayed_whole(
    client, auth_header, user, settings, django_capture_on_commit_callbacks, replayed_requests
):
    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    report = f"/sessions/{session_id}/"
    client.force_login(user)
    assert LABEL not in client.get(report).content.decode()
    for cut in CUTS[2:]:
        stored = RunResult.objects.get(run=run).read()["requests"]
        _grow_to(client, auth_header, session_id, cut, capture)
        replayed_requests.clear()
        runner.execute_run(run.pk)
        run.refresh_from_db()
        assert run.status == Run.Status.DONE
        assert run.provisional
        rows = RunResult.objects.get(run=run).read()["requests"]
        # (1) the earlier rows as stored, the new ones replayed from the state: no earlier
        # request is replayed again (in either pass)
        assert len(rows) > len(stored)
        assert rows[: len(stored)] == stored
        assert replayed_requests == [("main", k) for k in range(len(stored), len(rows))]
        # (3) the report says so, with its glossary entry
        page = client.get(report).content.decode()
        assert LABEL in page
        assert "/glossary/#provisional" in page
    transcript = Transcript.objects.get(pk=session_id)
    whole = _whole_replay(transcript)
    assert len(rows) == len(whole["requests"])
    # recorded facts are exact in the provisional result too
    for mine, theirs in zip(rows, whole["requests"], strict=True):
        assert (mine["line"], mine["recorded"], mine["recorded_cost_usd"]) == (
            theirs["line"],
            theirs["recorded"],
            theirs["recorded_cost_usd"],
        )

    # the session ends: no append for LIVE_FINAL_AFTER, and the recovery replays it whole
    assert lifecycle.finalize_ended_live() == []  # not yet
    Transcript.objects.filter(pk=session_id).update(
        appended_at=timezone.now() - timedelta(seconds=settings.LIVE_FINAL_AFTER + 1)
    )
    assert lifecycle.finalize_ended_live() == [run.pk]
    replayed_requests.clear()
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert not run.provisional
    final = RunResult.objects.get(run=run).read()
    # (2) the final result is a replay of the whole file from scratch: identical JSON
    assert json.dumps(final["requests"], sort_keys=True) == json.dumps(
        whole["requests"], sort_keys=True
    )
    assert len(replayed_requests) > len(rows)  # both passes, every request
    # (3) and the label is gone
    assert LABEL not in client.get(report).content.decode()


@pytest.mark.slow
def test_replay_in_full_replaces_the_provisional_result(
    client, auth_header, user, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    _grow_to(client, auth_header, session_id, CUTS[-1], capture)
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.provisional
    client.force_login(user)
    page = client.get(f"/sessions/{session_id}/").content.decode()
    assert 'id="replay-in-full"' in page
    with capture(execute=False):
        response = client.post(f"/runs/{run.pk}/replay-in-full/")
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert not run.live_continue
    _replays_whole(run, session_id)
    page = client.get(f"/sessions/{session_id}/").content.decode()
    assert LABEL not in page
    assert 'id="replay-in-full"' not in page
    # nothing provisional to replace: the button's address does nothing
    with capture(execute=False):
        client.post(f"/runs/{run.pk}/replay-in-full/")
    run.refresh_from_db()
    assert run.status == Run.Status.DONE


@pytest.mark.slow
@pytest.mark.parametrize("state", ["missing", "other version"])
def test_a_missing_or_foreign_state_means_a_whole_replay(
    client, auth_header, django_capture_on_commit_callbacks, replayed_requests, state
):
    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    name = lifecycle.live_state_name(run.pk)
    if state == "missing":
        blobs.delete(name)
    else:
        data = blobs.read_bytes(name) or b""
        blobs.write_bytes(
            name, data.replace(b"contextlab live replay ", b"contextlab live replay 0", 1)
        )
    _grow_to(client, auth_header, session_id, CUTS[-1], capture)
    replayed_requests.clear()
    _replays_whole(run, session_id)
    assert replayed_requests.count(("main", 0)) >= 2  # both passes from the first request


@pytest.mark.slow
def test_deleting_the_session_deletes_its_runs_live_states(
    client, auth_header, django_capture_on_commit_callbacks
):
    from contextlab.transcripts import services

    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    names = [lifecycle.live_state_name(run.pk), lifecycle.live_findings_name(run.pk)]
    assert all(blobs.read_bytes(name) is not None for name in names)
    with capture(execute=True):
        services.delete_transcript(transcript=Transcript.objects.get(pk=session_id))
    assert [blobs.read_bytes(name) for name in names] == [None, None]


@pytest.mark.slow
def test_a_live_runs_pages_read_the_tools_and_waste_its_worker_stored(
    client, auth_header, user, django_capture_on_commit_callbacks, monkeypatch
):
    """Each live version's result (the whole replay of the first growth, then the provisional
    one of each append) holds its tools breakdown and waste report as the worker worked them
    out; the report, the explorer and the tools CSV read them, never work them out per view."""
    from contextlab.jobs.replay import WASTE_KEY
    from contextlab.runs import services as run_services

    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    _grow_to(client, auth_header, session_id, CUTS[2], capture)
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.provisional
    data = RunResult.objects.get(run=run).read()
    transcript = Transcript.objects.get(pk=session_id)
    messages = run_services.session_messages(transcript)
    # what the worker stored is what the page would have worked out from this version
    stored_tools = data[engine.TOOL_BREAKDOWN_KEY]
    assert stored_tools["version"] == engine.BREAKDOWN_VERSION
    assert json.dumps(stored_tools, sort_keys=True) == json.dumps(
        engine.tool_breakdown(data, messages), sort_keys=True
    )
    assert data[WASTE_KEY]["engine_version"] == engine.ENGINE_VERSION
    assert json.dumps(data[WASTE_KEY], sort_keys=True) == json.dumps(
        runner.waste_report(data, messages), sort_keys=True
    )
    assert len(stored_tools["tools"]) > 0

    calls: list[str] = []
    for name in ("tool_breakdown", "waste_findings", "idle_compaction"):
        real = getattr(engine, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(engine, name, counted)
    client.force_login(user)
    for _ in range(2):  # a page view, and the next (a poll's refresh)
        page = client.get(f"/sessions/{session_id}/")
        assert page.status_code == 200
        assert LABEL in page.content.decode()
        assert client.get(f"/sessions/{session_id}/requests/1/?run={run.pk}").status_code == 200
        assert client.get(f"/runs/{run.pk}/tools.csv").status_code == 200
    assert calls == []


def test_an_update_stores_its_result_before_its_findings(
    client, auth_header, django_capture_on_commit_callbacks, monkeypatch
):
    """The explorer gets an appended turn as soon as its result is stored: the update's
    findings (read from every message's text) are stored after it. Until then the result
    carries the last version's; then this version's, and the run is marked finished again
    (the pages named by its result's version are made again)."""
    from contextlab.jobs.replay import WASTE_KEY

    capture = django_capture_on_commit_callbacks
    session_id, run = _live_session(client, auth_header, capture)
    before = RunResult.objects.get(run=run).read()
    _grow_to(client, auth_header, session_id, CUTS[2], capture)
    seen: list[tuple[int, dict[str, Any], Any]] = []
    real = lifecycle.store_findings

    def observed(run_id: int, finished_at: Any, found: dict[str, Any]) -> bool:
        stored = RunResult.objects.get(run_id=run_id).read()
        row = Run.objects.get(pk=run_id)
        assert row.status == Run.Status.DONE
        assert row.finished_at == finished_at
        seen.append((len(stored["requests"]), stored, found))
        return real(run_id, finished_at, found)

    monkeypatch.setattr(lifecycle, "store_findings", observed)
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.provisional
    ((count, stored, found),) = seen
    after = RunResult.objects.get(run=run).read()
    # the result was stored (done, the new requests) with the last version's findings
    assert count == len(after["requests"]) > len(before["requests"])
    for key in (engine.TOOL_BREAKDOWN_KEY, WASTE_KEY):
        assert stored[key] == before[key]
        assert after[key] == found[key]
    # and this version's differ from them: the new turn's tool calls are counted
    calls = sum(t["calls"] for t in after[engine.TOOL_BREAKDOWN_KEY]["tools"])
    assert calls > sum(t["calls"] for t in before[engine.TOOL_BREAKDOWN_KEY]["tools"])
    assert run.finished_at > Run.objects.get(pk=run.pk).started_at


def test_findings_of_a_result_no_longer_stored_are_not_stored(
    client, auth_header, django_capture_on_commit_callbacks
):
    """A newer version stored meanwhile (its finished_at moved on): the older version's
    findings, worked out late, must not land on it."""
    from contextlab.jobs.replay import WASTE_KEY

    _, run = _live_session(client, auth_header, django_capture_on_commit_callbacks)
    data = RunResult.objects.get(run=run).read()
    stale = run.finished_at - timedelta(seconds=1)
    assert not lifecycle.store_findings(run.pk, stale, {WASTE_KEY: {"waste": "stale"}})
    assert RunResult.objects.get(run=run).read() == data
    assert Run.objects.get(pk=run.pk).finished_at == run.finished_at
    # the result of finished_at takes them
    assert lifecycle.store_findings(run.pk, run.finished_at, {WASTE_KEY: {"waste": "late"}})
    assert RunResult.objects.get(run=run).read()[WASTE_KEY] == {"waste": "late"}
    assert Run.objects.get(pk=run.pk).finished_at > run.finished_at
