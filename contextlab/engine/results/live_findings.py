"""A live session's findings gone on from its last version's (``live_findings``): the rows of
its messages (``explorer.messages_json`` without texts), and the tools breakdown's tallies
(``tools.tool_breakdown_on``), over the messages and requests its append added, where each
version worked them out over the whole session (about 0.08 s of a 64 MB session's update,
growing with it). The waste scan goes on likewise (``waste_scan.scan_main_thread``); the
waste rules that read no text are still worked out whole (about 0.015 s at 64 MB).

What is kept is of the main thread's first messages that a longer version still has as they
are (``waste_scan._stable``: those before its last response), checked as the waste scan's
state is (each message's record count, the last one's uuid); the findings are the whole
ones, at every version (tests at many cuts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contextlab.engine.input.session import Session
from contextlab.engine.measures.tokens import TiktokenCounter

from .explorer import _message_rows, _stored_threads, expand_messages, messages_json
from .tools import KeptTools, ToolBreakdown, tool_breakdown, tool_breakdown_on
from .waste_scan import _stable


@dataclass
class KeptFindings:
    """What ``live_findings`` keeps of a version for the next: the main thread's first
    ``len(sizes)`` messages' rows, with their record counts and the last one's uuid, and the
    tools breakdown's tallies (``tools.KeptTools``). Used up by the next call (changed)."""

    thread: str
    sizes: list[int]
    last_uuid: str | None
    rows: list[dict[str, Any]]
    tools: KeptTools | None


@dataclass
class LiveFindings:
    """A version's rows of every thread's messages (expanded, without texts: what the waste
    rules read beside the main thread's scan), its tools breakdown, and what the next version
    goes on from (None: nothing to keep)."""

    messages: dict[str, list[dict[str, Any]]]
    tool_breakdown: ToolBreakdown
    kept: KeptFindings | None
    #: whether the rows and the breakdown went on from the last version's
    went_on: bool = False


def live_findings(
    data: Mapping[str, Any], session: Session, kept: KeptFindings | None = None
) -> LiveFindings:
    """The messages' rows and tools breakdown of ``session``'s replay ``data`` (a recorded
    one), gone on from ``kept`` (the last version's) when it fits: equal to
    ``expand_messages(messages_json(session, include_originals=False, include_texts=False))``
    and ``tool_breakdown(data, messages)``. A session whose threads share messages (a branch,
    a fork), or a what-if replay, is worked out whole and keeps nothing."""
    counter = TiktokenCounter()
    threads, shared = _stored_threads(session)
    whatif = (data.get("session") or {}).get("mode") == "whatif"
    if shared or whatif or not threads:
        whole = expand_messages(
            messages_json(session, include_originals=whatif, include_texts=False)
        )
        return LiveFindings(whole, tool_breakdown(data, whole, counter=counter), None)
    main = session.threads[0]
    stable = _stable(main.messages)
    rows: list[dict[str, Any]] = []
    if kept is not None and _fits(kept, main.id, main.messages, stable):
        rows = kept.rows
    else:
        kept = None
    rows.extend(_message_rows(main, len(rows), counter, False, False))
    messages: dict[str, list[dict[str, Any]]] = {}
    for thread, _ in threads:
        messages[thread.id] = (
            rows if thread is main else list(_message_rows(thread, 0, counter, False, False))
        )
    breakdown, tools, went_on = tool_breakdown_on(
        data, messages, stable, kept.tools if kept is not None else None, counter=counter
    )
    return LiveFindings(
        messages,
        breakdown,
        KeptFindings(
            thread=main.id,
            sizes=[len(message.uuids) for message in main.messages[:stable]],
            last_uuid=main.messages[stable - 1].uuid if stable else None,
            rows=rows[:stable],
            tools=tools,
        ),
        went_on=kept is not None and went_on,
    )


def _fits(kept: KeptFindings, thread: str, messages: list[Any], stable: int) -> bool:
    """Whether the thread still starts with the messages ``kept`` has rows of, as they were
    (no record merged into one since), and they are among this version's stable ones."""
    count = len(kept.sizes)
    if kept.thread != thread or count > stable or len(kept.rows) != count:
        return False
    if count and messages[count - 1].uuid != kept.last_uuid:
        return False
    return all(len(messages[mi].uuids) == size for mi, size in enumerate(kept.sizes))
