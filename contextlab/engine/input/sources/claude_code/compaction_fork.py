"""Claude Code's compaction fork: the summarizer call of a compaction, written as a subagent.

``agent-acompact-*.jsonl`` holds the compaction's own request: the main conversation up to the
point it compacted, then the summarizer prompt and its reply. Its file copies only part of the
main chain, so the fork thread is rebuilt as the main chain up to the fork point plus its own
messages: what Claude Code sent, with the main conversation's system prompt, tools and cache.
"""

from __future__ import annotations

import re

from contextlab.engine.input.session import Thread

from .records import Record

#: the compaction fork's agent id, ``a`` + label + ``-`` + hex (Claude Code writes agent-acompact-…)
COMPACTION_FORK_ID = re.compile(r"acompact-[0-9a-f]+")


def fork_point_of(records: list[Record]) -> str | None:
    """The main-chain uuid a compaction fork's prompt hangs from: the parent of its first user
    record that is not a copied meta message, when that parent is not in the fork's own file."""
    own = {r.uuid for r in records}
    for rec in records:
        if rec.type == "user" and rec.message is not None and not rec.message.is_meta:
            return rec.parent if rec.parent and rec.parent not in own else None
    return None


def continue_main(
    fork: Thread, main: Thread, fork_point: str, main_parents: dict[str, str | None]
) -> None:
    """Make ``fork`` what Claude Code sent: the main chain up to ``fork_point``, then the fork's
    own prompt and reply. Its earlier records (meta messages copied from the main chain, off
    the prompt's path) are dropped. A fork point that is not a message (a turn-end system
    record, say) stands for the nearest message above it. Left as it is when none is found.
    """
    position = {u: i for i, m in enumerate(main.messages) for u in m.uuids}
    node: str | None = fork_point
    seen: set[str] = set()
    while node is not None and node not in position and node not in seen:
        seen.add(node)
        node = main_parents.get(node)
    at = position.get(node) if node is not None else None
    if at is None:
        return
    start = next(
        (i for i, m in enumerate(fork.messages) if m.role == "user" and not m.is_meta), None
    )
    if start is None:
        return
    own = fork.messages[start:]
    fork.messages = main.messages[: at + 1] + own
    for i, msg in enumerate(own, start=at + 1):
        msg.index = i
    fork.fork_index = at + 1
    fork.compaction_fork = True
