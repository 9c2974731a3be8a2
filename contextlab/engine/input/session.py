"""The engine's session model: threads of messages, their requests, and the side records.

What every source adapter builds (``input.sources``), whatever agent wrote the transcript: a
``Session`` of ``Thread`` chains (the main conversation first, then branches, subagents and
sidechains) of ``model.Message``, with the problems the reader found and the records outside
the chain that the pipeline replays. A request is one distinct assistant response
(``Message.message_id``) of a thread: ``thread_requests``.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from .kept_cache import KeptCache, Prefix, leads, lineage_of, prefix_of, reading_bytes
from .loading import Upload
from .model import Message, Problem


@dataclass
class SideRecords:
    """Records outside the chain that the pipeline replays."""

    content_replacements: dict[str, str] = field(default_factory=dict)
    collapse_commits: list[dict[str, Any]] = field(default_factory=list)
    collapse_snapshot: dict[str, Any] | None = None
    #: (record type, text) of each ``custom-title``, ``ai-title`` and ``summary`` record
    titles: list[tuple[str, str]] = field(default_factory=list)
    #: Claude Code's own session cost, from the newest ``cost-state`` record (2.1.1xx+)
    claude_code_cost_usd: float | None = None
    #: the agent's own cumulative usage at the end of the session, where it records one
    #: (Codex: the final ``total_token_usage``): the session's totals, exactly as recorded
    recorded_totals: dict[str, int] | None = None
    #: what those totals carried over from another session (a forked or subagent Codex
    #: rollout's parent), left out of ``recorded_totals``
    recorded_carried: dict[str, int] | None = None


@dataclass
class Thread:
    """One chain of messages that made requests: the main session, a branch or a subagent."""

    id: str
    kind: str  # "main" | "branch" | "subagent" | "sidechain"
    messages: list[Message]
    file: str = ""
    #: for a branch or a compaction fork: index in ``messages`` where it leaves the main chain
    fork_index: int = 0
    synthetic_dropped: int = 0
    #: a compaction fork (``agent-acompact-*``): Claude Code's summarizer call, which continues
    #: the main conversation (same system prompt, tools and model, so the same prompt cache);
    #: ``messages`` start with the main chain up to ``fork_index``
    compaction_fork: bool = False
    #: the thread's first record has a ``parentUuid`` that is not in the file: the file
    #: continues a conversation whose earlier history is elsewhere (resume, Entire checkpoint)
    starts_outside: bool = False
    #: that ``parentUuid``: the record of the earlier history the thread hangs from
    continues_uuid: str | None = None


@dataclass
class Session:
    """A parsed upload: threads plus everything the replay needs from side records."""

    name: str
    session_id: str | None
    threads: list[Thread]
    problems: list[Problem]
    side: SideRecords
    versions: list[str]
    upload: Upload | None = None
    record_count: int = 0
    #: the uuid of every record read from the session file(s), main chain or not: what a file
    #: continuing this session can hang from (a ``uuid_set.UuidSet``: a 2 GB session's
    #: hundreds of thousands of them in 16 bytes each)
    record_uuids: AbstractSet[str] = frozenset()
    #: results derived from the session alone, reused by later replays in this process
    memo: dict[Any, Any] = field(default_factory=dict)
    #: share of each thread's requests whose recorded figures the replay reads (a forecast
    #: copy, ``replay.forecast``, below 1)
    usage_until: float = 1.0
    #: the source adapter that read it (``sources.SourceAdapter.name``)
    agent: str = "claude_code"
    #: the model's context window as the agent recorded it (Codex's ``model_context_window``)
    context_window: int | None = None
    #: the bytes of the file(s) it was read from, when ``session_cache`` read it (else 0): what
    #: a process keeps of it between appends is bounded by it (``kept_cache``)
    source_bytes: int = 0

    @property
    def main(self) -> Thread:
        return self.threads[0]

    @property
    def continues_uuid(self) -> str | None:
        """The record the main conversation's first record hangs from when it is not in the
        session's files (a resumed session uploaded without the file it continues), else None."""
        return self.main.continues_uuid

    @property
    def title(self) -> str | None:
        """The session's name as Claude Code shows it: the newest title the user gave
        (``custom-title``), else the newest one Claude Code wrote (``ai-title``), else the
        newest ``summary`` record (older versions' session summaries)."""
        for kind in ("custom-title", "ai-title", "summary"):
            named = [text for rtype, text in self.side.titles if rtype == kind]
            if named:
                return named[-1]
        return None

    def close(self) -> None:
        """Close the archive an upload keeps open for lazy reads of its tool-results."""
        if self.upload is not None:
            self.upload.close()

    @property
    def project(self) -> str | None:
        """The folder the session ran in: the main conversation's first recorded ``cwd`` (a
        later ``cd`` moves the shell, not the project Claude Code was started in)."""
        return next((m.cwd for m in self.main.messages if m.cwd), None)

    @property
    def max_recorded_prompt(self) -> int:
        """The largest prompt any response of the session reports (input + cache read/write,
        as Claude Code counted it: the evidence of the window its thresholds used)."""
        return max(
            (
                m.usage.counted_prompt
                for t in self.threads
                for m in t.messages
                if m.usage is not None
            ),
            default=0,
        )

    @property
    def recorded_auto_compactions(self) -> list[int]:
        """``preTokens`` of every recorded automatic compaction of the main conversation."""
        return auto_compaction_pre_tokens(self.main.messages)

    @property
    def version(self) -> str | None:
        """The Claude Code version of the newest main-chain record (resumes can mix versions)."""
        for message in reversed(self.main.messages):
            if message.version:
                return message.version
        return self.versions[-1] if self.versions else None


def auto_compaction_pre_tokens(messages: Iterable[Message]) -> list[int]:
    """``preTokens`` of every recorded automatic compaction among ``messages``."""
    return [
        int(pre)
        for m in messages
        if m.kind == "compact_boundary" and m.metadata.get("trigger") == "auto"
        for pre in [m.metadata.get("preTokens")]
        if isinstance(pre, int | float) and not isinstance(pre, bool)
    ]


@dataclass
class RequestInfo:
    """One API request of a thread: a distinct assistant ``message.id``."""

    index: int  # position among the thread's requests
    position: int  # index of the assistant message in the thread
    message: Message

    @property
    def timestamp(self) -> str:
        return self.message.timestamp


class RequestList(list[RequestInfo]):
    """A thread's requests (``thread_requests``), pickled as the thread (which a replay's
    checkpoint keeps by reference) and the requests' positions in it: a live session's state
    is pickled at every append, and its requests, each a message's reference, were a share of
    its bytes and of its pickling and reading time that grew with the session. Requests that
    are not exactly ``thread_requests``' (changed since) are pickled as a list."""

    __slots__ = ("thread",)

    def __init__(self, thread: Thread, requests: Iterable[RequestInfo] = ()) -> None:
        super().__init__(requests)
        self.thread = thread

    def __reduce_ex__(self, _protocol: Any) -> Any:
        messages = self.thread.messages
        positions = tuple(r.position for r in self)
        same = all(
            r.index == i and 0 <= r.position < len(messages) and r.message is messages[r.position]
            for i, r in enumerate(self)
        )
        if same:
            return (_requests_at, (self.thread, positions))
        return (RequestList, (self.thread, list(self)))


def _requests_at(thread: Thread, positions: tuple[int, ...]) -> RequestList:
    """``RequestList``'s requests read back: the messages at ``positions`` of ``thread``."""
    messages = thread.messages
    return RequestList(
        thread,
        (RequestInfo(index=i, position=p, message=messages[p]) for i, p in enumerate(positions)),
    )


def thread_requests(thread: Thread) -> RequestList:
    """Every distinct assistant response of the thread, in order."""
    out = RequestList(thread)
    for pos, msg in enumerate(thread.messages):
        if msg.role == "assistant":
            out.append(RequestInfo(len(out), pos, msg))  # (index, position, message)
    return out


@dataclass(frozen=True)
class _Linked:
    """How far ``link_tool_results`` went through a thread: its messages but the last (which
    a grown session's next read may replace by a longer copy; with their blocks: a message
    that gained one in place is walked again), and what it knew after them."""

    prefix: Prefix
    names: dict[str, str]
    orphans: int
    first_line: int


#: The main threads this process linked last, by file and first message: a growing session's next read
#: (``claude_code.extending``: only a main thread) holds the same message objects, which
#: need no second walk (each read walked every block of the session: 5 ms at 64 MB, in the
#: web's read and the worker's). Used only when the thread's messages start with those very
#: objects; two kept, as ``session_cache`` keeps two sessions' reads.
#: Bounded by the size of the session read (``kept_cache``: nothing of a large one).
_LINKED: KeptCache[tuple[str, str, int], _Linked] = KeptCache(2)


def link_tool_results(threads: list[Thread], problems: list[Problem]) -> None:
    """Give tool_result blocks their tool name; report results without a matching tool_use."""
    for thread in threads:
        names: dict[str, str] = {}
        orphans = 0
        first_line = 0
        messages = thread.messages
        start = 0
        key = (thread.file, thread.id, id(messages[0]) if messages else 0)
        linked = _LINKED.get(key)
        on = None
        if (
            linked is not None
            and len(linked.prefix) < len(messages)
            and leads(linked.prefix, messages)
        ):
            names = dict(linked.names)
            orphans, first_line, on = linked.orphans, linked.first_line, linked.prefix
            start = len(on)
        for n in range(start, len(messages)):
            msg = messages[n]
            if n == len(messages) - 1 and n > 0 and thread.kind == "main":
                size, lineage = reading_bytes(), lineage_of(threads[0].messages)
                prefix = prefix_of(messages, on=on)
                _LINKED.keep(
                    key,
                    _Linked(prefix, dict(names), orphans, first_line),
                    size=size,
                    lineage=lineage,
                )
            for block in msg.blocks:
                if block.type == "tool_use" and block.tool_use_id:
                    names[block.tool_use_id] = block.tool_name or ""
                elif block.type == "tool_result":
                    name = names.get(block.tool_use_id or "")
                    if name is None:
                        orphans += 1
                        first_line = first_line or msg.line
                    else:
                        block.tool_name = name
        if orphans:
            problems.append(
                Problem(
                    first_line,
                    "orphan_tool_result",
                    f"{orphans} tool result(s) in {thread.id} have no matching tool_use before them "
                    "(Claude Code drops them before the API call)",
                    thread.file,
                    "info",
                )
            )
