"""bench_pages' Codex session is the synthetic Claude Code session's twin: the pages compared
hold the same requests and the same recorded figures."""

from __future__ import annotations

from contextlab import engine
from tests.bench import load_bench_script

bench_pages = load_bench_script("bench_pages")


def test_the_codex_session_has_the_claude_code_sessions_requests_and_figures(tmp_path):
    claude, codex = tmp_path / "claude.jsonl", tmp_path / "rollout.jsonl"
    bench_pages.write_synthetic(claude, 300)
    bench_pages.write_synthetic_codex(codex, 300)
    sessions = [engine.load_session(str(path)) for path in (claude, codex)]
    assert [s.agent for s in sessions] == ["claude_code", "codex"]
    figures = [
        [
            (m.usage.prompt_total, m.usage.cache_read, m.usage.output)
            for m in s.main.messages
            if m.usage
        ]
        for s in sessions
    ]
    assert len(figures[0]) == 300
    assert figures[0] == figures[1]
    tools = [
        [b.tool_name for m in s.main.messages for b in m.blocks if b.type == "tool_use"]
        for s in sessions
    ]
    assert len(tools[0]) == len(tools[1]) == 300
    assert not sessions[1].problems
