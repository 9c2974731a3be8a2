"""A live session's waste scan (``engine.scan_main_thread``) goes on from its last version's
kept state over the appended messages only, and gives the findings a whole scan gives, at every
version of a session grown by appends (real sessions and a synthetic one, cut at line ends,
a cut inside a response too); a state that does not fit is not gone on from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.results import waste_scan
from tests.conftest import DEMO, FIXTURES, ROOT, corpus_files, needs_corpus

TOOL_HEAVY = DEMO / "marot__spotter__tool_heavy.jsonl"
ENTIREIO = FIXTURES / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl"
VIEWER = FIXTURES / "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


def _load(tmp_path: Path, data: bytes) -> engine.Session:
    path = tmp_path / "v.jsonl"
    path.write_bytes(data)
    return engine.load_session(str(path), name="session.jsonl")


def _scanned(scan: engine.WasteScan) -> dict[str, Any]:
    """What a scan found (not how it keeps it)."""
    return {
        "count": scan.count,
        "rereads": scan.rereads,
        "unused": sorted(scan.unused.items()),
        "words": sorted(scan.words_of.items()),
        "responses": scan.responses,
        "seen": sorted(scan.seen),
        "last_read": sorted((repr(k), v) for k, v in scan.last_read.items()),
    }


def _replayed(session: engine.Session, live: list[bytes] | None = None) -> dict[str, Any]:
    """The recorded replay of ``session``; with ``live`` (the last version's state, if any,
    replaced by this one's), gone on from the last version's state as a live session's
    update goes (``engine.continue_live``), else made whole."""
    config = engine.PipelineConfig.from_dict({})
    if live is None:
        result = engine.replay(session, config, mode="recorded")
    else:
        try:
            result, state = engine.continue_live(live[0], session) if live else (None, b"")
        except ValueError:
            result = None
        if result is None:
            result, state = engine.replay_live(session, config, mode="recorded")
        live[:] = [state]
    return json.loads(json.dumps(result.to_json()))


def _findings(
    session: engine.Session, scan: engine.WasteScan | None, data: dict | None = None
) -> str:
    data = data if data is not None else _replayed(session)
    messages = engine.expand_messages(
        engine.messages_json(session, include_texts=False, texts_on_read=True)
    )
    report = engine.waste_findings(engine.as_result(data), messages, scan=scan)
    return json.dumps(report, sort_keys=True)


def _check_live_findings(
    session: engine.Session, data: dict[str, Any], kept: engine.KeptFindings | None
) -> engine.LiveFindings:
    """The live findings gone on from ``kept`` are the whole ones: the messages' rows as
    ``messages_json`` writes them without texts, the tools breakdown to the byte."""
    live = engine.live_findings(data, session, kept)
    whole_rows = engine.expand_messages(
        engine.messages_json(session, include_originals=False, include_texts=False)
    )
    assert live.messages == whole_rows
    whole = engine.tool_breakdown(data, whole_rows)
    assert json.dumps(live.tool_breakdown) == json.dumps(whole)
    return live


def _grow(
    tmp_path: Path,
    data: bytes,
    cuts: list[int],
    *,
    findings_every: int = 1,
    tools_went_on: list[bool] | None = None,
) -> int:
    """Scan each version of ``data`` cut at ``cuts`` (then whole) going on from the last
    one's state; each scan is the whole scan of its version, and (every ``findings_every``
    versions, and the last) so are the findings. The live findings (messages' rows and
    tools breakdown) go on from the last version's too, and are the whole ones at each; the
    replay goes on from the last version's state as a live update's does (a whole replay
    fits its calibration again: the breakdown is then worked out whole). Returns how many
    scans went on from a state; ``tools_went_on`` hears, per version, whether the live
    findings did."""
    kept: bytes | None = None
    held: engine.HeldScan | None = None
    kept_findings: engine.KeptFindings | None = None
    live_state: list[bytes] = []
    went_on = 0
    versions = [*cuts, len(data)]
    for n, cut in enumerate(versions):
        version = _load(tmp_path, data[:cut])
        main = version.threads[0]
        scan_goes_on = (
            kept is not None
            and waste_scan._go_on(kept, main.id, main.messages, waste_scan._stable(main.messages))
            is not None
        )
        scan, state = engine.scan_main_thread(version, kept)
        whole, _ = engine.scan_main_thread(version)
        assert _scanned(scan) == _scanned(whole), f"version cut at byte {cut}"
        # the same gone on from the state held as objects (the worker that made it)
        on_held = engine.scan_main_thread_on(version, None, held)
        assert _scanned(on_held.scan) == _scanned(whole)
        assert on_held.went_on == scan_goes_on
        assert on_held.state == state
        held = on_held.held
        if scan_goes_on:
            went_on += 1
        replayed = _replayed(version, live_state)
        live = _check_live_findings(version, replayed, kept_findings)
        if tools_went_on is not None:
            tools_went_on.append(live.went_on)
        kept_findings = live.kept
        if n % findings_every == 0 or n == len(versions) - 1:
            assert _findings(version, scan, replayed) == _findings(version, None, replayed)
        # the state leaves the last response out (an append may complete it), and it went
        # through bytes, as a worker on another host reads it
        kept_scan = waste_scan._go_on(state, main.id, main.messages, len(main.messages))
        assert kept_scan is not None
        assert kept_scan.count == waste_scan._stable(main.messages)
        kept = state
        version.close()
    return went_on


def _line_ends(data: bytes) -> list[int]:
    return [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]


@pytest.mark.parametrize("source", [TOOL_HEAVY, ENTIREIO, VIEWER], ids=["tool", "entire", "viewer"])
def test_a_scan_gone_on_from_the_last_version_is_the_whole_scan(tmp_path, source):
    data = source.read_bytes()
    ends = _line_ends(data)
    cuts = ends[len(ends) // 3 :: max(1, len(ends) // 10)][:8]
    tools: list[bool] = []
    assert _grow(tmp_path, data, cuts, tools_went_on=tools) >= len(cuts) - 1
    # the live findings went on but where a replay was made whole (the first, a refit)
    assert sum(tools) >= len(cuts) - 2


def test_the_findings_of_a_scan_gone_on_are_the_whole_findings_when_there_are_some(tmp_path):
    """A session whose whole findings hold unused results and rereads (built so): cut one line
    at a time at its end, where later responses kill earlier results' findings."""
    data = TOOL_HEAVY.read_bytes()
    session = _load(tmp_path, data)
    whole, _ = engine.scan_main_thread(session)
    session.close()
    assert whole.unused, "the session is meant to hold a result no response refers to"
    ends = _line_ends(data)
    tools: list[bool] = []
    assert _grow(tmp_path, data, ends[-12:-1], tools_went_on=tools) >= 9
    assert sum(tools) == len(tools) - 1  # all but the first (no earlier version)


@pytest.mark.slow
@needs_corpus
def test_corpus_sessions_scanned_on_at_cut_points_give_the_whole_findings(tmp_path):
    checked = 0
    for path in corpus_files():
        data = path.read_bytes()
        if len(data) < 200_000:
            continue
        ends = _line_ends(data)
        cuts = ends[len(ends) // 2 :: max(1, len(ends) // 6)][:4]
        _grow(tmp_path, data, cuts)
        checked += 1
        if checked == 4:
            break
    assert checked


@pytest.mark.slow
def test_a_synthetic_session_scanned_on_gives_the_whole_findings(tmp_path):
    path = tmp_path / "synth.jsonl"
    subprocess.run(
        [sys.executable, str(ROOT / "bench/gen_synthetic.py"), "--size-mb", "2", "-o", str(path)],
        check=True,
        capture_output=True,
    )
    data = path.read_bytes()
    ends = _line_ends(data)
    cuts = ends[len(ends) // 2 :: max(1, len(ends) // 8)][:5]
    tools: list[bool] = []
    assert _grow(tmp_path, data, cuts, tools_went_on=tools) >= len(cuts) - 1
    assert sum(tools) == len(tools) - 1


def test_live_findings_of_another_session_or_a_merged_message_are_worked_out_whole(tmp_path):
    """Kept findings of another session, or of messages one of which a record was merged
    into since, or with rows the replay's result changed (a whole replay's refit) are not
    gone on from; what is worked out is the whole breakdown all the same."""
    data = TOOL_HEAVY.read_bytes()
    ends = _line_ends(data)
    live_state: list[bytes] = []
    earlier = _load(tmp_path, data[: ends[len(ends) // 2]])
    kept = _check_live_findings(earlier, _replayed(earlier, live_state), None).kept
    assert kept is not None
    assert kept.tools is not None
    earlier.close()
    other = _load(tmp_path, ENTIREIO.read_bytes())
    assert not _check_live_findings(other, _replayed(other), kept).went_on
    other.close()
    grown = _load(tmp_path, data)
    replayed = _replayed(grown, live_state)
    main = grown.threads[0]
    main.messages[len(kept.sizes) - 1].uuids.append("merged")
    assert not _check_live_findings(grown, replayed, kept).went_on
    main.messages[len(kept.sizes) - 1].uuids.pop()
    # an earlier request's row changed: the rows are gone on from, the tallies are not
    changed = json.loads(json.dumps(replayed))
    changed["requests"][0]["cost_usd"] += 1.0
    again = _check_live_findings(grown, changed, kept)
    assert not again.went_on
    assert again.kept is not None
    assert again.kept.rows[0] is kept.rows[0]


def test_a_state_of_another_session_or_version_is_not_gone_on_from(tmp_path):
    data = TOOL_HEAVY.read_bytes()
    ends = _line_ends(data)
    earlier = _load(tmp_path, data[: ends[len(ends) // 2]])
    _, state = engine.scan_main_thread(earlier)
    earlier.close()
    other = _load(tmp_path, ENTIREIO.read_bytes())
    main = other.threads[0]
    assert waste_scan._go_on(state, main.id, main.messages, len(main.messages)) is None
    assert waste_scan._go_on(b"not a state", main.id, main.messages, len(main.messages)) is None
    # the same session with the messages the state covers changed: its last one renamed
    grown = _load(tmp_path, data)
    main = grown.threads[0]
    assert waste_scan._go_on(state, main.id, main.messages, len(main.messages)) is not None
    kept = waste_scan._go_on(state, main.id, main.messages, len(main.messages))
    assert kept is not None
    # a record merged into a message the state covers (a response's, by its id)
    main.messages[kept.count - 1].uuids.append("merged")
    assert waste_scan._go_on(state, main.id, main.messages, len(main.messages)) is None
    main.messages[kept.count - 1].uuids.pop()
    main.messages[kept.count - 1].uuid = "changed"
    assert waste_scan._go_on(state, main.id, main.messages, len(main.messages)) is None
    scan, _ = engine.scan_main_thread(grown, state)
    whole, _ = engine.scan_main_thread(grown)
    assert _scanned(scan) == _scanned(whole)
