"""Golden checks that always run: on the small real transcripts committed with the code
(``tests/fixtures/``, ``contextlab/demo/``; sources and licences in their README files), so a
clone without the corpus still tests the engine on real sessions. The whole corpus is checked
by ``test_corpus.py`` when it is present."""

from __future__ import annotations

import hashlib
import statistics
from functools import cache
from pathlib import Path

import pytest

from contextlab import engine
from contextlab.engine.measures.tokens import percentile
from tests.conftest import DEMO, FIXTURES
from tests.engine.invariants import assert_replay_invariants, first_view_mismatch

#: Byte-exact copies of corpus files (name → first 16 hex digits of the sha256 in PROVENANCE.md).
COPIES = {
    FIXTURES / "Brads3290__cclogviewer__example.jsonl": "aed8904fbc1214cb",
    FIXTURES / "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl": (
        "bfc61a21cabfe2b9"
    ),
    FIXTURES / "entireio__cli__9f_d2fc39aa5f_0_full.jsonl": "992179efe12f2357",
    FIXTURES / "entireio__cli__c9_883595c929_0_full.jsonl": "5229e1849b206732",
    FIXTURES
    / "marot__spotter__8463c716-a2ea-4c14-9efa-87158ebd9f20_subagents_agent-a7be2f0.jsonl": (
        "3a0c9b1a58d91671"
    ),
    DEMO / "marot__spotter__short.jsonl": "237dc80e7f705386",
    DEMO / "marot__spotter__tool_heavy.jsonl": "036f9a476f513bb5",
}
#: Real sessions: the copies, and the first 30 lines of a corpus file (a persisted output).
FILES = [*COPIES, FIXTURES / "persisted_preview.jsonl"]

# Requests of the main thread: distinct message.ids of its assistant records with usage,
# counted from the files themselves (the same counts as on the corpus copies).
GOLDEN_REQUESTS = {
    "Brads3290__cclogviewer__example.jsonl": 6,
    "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl": 10,
    "entireio__cli__9f_d2fc39aa5f_0_full.jsonl": 66,
    "entireio__cli__c9_883595c929_0_full.jsonl": 2,
    "marot__spotter__8463c716-a2ea-4c14-9efa-87158ebd9f20_subagents_agent-a7be2f0.jsonl": 13,
    "marot__spotter__short.jsonl": 1,
    "marot__spotter__tool_heavy.jsonl": 4,
    "persisted_preview.jsonl": 6,
}


def short(path: Path) -> str:
    return path.name[:40]


@cache
def replayed(path: Path, mode: str) -> engine.ReplayResult:
    session = engine.load_session(str(path))
    config, preset = engine.resolve_config("auto", version=session.version)
    return engine.replay(session, config, mode=mode, preset_name=preset)


def test_the_fixtures_stay_small():
    sizes = {p.name: p.stat().st_size for p in FIXTURES.iterdir() if p.is_file()}
    assert sum(sizes.values()) < 1_000_000, sizes


@pytest.mark.parametrize("path", COPIES, ids=short)
def test_committed_copies_are_the_licensed_originals(path):
    assert hashlib.sha256(path.read_bytes()).hexdigest()[:16] == COPIES[path]
    readme = (path.parent / "README.md").read_text()
    assert f"`{path.name}`" in readme
    assert "MIT" in readme


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES, ids=short)
def test_every_fixture_replays_the_same_and_survives_storage(path):
    assert_replay_invariants(path, lambda mode: replayed(path, mode).to_json())


def test_every_fixture_has_its_golden_request_count():
    counts = {p.name: len(replayed(p, "recorded").to_json()["requests"]) for p in FILES}
    assert counts == GOLDEN_REQUESTS


def test_inline_sidechains_are_listed_apart():
    brads = replayed(FIXTURES / "Brads3290__cclogviewer__example.jsonl", "recorded").to_json()
    assert [(s["kind"], len(s["requests"])) for s in brads["subagents"]] == [("sidechain", 2)]
    viewer = replayed(
        FIXTURES / "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
        "recorded",
    ).to_json()
    assert [(s["kind"], len(s["requests"])) for s in viewer["subagents"]] == [
        ("sidechain", 3),
        ("sidechain", 7),
    ]


def test_fidelity_targets_over_the_fixtures():
    errors = sorted(e for p in FILES for e in engine.fidelity(replayed(p, "recorded"))["errors"])
    assert len(errors) >= 100
    assert statistics.median(errors) <= 0.02
    assert percentile(errors, 0.9) <= 0.05


def test_cache_estimate_over_the_fixtures():
    diffs: list[float] = []
    recorded = both = 0
    for path in FILES:
        acc = engine.cache_accuracy(replayed(path, "recorded"))
        diffs.extend(acc["diffs"])
        recorded += acc["counts"][0]
        both += acc["counts"][2]
    assert statistics.median(sorted(diffs)) <= 0.05
    # measured 8 of 10 recorded misses found (precision 8 of 11 predicted: too few requests
    # here for the corpus's 75 % floor to mean much; test_corpus.py holds it)
    assert both / recorded >= 0.75


def test_whatif_auto_reproduces_the_recorded_views():
    mismatched = {}
    for path in FILES:
        first = first_view_mismatch(replayed(path, "recorded"), replayed(path, "whatif"))
        if first is not None:
            mismatched[path.name] = first
    assert mismatched == {}


def test_the_persisted_output_shows_as_a_preview_with_its_original():
    session = engine.load_session(str(FIXTURES / "persisted_preview.jsonl"))
    messages = engine.messages_json(session)["main"]
    persisted = [m for m in messages for b in m["blocks"] if b.get("persisted")]
    assert len(persisted) == 1
    assert all(m.get("original_output") for m in persisted)
