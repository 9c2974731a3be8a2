"""Synthetic sessions for the waste findings and the compact-now-or-wait answer, written by
ContextLab's authors (no real transcript in them). ``tests/fixtures/waste/`` holds their JSONL
as written by ``python -m tests.waste_sessions`` (a test keeps the two equal), for the web and
browser tests that upload a file.

``wasteful()`` has one of each finding, each beside a near miss the rules must leave alone;
``tidy()`` has the near misses only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.engine.builders import TranscriptBuilder

FIXTURES = Path(__file__).parent / "fixtures" / "waste"
#: the tools the wasteful session's prompt snapshot defines; two are never called
DEFINED_TOOLS = ["Bash", "Edit", "Grep", "Read", "WebFetch", "mcp__tracker__search_issues"]
NEVER_CALLED = ["WebFetch", "mcp__tracker__search_issues"]


def _file(name: str, lines: int) -> str:
    return "".join(f"{n:>6}→def {name}_step_{n}(value): return value + {n}\n" for n in range(lines))


def _grep_output(stem: str, lines: int) -> str:
    return "".join(
        f"src/{stem}/module_{n}.py:{n}: {stem}_symbol_{n} = {stem}_factory_{n}()\n"
        for n in range(lines)
    )


def _usage(read: int, write: int) -> dict[str, Any]:
    return {
        "input_tokens": 3,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
        "output_tokens": 40,
        "cache_creation": {"ephemeral_5m_input_tokens": write, "ephemeral_1h_input_tokens": 0},
    }


def _snapshot(b: TranscriptBuilder) -> None:
    tools = [
        {"name": name, "description": f"The {name} tool. " * 40, "input_schema": {"type": "object"}}
        for name in DEFINED_TOOLS
    ]
    b.add(
        b.envelope(
            "attachment",
            b.last_uuid,
            attachment={
                "type": "prompt_snapshot",
                "systemPrompt": ["You are Claude Code."],
                "tools": tools,
            },
        )
    )


def _near_misses(b: TranscriptBuilder) -> None:
    """What no rule may list: a file read again after an edit, a part of a file read at another
    offset, a large result a later response uses, a small output later cleared."""
    b.prompt("Fix the parser.")
    b.tool_call("Read", {"file_path": "/work/project/parser.py"}, _file("parse", 40), grow=900)
    b.tool_call(
        "Edit",
        {"file_path": "/work/project/parser.py", "old_string": "a", "new_string": "b"},
        "The file /work/project/parser.py has been updated.",
        grow=100,
    )
    b.tool_call("Read", {"file_path": "/work/project/parser.py"}, _file("parse", 40), grow=900)
    b.tool_call(
        "Read",
        {"file_path": "/work/project/parser.py", "offset": 10, "limit": 20},
        _file("parse", 40),
        grow=900,
    )
    b.tool_call("Grep", {"pattern": "useful"}, _grep_output("useful", 60), grow=1500)
    b.assistant([{"type": "text", "text": "useful_symbol_7 is the one to change."}], grow=50)
    small = b.tool_call("Bash", {"command": "ls"}, "README.md\nsetup.py\n", grow=50)
    b.system(
        "microcompact_boundary",
        content="Context microcompacted",
        microcompactMetadata={
            "trigger": "auto",
            "preTokens": 30000,
            "tokensSaved": 20,
            "compactedToolIds": [small],
            "clearedAttachmentUUIDs": [],
        },
    )
    b.assistant([{"type": "text", "text": "The parser is fixed."}], grow=50)


def wasteful() -> TranscriptBuilder:
    b = TranscriptBuilder(version="2.1.300")
    _snapshot(b)
    _near_misses(b)
    # a file read twice, unchanged, while the first read was still in the context
    b.prompt("Now look at the report module.")
    b.tool_call("Read", {"file_path": "/work/project/report.py"}, _file("render", 60), grow=1400)
    b.assistant([{"type": "text", "text": "render_step_3 builds the header."}], grow=50)
    b.tool_call("Read", {"file_path": "/work/project/report.py"}, _file("render", 60), grow=1400)
    # a large search result nothing later refers to
    b.tool_call("Grep", {"pattern": "legacy"}, _grep_output("obsolete", 70), grow=1800)
    # an oversized command output, cleared by microcompact three requests later
    big = b.tool_call(
        "Bash", {"command": "pytest -v"}, "PASSED tests/test_case.py::check\n" * 700, grow=6000
    )
    for n in range(3):
        b.assistant([{"type": "text", "text": f"Checking step {n}."}], grow=50)
    b.system(
        "microcompact_boundary",
        content="Context microcompacted",
        microcompactMetadata={
            "trigger": "auto",
            "preTokens": 60000,
            "tokensSaved": 19000,
            "compactedToolIds": [big],
            "clearedAttachmentUUIDs": [],
        },
    )
    b.assistant([{"type": "text", "text": "Tests pass."}], grow=50)
    # pauses of 10 to 16 minutes: the 5-minute cache entry expired, the whole prompt written
    # again each time (enough of them that the 1-hour cache's premium pays)
    for n in range(4):
        b.prompt(f"One more thing ({n + 1}).", seconds=600 + 120 * n)
        b.assistant([{"type": "text", "text": "On it."}], usage=_usage(3000, b.usage_total - 3000))
    # a 2-hour pause: beyond what even the 1-hour cache keeps (compact now or wait)
    b.prompt("Back again.", seconds=7200)
    b.assistant(
        [{"type": "text", "text": "Welcome back."}], usage=_usage(3000, b.usage_total - 3000)
    )
    for n in range(4):
        b.assistant([{"type": "text", "text": f"Working {n}."}], grow=50)
    return b


def one_break() -> TranscriptBuilder:
    """The near misses, then one miss after a 10-minute pause and one after 2 hours (which the
    1-hour cache would not avoid but would write dearer): the premium outweighs the one miss."""
    b = TranscriptBuilder(version="2.1.300")
    _near_misses(b)
    for pause in (600, 7200):
        b.prompt("One more thing.", seconds=pause)
        b.assistant([{"type": "text", "text": "On it."}], usage=_usage(3000, b.usage_total - 3000))
    return b


def tidy() -> TranscriptBuilder:
    b = TranscriptBuilder(version="2.1.300")
    _near_misses(b)
    # a 3-minute pause with a cache hit: nothing expired
    b.prompt("Thanks.", seconds=180)
    b.assistant([{"type": "text", "text": "Done."}], grow=50)
    return b


def write_fixtures(folder: Path = FIXTURES) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [wasteful().write(folder / "wasteful.jsonl"), tidy().write(folder / "tidy.jsonl")]


if __name__ == "__main__":
    for path in write_fixtures():
        print(path)
