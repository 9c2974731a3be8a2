"""Golden checks on the whole transcript corpus, written by other people: ``$CONTEXTLAB_CORPUS``
(default ``../shared/corpus``), its ``recent/`` subfolder included. Skipped, with the reason
printed, when the corpus is absent; ``test_fixtures_golden.py`` runs the same kinds of checks on
the small transcripts committed under ``tests/fixtures/`` and ``contextlab/demo/`` every time.

Accuracy targets that the engine does not yet meet on ``recent/`` are asserted on the older
files, and again on the whole corpus in a ``*_with_recent`` test marked ``xfail(strict=True)``
whose reason gives the measured figures: it turns into a failure the day the target is met, so
the recent files can join the main test.
"""

from __future__ import annotations

import json
import statistics
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.measures.tokens import percentile
from tests.conftest import CORPUS, corpus_files, needs_corpus
from tests.engine.invariants import assert_replay_invariants, auto_config, first_view_mismatch

pytestmark = [needs_corpus, pytest.mark.slow]

#: Every corpus file, ``recent/`` included (rglob): invariants run on all of them.
FILES = corpus_files()
#: The files added on 2026-12-01 (recent Claude Code versions, see PROVENANCE.md).
RECENT = [p for p in FILES if p.relative_to(CORPUS).parts[0] == "recent"]
#: The files the accuracy targets were first set on (the corpus's top folder).
OLDER = [p for p in FILES if p.parent == CORPUS]
#: The four 2.1.42–2.1.227 sessions added 2026-12-06 (``recent2/``).
RECENT2 = [p for p in FILES if p.relative_to(CORPUS).parts[0] == "recent2"]
WITH_RECENT = OLDER + RECENT


def short(path: Path) -> str:
    name = path.relative_to(CORPUS).as_posix()
    return name[:48] if name.startswith("recent") else name[:40]


def test_corpus_is_present():
    assert len(OLDER) >= 18, f"expected the corpus's top folder at {CORPUS}"
    assert len(RECENT) >= 7, f"expected the corpus's recent/ folder at {CORPUS / 'recent'}"
    assert len(RECENT2) >= 4, f"expected the corpus's recent2/ folder at {CORPUS / 'recent2'}"


@cache
def replayed(path: Path, mode: str) -> engine.ReplayResult:
    session = engine.load_session(str(path))
    config, preset = auto_config(session)
    return engine.replay(session, config, mode=mode, preset_name=preset)


@pytest.mark.parametrize("path", FILES, ids=short)
def test_every_corpus_file_loads_without_errors(path):
    session = engine.load_session(str(path))
    assert not [p for p in session.problems if p.severity == "error"]
    assert session.main.messages


@pytest.mark.parametrize("path", FILES, ids=short)
def test_every_corpus_file_replays_the_same_and_survives_storage(path):
    assert_replay_invariants(path, lambda mode: replayed(path, mode).to_json())


# Requests per thread kind, fixed from the files themselves (distinct message.ids, not synthetic).
GOLDEN_REQUESTS = {
    "entireio__cli__25_730c662552_0_full.jsonl": 169,
    "entireio__cli__9b_04c3d92e38_3_full.jsonl": 138,
    "entireio__cli__a7_e6172c3842_0_full.jsonl": 167,
    "entireio__cli__fc_99c919b212_0_full.jsonl": 134,
    "marot__spotter__8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl": 143,
    "marot__spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl": 217,
    "marot__spotter__short.jsonl": 1,
    # recent/: distinct message.ids of the main thread's assistant records with usage
    "recent/FSM1__cipher-box__af_1dd25ebb3e_8_full.jsonl": 224,
    "recent/PackmindHub__context-evaluator__ee_7e610ffc3f_0_full.jsonl": 120,
    "recent/ebridges__wakil__01M039H7ZNMZ1B9XCQH5HCX18V_0_full.jsonl": 229,
    "recent/ebridges__wakil__7a1eb77e5302_0_full.jsonl": 201,
    "recent/entireio__git-sync__74_fd06e0aef8_0_full.jsonl": 99,
    "recent/gmeligio__flutter-docker-image__01KZH768K678RAGNB3HG3CFDS2_1_full.jsonl": 355,
    "recent/teslamint__entirecontext__01M0EE5721NRN8FGE1238MD50T_0_full.jsonl": 147,
}


@pytest.mark.parametrize("name", sorted(GOLDEN_REQUESTS))
def test_request_counts(name):
    result = replayed(CORPUS / name, "recorded").to_json()
    assert len(result["requests"]) == GOLDEN_REQUESTS[name]


def test_inline_sidechains_are_listed_apart():
    result = replayed(
        CORPUS / "d-kimuson__claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
        "recorded",
    ).to_json()
    assert [s["kind"] for s in result["subagents"]] == ["sidechain"] * 5
    assert len(result["requests"]) == 9


def check_fidelity_targets(files: list[Path]) -> None:
    errors: list[float] = []
    for path in files:
        errors.extend(engine.fidelity(replayed(path, "recorded"))["errors"])
    errors.sort()
    assert len(errors) > 1200
    assert statistics.median(errors) <= 0.02
    assert percentile(errors, 0.9) <= 0.05


def test_fidelity_targets_over_the_whole_corpus():
    check_fidelity_targets(OLDER)


def test_fidelity_targets_over_the_whole_corpus_with_recent():
    check_fidelity_targets(FILES)  # recent/ and recent2/


def test_issue_20_token_targets_over_the_whole_corpus():
    """Issue #20's token targets, recent2/ (2.1.42–2.1.227) included: pooled median ≤ 1 %,
    p90 ≤ 4 %, no session's p90 above 10 % (before the resume hook was read as a restart:
    0.92 %, 4.25 % and 11.70 % on recent2/repiq__9f)."""
    errors: list[float] = []
    for path in FILES:
        fid = engine.fidelity(replayed(path, "recorded"))
        errors.extend(fid["errors"])
        if fid["errors"]:
            assert percentile(sorted(fid["errors"]), 0.9) <= 0.10, path.name
    errors.sort()
    assert statistics.median(errors) <= 0.01
    assert percentile(errors, 0.9) <= 0.04


def _recorded_main_requests(path: Path) -> set[str]:
    """Distinct message.ids of the file's main-chain assistant records with usage."""
    ids: set[str] = set()
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            message = record.get("message")
            if (
                record.get("type") == "assistant"
                and not record.get("isSidechain")
                and isinstance(message, dict)
                and message.get("usage")
                and message.get("model") != "<synthetic>"
            ):
                ids.add(message["id"])
    return ids


@pytest.mark.parametrize("path", FILES, ids=short)
def test_every_recorded_main_chain_request_is_replayed(path):
    """Every recorded main-chain request is replayed (issue #20 asks for 99 % of each
    session's); a rewind's branch counted its fork point in records and left 2 of 217 out
    (repiq__9f)."""
    recorded = _recorded_main_requests(path)
    result = replayed(path, "recorded").to_json()
    rows = [*result["requests"], *(r for s in result["subagents"] for r in s["requests"])]
    replayed_ids = {r["message_id"] for r in rows}
    assert not recorded - replayed_ids


def miss_counts(files: list[Path]) -> tuple[list[float], int, int, int]:
    """The cache model's read differences, and recorded, predicted and matched misses."""
    diffs: list[float] = []
    counts = [0, 0, 0]
    for path in files:
        acc = engine.cache_accuracy(replayed(path, "recorded"))
        diffs.extend(acc["diffs"])
        counts = [a + b for a, b in zip(counts, acc["counts"], strict=True)]
    recorded, predicted, both = counts
    return diffs, recorded, predicted, both


def check_cache_estimate_targets(files: list[Path]) -> None:
    diffs, recorded, predicted, both = miss_counts(files)
    assert statistics.median(sorted(diffs)) <= 0.05
    # Target is 80 % / 80 %; measured 77.5 % / 77.5 % (the rest are server-side misses at short
    # gaps and sessions whose first request found the system prompt warm). This floor guards
    # against regressions; raise it when the model improves.
    assert both / recorded >= 0.75
    assert both / predicted >= 0.75


def test_cache_estimate_targets_over_the_whole_corpus():
    check_cache_estimate_targets(OLDER)


def test_cache_estimate_targets_over_the_whole_corpus_with_recent():
    check_cache_estimate_targets(WITH_RECENT)


# With recent2/ (2.1.42–2.1.227) the floor holds since the token-kind counts: recall 75.6 %
# (62 of 82), precision 93.9 % (issue #20's target is 85 %: bench/truth.py reports it). Of the
# 20 misses the model does not find (bench/miss_audit.py lists them), 18 are server-side drops
# 4–507 s after a request that read everything, within the recorded TTL, with no model switch,
# compaction, restart or date change before them: 17 fall to a system-prompt level the same
# thread reads elsewhere, one to nothing. Of the other two, one (493 s after its branch's
# previous request) falls to a level the branch reads nowhere else, one reads nothing right
# after a compaction where the session's three other compactions read 29,760 tokens back.
def test_cache_estimate_targets_over_the_whole_corpus_with_recent2():
    check_cache_estimate_targets(FILES)


@pytest.mark.xfail(
    strict=True,
    reason="cache-miss recall 75.6 % (62 of 82 recorded misses), precision 93.9 %, target 85 % "
    "each (issue #20): 18 of the 20 misses not found are server-side drops nothing in the file "
    "announces (bench/miss_audit.py lists them)",
)
def test_cache_miss_recall_and_precision_reach_85_percent():
    _, recorded, predicted, both = miss_counts(FILES)
    assert both / recorded >= 0.85
    assert both / predicted >= 0.85


def compaction_rows(files: list[Path]) -> list[dict[str, Any]]:
    rows = []
    for path in files:
        recorded = replayed(path, "recorded")
        if not any(
            e["step"] == "autocompact" for r in recorded.to_json()["requests"] for e in r["events"]
        ):
            continue
        rows.extend(engine.compaction_accuracy(recorded, replayed(path, "whatif"))["rows"])
    return rows


def test_every_recorded_auto_compaction_is_predicted_in_whatif_auto():
    rows = compaction_rows(OLDER)
    assert len(rows) == 6
    for row in rows:
        assert row["predicted"], row
        assert row["rel_error"] <= 0.03, row


def test_every_recorded_auto_compaction_is_predicted_in_whatif_auto_with_recent():
    rows = compaction_rows(FILES)
    # 6 above, recent/: gmeligio 4, FSM1 2, PackmindHub 1; recent2/: repiq 1 + 1
    assert len(rows) == 15
    for row in rows:
        assert row["predicted"], row
        assert row["rel_error"] <= 0.03, row


def test_recorded_persisted_outputs_show_as_previews_with_originals():
    path = CORPUS / "entireio__cli__a7_e6172c3842_0_full.jsonl"
    session = engine.load_session(str(path))
    messages = engine.messages_json(session)["main"]
    persisted = [m for m in messages for b in m["blocks"] if b.get("persisted")]
    assert len(persisted) == 7
    assert all(m.get("original_output") for m in persisted)


def test_whatif_restores_persisted_originals_when_thresholds_allow(tmp_path):
    path = CORPUS / "entireio__cli__a7_e6172c3842_0_full.jsonl"
    session = engine.load_session(str(path))
    generous = engine.get_preset("claude-code-2.1.20").replace(
        per_tool_threshold_overrides={"Bash": 10_000_000, "Grep": 10_000_000}
    )
    base = engine.replay(session, engine.get_preset("claude-code-2.1.20"), mode="whatif").to_json()
    wide = engine.replay(session, generous, mode="whatif").to_json()

    def steps(result: dict[str, Any], step: str) -> list[int]:
        return [r["index"] for r in result["requests"] for e in r["events"] if e["step"] == step]

    # Bash and Grep results stay whole: nothing is persisted, and from the first request where
    # the default thresholds persisted one, the model sees more (the peak is no measure: both
    # runs climb to the same autocompact threshold, the wider one sooner)
    first_persisted = steps(base, "persistence")[0]
    assert steps(wide, "persistence") == []
    before = [r["model_tokens"] for r in base["requests"][:first_persisted]]
    assert [r["model_tokens"] for r in wide["requests"][:first_persisted]] == before
    restored = wide["requests"][first_persisted]["model_tokens"]
    assert restored > base["requests"][first_persisted]["model_tokens"] + 10_000
    assert steps(wide, "autocompact")[0] < steps(base, "autocompact")[0]


def first_view_mismatches(files: list[Path]) -> dict[str, int]:
    """File → first request whose what-if view differs in size from the recorded one."""
    mismatched = {}
    for path in files:
        first = first_view_mismatch(replayed(path, "recorded"), replayed(path, "whatif"))
        if first is not None:
            mismatched[path.relative_to(CORPUS).as_posix()] = first
    return mismatched


def test_whatif_auto_reproduces_the_recorded_views():
    """With the version's own thresholds, what-if must rebuild the recorded view request by
    request, also where a compaction ran while a tool call had no recorded result
    (fc_99c919b212: the result was never written, so only Claude Code's own count there,
    ``preTokens``, reaches the threshold)."""
    assert first_view_mismatches(OLDER) == {}


def test_whatif_auto_reproduces_the_recorded_views_with_recent():
    assert first_view_mismatches(FILES) == {}
