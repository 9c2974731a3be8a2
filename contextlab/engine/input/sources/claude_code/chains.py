"""Claude Code's record tree, walked into threads: the chains of messages that made requests.

Records link by ``parentUuid``: parallel tool results hang on side branches, compact boundaries
start new roots linked back by ``logicalParentUuid``, and one API response is split over several
records sharing ``message.id``. The active main chain is the walk from the last conversation
record back to the root; abandoned branches (rewinds, edits) that made requests of their own,
and 1.0.x inline sidechains, become threads of their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from contextlab.engine.input.model import DERIVED_METADATA, Message, Problem, Usage
from contextlab.engine.input.session import Thread

from .records import Record


def _merge_into(target: Message, other: Message) -> None:
    target.blocks.extend(other.blocks)
    target.uuids.extend(other.uuids)
    if other.usage is not None:
        if target.usage is None:
            target.usage = other.usage
        elif len(other.usage.iterations) > len(target.usage.iterations):
            # a later record of the response saw more of the server's calls
            target.usage = other.usage
        elif other.usage.output > target.usage.output:
            # output_tokens is a streaming snapshot; the largest value is the closest to final
            target.usage.output = other.usage.output


class MessageGrouper:
    """Groups a chain's records into a thread's messages: one assistant message per
    message.id, in chain order. ``add`` can be called again with records that follow on the
    same chain (a live session's appended records): the messages are those one call with
    every record makes."""

    def __init__(self, thread: Thread) -> None:
        self.thread = thread
        self.by_id: dict[str, Message] = {}
        self.seen_results: set[str] = set()
        #: a resume was recorded and no message has taken it yet
        self.resumed = False
        #: the messages made since ``go_on`` (the others are an earlier version's: copied
        #: before a record is merged into one)
        self.made: set[int] = set()
        thread.messages = []

    def go_on(self, thread: Thread) -> None:
        """Group the next records into ``thread`` (a copy of the thread grouped so far,
        which the session of the records before keeps as it is)."""
        self.thread = thread
        self.made = set()

    def add(self, records: Iterable[Record]) -> None:
        thread, messages = self.thread, self.thread.messages
        for rec in records:
            msg = rec.message
            self.resumed = self.resumed or rec.resumed
            if msg is None:
                continue
            if rec.synthetic:
                thread.synthetic_dropped += 1
                continue
            if msg.role == "assistant" and msg.message_id:
                existing = self.by_id.get(msg.message_id)
                if existing is not None:
                    if id(existing) not in self.made:
                        existing = self._own(existing)
                    _merge_into(existing, _copy_message(msg))
                    continue
                msg = _copy_message(msg)
                msg.metadata["first_record_blocks"] = len(msg.blocks)
                self.by_id[msg.message_id or msg.uuid] = msg
            else:
                if msg.kind == "tool_result":
                    ids = [
                        b.tool_use_id
                        for b in msg.blocks
                        if b.type == "tool_result" and b.tool_use_id
                    ]
                    if ids and all(i in self.seen_results for i in ids):
                        continue  # a duplicate result for a tool_use already answered
                    self.seen_results.update(ids)
                msg = _copy_message(msg)
            if self.resumed:
                msg.metadata["resumed"] = True  # the first message after a resume
                self.resumed = False
            msg.index = len(messages)
            messages.append(msg)
            self.made.add(id(msg))

    def _own(self, message: Message) -> Message:
        """A copy of an earlier version's ``message`` in its place, to merge records into."""
        copy = _copy_message(message)
        # the earlier version's replay sized its thinking from a streaming snapshot of the
        # output; the records merged in now complete it: sized again, as a whole read sizes it
        for key in DERIVED_METADATA:
            copy.metadata.pop(key, None)
        copy.index = message.index
        self.thread.messages[message.index] = copy
        if message.message_id:
            self.by_id[message.message_id] = copy
        self.made.add(id(copy))
        return copy


def _messages_from_records(records: Iterable[Record], thread: Thread) -> MessageGrouper:
    """Group records into messages: one assistant message per message.id, in chain order."""
    grouper = MessageGrouper(thread)
    grouper.add(records)
    return grouper


def _copy_message(msg: Message) -> Message:
    """Each thread gets its own message shells (index, merged blocks); blocks are shared."""
    usage = Usage(**{k: getattr(msg.usage, k) for k in Usage.__slots__}) if msg.usage else None  # type: ignore[attr-defined]
    return Message(
        uuid=msg.uuid,
        role=msg.role,
        kind=msg.kind,
        blocks=list(msg.blocks),
        timestamp=msg.timestamp,
        line=msg.line,
        file=msg.file,
        message_id=msg.message_id,
        request_id=msg.request_id,
        model=msg.model,
        usage=usage,
        version=msg.version,
        cwd=msg.cwd,
        is_meta=msg.is_meta,
        is_sidechain=msg.is_sidechain,
        agent_id=msg.agent_id,
        uuids=list(msg.uuids),
        metadata=dict(msg.metadata),
        compact_original_output=msg.compact_original_output,
        string_content=msg.string_content,
    )


def response_and_call_ids(records: list[Record]) -> tuple[set[str | None], set[str | None]]:
    """The message ids of the responses among ``records`` and the ids of the tool calls they
    make: what a split response's sibling or a parallel tool result hangs on to."""
    responses = [r.message for r in records if r.message is not None and r.type == "assistant"]
    return (
        {m.message_id for m in responses},
        {b.tool_use_id for m in responses for b in m.blocks if b.type == "tool_use"},
    )


class RecordTree:
    """Index of one file's records (or one sidechain group) for chain walks."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.by_uuid: dict[str, Record] = {}
        self.position: dict[str, int] = {}
        for pos, rec in enumerate(records):
            # a duplicated uuid (resumed sessions re-append) keeps its first occurrence
            if rec.uuid not in self.by_uuid:
                self.by_uuid[rec.uuid] = rec
                self.position[rec.uuid] = pos

    def previous_record(self, rec: Record) -> Record | None:
        """The closest earlier conversation record in file order (a bridge over a gap)."""
        pos = self.position.get(rec.uuid, 0)
        for earlier in reversed(self.records[:pos]):
            if earlier.type != "progress" and not earlier.synthetic:
                return earlier
        return None

    def parent_of(self, rec: Record, problems: list[Problem], reported: set[str]) -> Record | None:
        if rec.parent is not None:
            parent = self.by_uuid.get(rec.parent)
            if parent is None:
                # A parent missing from the file (redacted, tombstoned or written elsewhere):
                # the recorded usage shows the context went on, so bridge to the record before.
                parent = self.previous_record(rec)
                if rec.parent not in reported:
                    reported.add(rec.parent)
                    where = f"linked to line {parent.line}" if parent else "the chain starts here"
                    problems.append(
                        Problem(
                            rec.line,
                            "missing_parent",
                            f"parent record is not in the file; {where}",
                            rec.file,
                            "info",
                        )
                    )
            return parent
        if rec.subtype == "compact_boundary":
            # The boundary is a new root; for the full history follow the logical link, or the
            # closest earlier record when the link points outside the file.
            if rec.logical_parent and rec.logical_parent in self.by_uuid:
                return self.by_uuid[rec.logical_parent]
            return self.previous_record(rec)
        return None

    def walk(
        self, leaf: Record, problems: list[Problem], stop: set[str] | None = None
    ) -> list[Record]:
        """Records from the root to ``leaf`` (cycle-safe)."""
        chain: list[Record] = []
        seen: set[str] = set()
        reported: set[str] = set()
        node: Record | None = leaf
        while node is not None and node.uuid not in seen:
            seen.add(node.uuid)
            chain.append(node)
            if stop is not None and node.uuid in stop:
                break
            node = self.parent_of(node, problems, reported)
        if node is not None and node.uuid in seen and (stop is None or node.uuid not in stop):
            problems.append(
                Problem(node.line, "cycle", "parentUuid links form a cycle; cut here", node.file)
            )
        chain.reverse()
        return chain

    def reattach(self, chain: list[Record], passed: list[Record] | None = None) -> list[Record]:
        """Add split-response siblings and parallel tool results that sit on side branches.
        ``passed`` gets the records that hang from the chain but were not added (what a
        later record's response or tool call could still make belong to it)."""
        members = {r.uuid for r in chain}
        message_ids, tool_ids = response_and_call_ids(chain)
        extra: list[Record] = []
        for rec in self.records:
            if rec.uuid in members or rec.message is None:
                continue
            anchor = rec.parent if rec.parent in members else rec.source_assistant
            if anchor not in members:
                continue
            msg = rec.message
            if (rec.type == "assistant" and msg.message_id in message_ids) or (
                msg.kind == "tool_result"
                and any(b.type == "tool_result" and b.tool_use_id in tool_ids for b in msg.blocks)
            ):
                pass
            else:
                if passed is not None:
                    passed.append(rec)
                continue
            members.add(rec.uuid)
            extra.append(rec)
            if rec.type == "assistant":
                tool_ids.update(b.tool_use_id for b in msg.blocks if b.type == "tool_use")
        if not extra:
            return chain
        merged = chain + extra
        merged.sort(key=lambda r: self.position.get(r.uuid, 0))
        return merged


def _main_leaf(records: list[Record]) -> Record | None:
    for rec in reversed(records):
        if rec.type in ("user", "assistant", "system", "attachment") and not rec.synthetic:
            return rec
    for rec in reversed(records):
        if rec.type != "progress":
            return rec
    return records[-1] if records else None


@dataclass
class MainChainKept:
    """What ``build_threads`` leaves to extend its main thread with records that only
    continue the main chain (``extending``): its message grouping, and the records that hang
    from the chain but were not reattached to it."""

    grouper: MessageGrouper | None = None
    passed: list[Record] = field(default_factory=list)


def build_threads(
    records: list[Record],
    problems: list[Problem],
    file_name: str,
    main_kind: str,
    main_id: str,
    kept: MainChainKept | None = None,
) -> list[Thread]:
    """Main chain of one file plus its abandoned branches and inline sidechains (``kept``
    gets what extending the main thread later needs)."""
    threads: list[Thread] = []
    main_records = [r for r in records if not r.is_sidechain]
    side_records = [r for r in records if r.is_sidechain]
    tree = RecordTree(main_records)
    leaf = _main_leaf(main_records)
    main_chain: list[Record] = []
    if leaf is not None:
        main_chain = tree.reattach(
            tree.walk(leaf, problems), kept.passed if kept is not None else None
        )
        main = Thread(id=main_id, kind=main_kind, messages=[], file=file_name)
        root = main_chain[0] if main_chain else None
        if root is not None and root.parent is not None and root.parent not in tree.by_uuid:
            main.starts_outside = True
            main.continues_uuid = root.parent
        grouper = _messages_from_records(main_chain, main)
        if kept is not None:
            kept.grouper = grouper
        threads.append(main)
        threads.extend(_branches(tree, main_chain, main, problems, file_name))
    if side_records:
        threads.extend(_sidechains(side_records, problems, file_name))
    unplaced = _unplaced(records, threads, problems, file_name)
    if unplaced is not None:
        threads.append(unplaced)
    return threads


def _unplaced(
    records: list[Record], threads: list[Thread], problems: list[Problem], file_name: str
) -> Thread | None:
    """A thread of the recorded requests no walk placed (records in a ``parentUuid`` cycle,
    say): reported, and replayed on their own so the session still counts them."""
    placed = {
        m.message_id
        for t in threads
        for m in t.messages[t.fork_index if t.kind == "branch" else 0 :]
        if m.role == "assistant" and m.message_id
    }
    lost = [
        r
        for r in records
        if r.type == "assistant"
        and not r.synthetic
        and r.message is not None
        and r.message.usage is not None
        and r.message.message_id
        and r.message.message_id not in placed
    ]
    if not lost:
        return None
    thread = Thread(id="unplaced", kind="branch", messages=[], file=file_name)
    _messages_from_records(lost, thread)
    requests = len(thread.messages)
    problems.append(
        Problem(
            lost[0].line,
            "unplaced_requests",
            f"{requests} recorded request(s) are on no chain of the file; "
            "replayed apart (thread 'unplaced') so the session's totals count them",
            lost[0].file,
            "warning",
        )
    )
    return thread


def _branches(
    tree: RecordTree,
    main_chain: list[Record],
    main: Thread,
    problems: list[Problem],
    file_name: str,
) -> list[Thread]:
    """Abandoned branches (rewinds, edits) that contain requests not on the main chain."""
    on_main = {r.uuid for r in main_chain}
    main_ids = {m.message_id for m in main.messages if m.role == "assistant"}
    assigned: set[str] = {i for i in main_ids if i}
    has_child: set[str] = {r.parent for r in tree.records if r.parent}
    visited: set[str] = set()
    branches: list[Thread] = []
    for rec in reversed(tree.records):
        if rec.uuid in on_main or rec.uuid in has_child or rec.uuid in visited:
            continue
        # collect unassigned requests on the way up to the main chain
        new_ids: list[str] = []
        node: Record | None = rec
        while node is not None and node.uuid not in on_main and node.uuid not in visited:
            visited.add(node.uuid)
            msg = node.message
            if (
                node.type == "assistant"
                and msg is not None
                and not node.synthetic
                and msg.message_id
                and msg.message_id not in assigned
            ):
                new_ids.append(msg.message_id)
            node = tree.by_uuid.get(node.parent) if node.parent else None
        if not new_ids:
            continue
        assigned.update(new_ids)
        chain = tree.reattach(tree.walk(rec, problems))
        thread = Thread(
            id=f"branch-{len(branches) + 1}", kind="branch", messages=[], file=file_name
        )
        _messages_from_records(chain, thread)
        thread.fork_index = _shared_messages(thread, on_main)
        branches.append(thread)
    branches.reverse()
    return branches


def _shared_messages(thread: Thread, on_main: set[str]) -> int:
    """How many of a branch's first messages it shares with the main chain: its fork point,
    counted in messages (its chain also holds progress and system records, and one response
    split over several records is one message)."""
    fork = 0
    for i, msg in enumerate(thread.messages):
        if msg.uuid not in on_main:
            break
        fork = i + 1
    return fork


def _sidechains(records: list[Record], problems: list[Problem], file_name: str) -> list[Thread]:
    """1.0.x inline subagents: isSidechain records, one tree per root."""
    tree = RecordTree(records)
    roots: dict[str, list[Record]] = {}
    root_of: dict[str, str] = {}
    for rec in records:
        parent_root = root_of.get(rec.parent) if rec.parent else None
        root = parent_root or rec.uuid
        root_of[rec.uuid] = root
        roots.setdefault(root, []).append(rec)
    threads = []
    for n, group in enumerate(roots.values(), start=1):
        if not any(r.type == "assistant" for r in group):
            continue
        sub = RecordTree(group)
        leaf = _main_leaf(group)
        if leaf is None:
            continue
        chain = sub.reattach(sub.walk(leaf, problems))
        thread = Thread(id=f"sidechain-{n}", kind="sidechain", messages=[], file=file_name)
        _messages_from_records(chain, thread)
        threads.append(thread)
    del tree
    return threads
