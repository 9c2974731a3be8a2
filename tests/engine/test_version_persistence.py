"""Large tool results by Claude Code version: ``auto`` persists them only where the version did.

Read from the published packages (docs/claude-code-versions.md): no per-tool persistence in
1.0.x and 2.0.x (2.0.64 – 2.0.x only a flag-gated 400,000-character threshold), per-tool
``maxResultSizeChars`` from 2.1.x (seen in 2.1.7 transcripts), clamped at 50,000 by 2.1.88.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contextlab import engine
from tests.engine.builders import TranscriptBuilder


def persisted(tmp_path: Path, version: str, size: int) -> list[str]:
    b = TranscriptBuilder(version=version)
    b.prompt("run it")
    b.tool_call("Bash", {"command": "make"}, "y" * size)
    b.assistant([{"type": "text", "text": "done"}])
    session = engine.load_session(str(b.write(tmp_path / f"{version}-{size}.jsonl")))
    config, preset = engine.resolve_config("auto", version=session.version)
    result = engine.replay(session, config, mode="whatif", preset_name=preset).to_json()
    return [
        e["tool"] for r in result["requests"] for e in r["events"] if e["step"] == "persistence"
    ]


@pytest.mark.parametrize("version", ["1.0.98", "2.0.0", "2.0.64", "2.0.77"])
def test_an_older_version_keeps_a_large_bash_output_in_full(tmp_path, version):
    assert engine.resolve_config("auto", version=version)[1] == "claude-code-2.0"
    assert persisted(tmp_path, version, 60_000) == []
    # the flag-gated global threshold of 2.0.64 – 2.0.x is the limit it keeps
    assert persisted(tmp_path, version, 400_001) == ["Bash"]


@pytest.mark.parametrize("version", ["2.1.7", "2.1.39", "2.1.88"])
def test_a_2_1_version_persists_it(tmp_path, version):
    assert persisted(tmp_path, version, 60_000) == ["Bash"]
