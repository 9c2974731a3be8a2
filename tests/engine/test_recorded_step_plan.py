"""A recorded replay runs on a request only the steps that can act on it (``recorded_triggers``):
a step whose triggers (message kinds) are not among the request's new messages is skipped. The
same replay with every step run on every request must give the same JSON, on both agents'
fixtures and on the corpus (whose sessions hold compactions, microcompactions, recorded budget
replacements and collapse commits)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.pipeline import DEFAULT_STEPS, Step, StepContext
from tests.conftest import FIXTURES, corpus_files, needs_corpus


class EveryRequest:
    """A step as it is, without ``recorded_triggers``: run on every request."""

    def __init__(self, step: Step) -> None:
        self.step = step
        self.name = step.name
        self.modeled = step.modeled

    def apply(self, ctx: StepContext) -> None:
        self.step.apply(ctx)


def _recorded(path: Path, steps: tuple[Step, ...]) -> dict[str, Any]:
    session = engine.load_session(str(path))
    try:
        config, preset = engine.resolve_session_config(session)
        return engine.replay(
            session, config, mode="recorded", preset_name=preset, steps=steps
        ).to_json()
    finally:
        session.close()


def check_plan(path: Path) -> None:
    unplanned = tuple(EveryRequest(step) for step in DEFAULT_STEPS)
    assert _recorded(path, DEFAULT_STEPS) == _recorded(path, unplanned)


FIXTURE_FILES = sorted(
    p for p in (*FIXTURES.glob("*.jsonl"), *(FIXTURES / "codex").rglob("*.jsonl"))
)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_plan_on_fixtures(path: Path) -> None:
    try:
        check_plan(path)
    except engine.TranscriptError:
        pytest.skip("not a loadable session (a hostile-input fixture)")


@needs_corpus
def test_plan_on_corpus() -> None:
    for path in corpus_files():
        check_plan(path)


def test_triggers_follow_the_session() -> None:
    """Recorded budget replacements and collapse commits may apply at any request: a session
    that holds them runs those steps on every request."""
    steps = {step.name: step for step in DEFAULT_STEPS}
    session = engine.load_session(str(FIXTURES / "codex" / "lineage" / "v0_98_fork_parent.jsonl"))
    try:
        assert steps["budget"].recorded_triggers(session) == frozenset()  # type: ignore[attr-defined]
        assert steps["collapse"].recorded_triggers(session) == frozenset()  # type: ignore[attr-defined]
        session.side.content_replacements = {"toolu_1": "replaced"}
        session.side.collapse_commits = [{"collapseId": "c1"}]
        assert steps["budget"].recorded_triggers(session) is None  # type: ignore[attr-defined]
        assert steps["collapse"].recorded_triggers(session) is None  # type: ignore[attr-defined]
    finally:
        session.close()
    assert not hasattr(steps["blocking"], "recorded_triggers")  # it labels every request
