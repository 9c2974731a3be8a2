"""What the waste rules that read texts (``reread``, ``unused_result``) learn from the main
thread's messages, gathered message by message (``WasteScan``), so a live session's next
version goes on from the last one's scan over the messages its append added instead of reading
every text again (``scan_main_thread``).

The scan holds only what does not depend on a replay's result: which reads repeat which, and
which results stay unreferenced so far. ``waste.waste_findings`` prices them against the
result (what stayed in view, at which request, at what calibration), as before. A whole scan
and one gone on from a kept state give the same findings: the state is the very scan of the
messages it covers, and messages before a thread's last one do not change when lines are
appended (``message_store.appended_messages_json`` relies on it too).
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from contextlab.engine.input.session import Session
from contextlab.engine.measures.tokens import TiktokenCounter

from .explorer import _message_rows

#: bump when what a kept state holds changes meaning (a state of another version is not used)
SCAN_VERSION = 1
#: the Read tool's own answers to a file read again unchanged (found in the 2.1.100 package;
#: the second behind a server-side flag): a short note, no waste
UNCHANGED_STUBS = ("File unchanged since last read", "Wasted call — file unchanged")
#: tools that change a file, by the input key naming it
WRITERS = {"Edit": "file_path", "MultiEdit": "file_path", "Write": "file_path"}
WRITERS_NOTEBOOK = {"NotebookEdit": "notebook_path"}
#: a result needs this many distinctive words before the rule can call it unused
UNUSED_MIN_WORDS = 5
#: a distinctive word: 6+ characters of a name or path, not ending in punctuation
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{4,}[A-Za-z0-9_]")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text))


def _tool_input(block: Mapping[str, Any]) -> dict[str, Any]:
    name = str(block.get("tool_name") or "")
    text = str(block.get("text") or "")
    try:
        value = json.loads(text[len(name) :]) if text.startswith(name) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _digest(text: str) -> bytes:
    """A text's 128-bit digest: two reads of a file are compared by it."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class WasteScan:
    """The main thread's messages as the text-reading waste rules see them, one at a time
    (``feed``, in order from message 0).

    * ``rereads``: each Read result whose text is the previous Read's of the same file part,
      with no write of the file between: ``[path, call message, earlier message, earlier
      block, message, block, raw tokens]``, in order.
    * ``unused``: each result not an error nor persisted, with ``UNUSED_MIN_WORDS`` or more
      words new to the conversation, none of which a response after it has said so far:
      ``(message, block) -> [raw tokens, tool]``, in order; ``responses`` the assistant
      messages, for how many came after each.
    """

    def __init__(self, thread: str = "") -> None:
        self.thread = thread
        #: messages fed, and the uuid of the last (what a longer version must still have)
        self.count = 0
        self.last_uuid: str | None = None
        # --- reread: of each call, the part of a file it names (not its whole input: a
        # Write's holds the file); of each part read, the last read and its text's digest
        self.calls: dict[str, tuple[int, tuple[Any, ...] | None]] = {}
        self.last_read: dict[tuple[Any, ...], tuple[int, int, bytes]] = {}
        self.written_at: dict[str, int] = {}
        self.rereads: list[list[Any]] = []
        # --- unused_result: every word seen so far; each word of a result not yet used,
        # with that result (a word is new in one result only: it is seen after it)
        self.seen: set[str] = set()
        self.pending: dict[str, tuple[int, int]] = {}
        self.unused: dict[tuple[int, int], list[Any]] = {}
        self.words_of: dict[tuple[int, int], list[str]] = {}
        self.responses: list[int] = []

    def feed(self, mi: int, msg: Mapping[str, Any]) -> None:
        """Take message ``mi`` (a ``messages_json`` row), the one after the last fed."""
        if mi != self.count:
            raise ValueError(f"message {mi} fed after {self.count} messages")
        self.count = mi + 1
        self.last_uuid = msg.get("uuid")
        blocks = list(msg.get("blocks") or [])
        texts = [str(block.get("text") or "") for block in blocks]
        said = [words(text) for text in texts]
        if msg.get("role") == "assistant":
            self.responses.append(mi)
            # a response says these: a result before it that named one was used
            for block_words in said:
                for word in block_words & self.pending.keys():
                    if word in self.pending:  # (not gone with another word of its result)
                        self._used(self.pending[word])
        for bj, block in enumerate(blocks):
            self._reread(mi, bj, block, texts[bj])
            if block.get("type") == "tool_result" and not block.get("is_error"):
                new = said[bj] - self.seen
                if len(new) >= UNUSED_MIN_WORDS and not block.get("persisted"):
                    key = (mi, bj)
                    tool = str(block.get("tool_name") or "tool")
                    self.unused[key] = [int(block.get("tokens") or 0), tool]
                    self.words_of[key] = sorted(new)
                    for word in new:
                        self.pending[word] = key
            self.seen |= said[bj]

    def _used(self, key: tuple[int, int]) -> None:
        del self.unused[key]
        for word in self.words_of.pop(key):
            del self.pending[word]

    def _reread(self, mi: int, bj: int, block: Mapping[str, Any], text: str) -> None:
        kind, name = block.get("type"), block.get("tool_name")
        if kind == "tool_use" and block.get("tool_use_id"):
            args = _tool_input(block)
            file_path = args.get("file_path")
            named = (
                (file_path, args.get("offset"), args.get("limit"))
                if isinstance(file_path, str)
                else None
            )
            self.calls[str(block["tool_use_id"])] = (mi, named)
            key = WRITERS.get(str(name)) or WRITERS_NOTEBOOK.get(str(name))
            if key and isinstance(args.get(key), str):
                self.written_at[args[key]] = mi
            return
        if kind != "tool_result" or name != "Read" or block.get("is_error"):
            return
        call_message, part = self.calls.get(str(block.get("tool_use_id") or ""), (0, None))
        if part is None:
            return
        digest = _digest(text)
        earlier = self.last_read.get(part)
        self.last_read[part] = (mi, bj, digest)
        if earlier is None or text.startswith(UNCHANGED_STUBS) or block.get("persisted"):
            return
        before_mi, before_bj, before_digest = earlier
        if before_digest != digest or self.written_at.get(part[0], -1) > before_mi:
            return
        tokens = int(block.get("tokens") or 0)
        self.rereads.append([part[0], call_message, before_mi, before_bj, mi, bj, tokens])

    # --- kept between a live session's versions -------------------------------------------

    def copy(self) -> WasteScan:
        """A copy to go on from later (``HeldScan``): its containers copied (``feed``
        changes only them), their entries shared (never changed once made)."""
        copy = WasteScan(self.thread)
        copy.count, copy.last_uuid = self.count, self.last_uuid
        copy.calls = dict(self.calls)
        copy.last_read = dict(self.last_read)
        copy.written_at = dict(self.written_at)
        copy.rereads = list(self.rereads)
        copy.seen = set(self.seen)
        copy.pending = dict(self.pending)
        copy.unused = dict(self.unused)
        copy.words_of = dict(self.words_of)
        copy.responses = list(self.responses)
        return copy

    def to_bytes(self) -> bytes:
        """The scan as compressed JSON (kept in a storage every worker host reads)."""
        data = {
            "version": SCAN_VERSION,
            "thread": self.thread,
            "count": self.count,
            "last_uuid": self.last_uuid,
            "calls": [
                [k, mi, list(named) if named else None] for k, (mi, named) in self.calls.items()
            ],
            "last_read": [[*part, mi, bj, d.hex()] for part, (mi, bj, d) in self.last_read.items()],
            "written_at": self.written_at,
            "rereads": self.rereads,
            "seen": sorted(self.seen),
            "unused": [
                [mi, bj, *v, self.words_of[(mi, bj)]] for (mi, bj), v in self.unused.items()
            ],
            "responses": self.responses,
        }
        return zlib.compress(json.dumps(data, separators=(",", ":")).encode(), 1)

    @classmethod
    def from_bytes(cls, blob: bytes) -> WasteScan:
        """A scan ``to_bytes`` kept; ``ValueError`` when it is not one of this version."""
        try:
            data = json.loads(zlib.decompress(blob))
        except (zlib.error, ValueError) as exc:
            raise ValueError(f"not a waste scan: {exc}") from exc
        if not isinstance(data, dict) or data.get("version") != SCAN_VERSION:
            raise ValueError("a waste scan of another version")
        scan = cls(str(data["thread"]))
        scan.count = int(data["count"])
        scan.last_uuid = data["last_uuid"]
        scan.calls = {
            k: (mi, tuple(named) if named is not None else None) for k, mi, named in data["calls"]
        }
        scan.last_read = {
            tuple(row[:3]): (row[3], row[4], bytes.fromhex(row[5])) for row in data["last_read"]
        }
        scan.written_at = dict(data["written_at"])
        scan.rereads = list(data["rereads"])
        scan.seen = set(data["seen"])
        for mi, bj, tokens, tool, new in data["unused"]:
            key = (mi, bj)
            scan.unused[key] = [tokens, tool]
            scan.words_of[key] = new
            for word in new:
                scan.pending[word] = key
        scan.responses = list(data["responses"])
        return scan


def scan_messages(thread: str, messages: Iterable[Mapping[str, Any]]) -> WasteScan:
    """The whole scan of a thread's messages (``messages_json`` rows, in order)."""
    scan = WasteScan(thread)
    for mi, msg in enumerate(messages):
        scan.feed(mi, msg)
    return scan


@dataclass
class HeldScan:
    """A kept state as objects, for the process that made it (``scan_main_thread_on``): the
    scan at the state's point (a copy) and the record counts of the messages it covers. The
    bytes of the same state (``scan_main_thread``'s) are what another process goes on from;
    reading them back costs about 0.02–0.03 s at 64 MB."""

    scan: WasteScan
    sizes: list[int]


@dataclass
class ScanOn:
    """``scan_main_thread_on``'s answer."""

    scan: WasteScan
    #: the state's bytes (for the storage every worker host reads)
    state: bytes
    #: the same state as objects (for this process's next version), used up when gone on from
    held: HeldScan
    #: whether the scan went on from a kept state (``held`` or the bytes)
    went_on: bool


def scan_main_thread(session: Session, kept: bytes | None = None) -> tuple[WasteScan, bytes]:
    """The scan of ``session``'s main thread, and the state a longer version of the session
    goes on from (``kept``: an earlier version's; the thread is scanned whole without one, or
    when it does not fit). The state covers the messages before the thread's last response:
    an append may still add records to it (parallel tool calls: a response's next call comes
    after the first one's result), or to the message after it."""
    found = scan_main_thread_on(session, kept)
    return found.scan, found.state


def scan_main_thread_on(
    session: Session, kept: bytes | None = None, held: HeldScan | None = None
) -> ScanOn:
    """``scan_main_thread``, going on from ``held`` (the state as objects this process kept
    of the last version; changed) when it fits, else from ``kept`` (its bytes), and the
    state both ways."""
    thread = session.threads[0] if session.threads else None
    if thread is None:
        empty = WasteScan()
        return ScanOn(empty, _state(empty, []), HeldScan(empty.copy(), []), False)
    messages = thread.messages
    end = len(messages)
    stable = _stable(messages)
    went_on = None
    if held is not None and _fits(held.scan, held.sizes, thread.id, messages, stable):
        went_on = held.scan
    elif kept is not None:
        went_on = _go_on(kept, thread.id, messages, stable)
    scan = went_on if went_on is not None else WasteScan(thread.id)
    state = b""
    keep = HeldScan(scan, [])
    rows = _message_rows(thread, scan.count, TiktokenCounter(), False, False, True)
    for mi, row in enumerate(rows, start=scan.count):
        if mi == stable:
            state, keep = _state(scan, messages), _held(scan, messages)
        scan.feed(mi, row)
    if stable == end:
        state, keep = _state(scan, messages), _held(scan, messages)
    return ScanOn(scan, state, keep, went_on is not None)


def _held(scan: WasteScan, messages: list[Any]) -> HeldScan:
    return HeldScan(scan.copy(), [len(messages[mi].uuids) for mi in range(scan.count)])


def _stable(messages: list[Any]) -> int:
    """How many of the thread's first messages a longer version of it still has as they are:
    those before its last response, and before its last message."""
    last = max(0, len(messages) - 1)
    for mi in range(last, -1, -1):
        if messages[mi].role == "assistant":
            return mi
    return last


def _state(scan: WasteScan, messages: list[Any]) -> bytes:
    """The scan's bytes with how many records each message it covers was made of: a record
    that a later version merged into one of them (a response's, by its id) is seen, and the
    state not gone on from."""
    sizes = [len(messages[mi].uuids) for mi in range(scan.count)]
    return json.dumps(sizes, separators=(",", ":")).encode() + b"\n" + scan.to_bytes()


def _go_on(kept: bytes, thread_id: str, messages: list[Any], stable: int) -> WasteScan | None:
    """The kept scan when the thread still starts with the messages it covers, as they were,
    and it covers no more than this version's stable messages."""
    head, _, blob = kept.partition(b"\n")
    try:
        sizes = json.loads(head)
        scan = WasteScan.from_bytes(blob)
    except ValueError:
        return None
    return scan if _fits(scan, sizes, thread_id, messages, stable) else None


def _fits(
    scan: WasteScan, sizes: list[int], thread_id: str, messages: list[Any], stable: int
) -> bool:
    """Whether the thread still starts with the messages ``scan`` covers (of ``sizes``
    records each), as they were, and it covers no more than this version's stable ones."""
    if scan.thread != thread_id or scan.count > stable or len(sizes) != scan.count:
        return False
    if scan.count and messages[scan.count - 1].uuid != scan.last_uuid:
        return False
    return all(len(messages[mi].uuids) == size for mi, size in enumerate(sizes))
