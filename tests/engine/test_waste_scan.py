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


def _findings(session: engine.Session, scan: engine.WasteScan | None) -> str:
    result = engine.replay(session, engine.PipelineConfig.from_dict({}), mode="recorded")
    messages = engine.expand_messages(
        engine.messages_json(session, include_texts=False, texts_on_read=True)
    )
    report = engine.waste_findings(engine.as_result(result.to_json()), messages, scan=scan)
    return json.dumps(report, sort_keys=True)


def _grow(tmp_path: Path, data: bytes, cuts: list[int], *, findings_every: int = 1) -> int:
    """Scan each version of ``data`` cut at ``cuts`` (then whole) going on from the last
    one's state; each scan is the whole scan of its version, and (every ``findings_every``
    versions, and the last) so are the findings. Returns how many went on from a state."""
    kept: bytes | None = None
    went_on = 0
    versions = [*cuts, len(data)]
    for n, cut in enumerate(versions):
        version = _load(tmp_path, data[:cut])
        main = version.threads[0]
        if (
            kept is not None
            and waste_scan._go_on(kept, main.id, main.messages, waste_scan._stable(main.messages))
            is not None
        ):
            went_on += 1
        scan, state = engine.scan_main_thread(version, kept)
        whole, _ = engine.scan_main_thread(version)
        assert _scanned(scan) == _scanned(whole), f"version cut at byte {cut}"
        if n % findings_every == 0 or n == len(versions) - 1:
            assert _findings(version, scan) == _findings(version, None)
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
    assert _grow(tmp_path, data, cuts) >= len(cuts) - 1


def test_the_findings_of_a_scan_gone_on_are_the_whole_findings_when_there_are_some(tmp_path):
    """A session whose whole findings hold unused results and rereads (built so): cut one line
    at a time at its end, where later responses kill earlier results' findings."""
    data = TOOL_HEAVY.read_bytes()
    session = _load(tmp_path, data)
    whole, _ = engine.scan_main_thread(session)
    session.close()
    assert whole.unused, "the session is meant to hold a result no response refers to"
    ends = _line_ends(data)
    assert _grow(tmp_path, data, ends[-12:-1]) >= 9


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
    assert _grow(tmp_path, data, cuts) >= len(cuts) - 1


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
