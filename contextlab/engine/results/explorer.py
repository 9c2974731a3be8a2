"""Rebuild any request's side-by-side view (full history vs model view) from stored results.

A replay stores each thread's messages once (``messages_json``) and, per request, only the
view's head and range plus the transforms with the request interval over which each holds.
``side_by_side`` joins them back for one request without replaying anything.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Any

from contextlab.engine.input.model import DERIVED_METADATA, Block, Message
from contextlab.engine.input.session import Session, Thread
from contextlab.engine.measures.tokens import TiktokenCounter, block_tokens

from .json_stream import TextSink

PERSISTED_OPEN = "<persisted-output>"

#: Badge for each transform kind (the explorer's legend).
BADGES = {
    "persisted": "persisted",
    "budget": "persisted",
    "truncated": "persisted",  # Codex cut the output: the model saw part of it
    "cleared": "cleared",
    "snipped": "snipped",
    "collapsed": "collapsed",
    "hidden": "boundary",
}


#: key of ``messages_json``'s map of threads that start with another thread's messages
SHARED_PREFIXES = "_shared_prefixes"


def messages_json(
    session: Session,
    *,
    include_originals: bool = True,
    include_texts: bool = True,
    texts_on_read: bool = False,
) -> dict[str, Any]:
    """Every thread's messages, once, as plain JSON (what a store keeps per session).

    A branch or a compaction fork starts with the main thread's own messages: those are stored
    once, under the main thread, and ``SHARED_PREFIXES`` says how many of them each such
    thread starts with. ``expand_messages`` gives every thread its whole list back.
    ``include_texts=False`` leaves the blocks' texts out (their token counts stay): what reads
    only the figures (``tools.tool_breakdown``) does not hold a copy of every text. With
    ``texts_on_read`` too, a block row reads its text back from the session when asked for it
    (``TextOnRead``): what reads each text once (the waste findings) holds one at a time. Such
    rows are for reading in this process, never for storing (a JSON dump leaves the text out).
    """
    counter = TiktokenCounter()
    threads, shared = _stored_threads(session)
    out: dict[str, Any] = {
        thread.id: list(
            _message_rows(thread, start, counter, include_originals, include_texts, texts_on_read)
        )
        for thread, start in threads
    }
    if shared:
        out[SHARED_PREFIXES] = shared
    return out


def write_messages_json(session: Session, out: TextSink) -> None:
    """Write ``json.dumps(messages_json(session))`` to ``out``, the same characters, one
    message at a time: a session's texts are never all held a second time (as the rows of
    ``messages_json`` and as one string), which for a session of gigabytes is the difference
    between a bounded worker and one that is not."""
    threads, shared = _stored_threads(session)
    if len({thread.id for thread, _ in threads}) < len(threads):
        # two threads of one id: the mapping keeps the first's place and the last's rows
        json.dump(messages_json(session), out)
        return
    counter = TiktokenCounter()
    out.write("{")
    for t, (thread, start) in enumerate(threads):
        out.write(f"{', ' if t else ''}{json.dumps(thread.id)}: [")
        for i, row in enumerate(_message_rows(thread, start, counter, True, True)):
            if i:
                out.write(", ")
            out.write(json.dumps(row))
        out.write("]")
    if shared:
        out.write(f"{', ' if threads else ''}{json.dumps(SHARED_PREFIXES)}: {json.dumps(shared)}")
    out.write("}")


def _stored_threads(session: Session) -> tuple[list[tuple[Thread, int]], dict[str, Any]]:
    """Each thread with the index of its first message stored under it, and the shared
    prefixes (``SHARED_PREFIXES``)."""
    main = session.threads[0] if session.threads else None
    shared: dict[str, dict[str, Any]] = {}
    threads = []
    for thread in session.threads:
        start = _shared_prefix(thread, main)
        if start and main is not None:
            shared[thread.id] = {"thread": main.id, "length": start}
        threads.append((thread, start))
    return threads, shared


class TextOnRead(dict[str, Any]):
    """A message block's row whose ``"text"`` is its block's, read back (``Block.text``) each
    time it is asked for: a session's texts are held compact, and rows holding them expanded
    would be a second, larger copy of every one (``messages_json(texts_on_read=True)``)."""

    __slots__ = ("_block",)

    def __init__(self, block: Block) -> None:
        super().__init__()
        self._block = block

    def __missing__(self, key: str) -> Any:
        if key == "text":
            return self._block.text
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return self[key] if key == "text" or key in self else default


class OriginalOnRead(dict[str, Any]):
    """A message's row whose ``"original_output"`` (a persisted tool output's whole text) is
    its message's, read back (``Message.original_output``) each time it is asked for, as
    ``TextOnRead`` does for a block's text (``messages_json(texts_on_read=True)``)."""

    __slots__ = ("_message",)

    def __init__(self, message: Message) -> None:
        super().__init__()
        self._message = message

    def __missing__(self, key: str) -> Any:
        if key == "original_output" and self._message.compact_original_output:
            return self._message.original_output
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        if key == "original_output":
            return bool(self._message.compact_original_output)
        return dict.__contains__(self, key)


def _message_rows(
    thread: Thread,
    start: int,
    counter: TiktokenCounter,
    include_originals: bool,
    include_texts: bool,
    texts_on_read: bool = False,
) -> Iterator[dict[str, Any]]:
    for i, msg in enumerate(thread.messages[start:], start=start):
        blocks = []
        for block in msg.blocks:
            # (a text is expanded only where it is kept or looked at: deflated, most are)
            text = block.text if include_texts or block.type == "tool_result" else ""
            item: dict[str, Any] = TextOnRead(block) if texts_on_read and not include_texts else {}
            item["type"] = block.type
            if include_texts:
                item["text"] = text
            item["tokens"] = block_tokens(block, counter)
            if block.tool_name:
                item["tool_name"] = block.tool_name
            if block.tool_use_id:
                item["tool_use_id"] = block.tool_use_id
            if block.is_error:
                item["is_error"] = True
            if block.type == "tool_result" and text.startswith(PERSISTED_OPEN):
                item["persisted"] = True
            blocks.append(item)
        on_read = texts_on_read and not include_texts and include_originals
        row: dict[str, Any] = OriginalOnRead(msg) if on_read else {}
        row |= {
            "index": i,
            "uuid": msg.uuid,
            "role": msg.role,
            "kind": msg.kind,
            "line": msg.line,
            "timestamp": msg.timestamp,
            "message_id": msg.message_id,
            "model": msg.model,
            "is_meta": msg.is_meta,
            "blocks": blocks,
        }
        if msg.metadata:
            row["metadata"] = {
                k: v
                for k, v in msg.metadata.items()
                if k != "compactedToolIds" and k not in DERIVED_METADATA
            }
        if include_originals and not on_read and msg.original_output:
            row["original_output"] = msg.original_output
        yield row


def _shared_prefix(thread: Thread, main: Thread | None) -> int:
    """How many leading messages ``thread`` shares (the very objects) with ``main``."""
    n = thread.fork_index
    if main is None or thread is main or n <= 0 or n > len(main.messages):
        return 0
    mine, theirs = thread.messages, main.messages
    return n if all(mine[i] is theirs[i] for i in range(n)) else 0


def expand_messages(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """``messages_json`` output with every thread's whole message list (shared prefixes are
    the same row objects as the main thread's, not copies)."""
    shared = data.get(SHARED_PREFIXES) or {}
    out = {k: v for k, v in data.items() if k != SHARED_PREFIXES}
    for thread, ref in shared.items():
        out[thread] = out.get(ref["thread"], [])[: ref["length"]] + out.get(thread, [])
    return out


class TransformIndex:
    """Transforms of one thread, indexed for fast lookups by request."""

    def __init__(self, transforms: list[dict[str, Any]], thread: str) -> None:
        self.items = [t for t in transforms if t["thread"] == thread]
        self.items.sort(key=lambda t: t["first"])
        self.firsts = [t["first"] for t in self.items]

    def active(self, request: int) -> dict[tuple[int, int], dict[str, Any]]:
        """Transforms holding at ``request``: first ≤ request ≤ last (last None = open)."""
        out: dict[tuple[int, int], dict[str, Any]] = {}
        for t in self.items[: bisect_right(self.firsts, request)]:
            last = t["last"]
            if last is None or last >= request:
                out[(t["message"], t["block"])] = t
        return out


class HistoryIndex:
    """Running totals over one thread's stored messages, so a request's view can count the
    history blocks a summary replaced instead of building a row for each (after many
    compactions nearly all of a long session's history is replaced at every request).

    Built once per thread's message list and reused by every request of it: the list of a
    stored session never changes.
    """

    def __init__(
        self, messages: list[dict[str, Any]], counter: TiktokenCounter | None = None
    ) -> None:
        tokens = [0]
        blocks = [0]
        self.system: list[int] = []
        self.summaries: list[int] = []
        for mi, msg in enumerate(messages):
            n = t = 0
            if msg["role"] == "system":
                self.system.append(mi)
            else:
                if msg["kind"] == "summary":
                    self.summaries.append(mi)
                for block in msg["blocks"]:
                    stored = block.get("tokens")
                    if not isinstance(stored, int):  # stored by messages_json; else counted
                        counter = counter or TiktokenCounter()
                        stored = int(counter.count(block.get("text") or ""))
                    t += stored
                n = len(msg["blocks"])
            tokens.append(tokens[-1] + t)
            blocks.append(blocks[-1] + n)
        self.tokens = tokens
        self.blocks = blocks

    def replaced(self, limit: int, keep: set[int]) -> tuple[int, int]:
        """(blocks, stored tokens) of the non-system messages before ``limit``, ``keep`` (the
        messages listed as rows anyway) left out."""
        rows, tokens = self.blocks[limit], self.tokens[limit]
        for mi in keep:
            if mi < limit:
                rows -= self.blocks[mi + 1] - self.blocks[mi]
                tokens -= self.tokens[mi + 1] - self.tokens[mi]
        return rows, tokens


def side_by_side(
    messages: list[dict[str, Any]],
    result: dict[str, Any],
    request_index: int,
    *,
    transforms: TransformIndex | None = None,
    history: HistoryIndex | None = None,
    list_replaced_from: int | None = None,
) -> dict[str, Any]:
    """Aligned rows of the full history and the model view for one request.

    ``messages`` are the request's thread messages (from ``messages_json``); ``result`` is the
    replay JSON. Each row is one block: ``repl`` is what the history holds, ``model`` what the
    model saw (None when it was not sent), ``badge`` says why they differ. Synthetic messages
    (a summary, restored files) come first, as rows without a history side.

    With ``history`` (the thread's ``HistoryIndex``), the history blocks a summary replaced
    (badge "summarized", no model side) of messages before ``list_replaced_from`` (default: all
    of them) get no rows: ``omitted`` gives their count and stored tokens instead.
    """
    requests = result["requests"]
    # a request's index is its position in a stored result; anything else is looked for
    request: dict[str, Any] | None = (
        requests[request_index]
        if 0 <= request_index < len(requests) and requests[request_index]["index"] == request_index
        else next((r for r in requests if r["index"] == request_index), None)
    )
    if request is None:
        raise KeyError(f"no request {request_index}")
    thread = request["thread"]
    k = request["thread_request"]
    index = transforms or TransformIndex(result["views"]["transforms"], thread)
    active = index.active(k)
    head = request["view"]["head"]
    synthetic = {s["id"]: s for s in result["views"]["synthetic"] if s["id"] in head}
    view = request["view"]
    start, end = view["start"], view["end"]
    whatif = result["session"].get("mode") == "whatif"
    head_messages = {int(ref[2:]) for ref in view["head"] if ref.startswith("m:")}
    head_synthetic = [synthetic[ref] for ref in view["head"] if ref.startswith("s:")]
    rows: list[dict[str, Any]] = []
    omitted = {"rows": 0, "tokens": 0}
    listed: Any = range(0, end)
    if history is not None:
        # messages before ``limit`` give replaced rows only, except system markers, the
        # summary head's messages and (what-if) summaries, which are listed as rows
        limit = max(0, min(start, end, start if list_replaced_from is None else list_replaced_from))
        keep = {mi for mi in head_messages if mi < limit}
        if whatif:
            keep.update(mi for mi in history.summaries[: bisect_left(history.summaries, limit)])
        omitted["rows"], omitted["tokens"] = history.replaced(limit, keep)
        system = history.system[: bisect_left(history.system, limit)]
        listed = [*sorted(keep.union(system)), *range(limit, end)]
    for mi in listed:
        if mi == start:
            rows.extend(_synthetic_row(syn) for syn in head_synthetic)
        msg = messages[mi]
        if msg["role"] == "system":
            # an adapter may say in words what its marker was (Codex: the inferred trigger)
            label = (msg.get("metadata") or {}).get("label")
            rows.append(
                {
                    "message": mi,
                    "block": 0,
                    "role": "system",
                    "kind": msg["kind"],
                    "repl": {
                        "type": "marker",
                        "text": label if isinstance(label, str) else msg["kind"].replace("_", " "),
                    },
                    "model": None,
                    "badge": "boundary",
                    "metadata": msg.get("metadata"),
                }
            )
            continue
        whole = active.get((mi, -1))
        for bj, block in enumerate(msg["blocks"]):
            base = {"type": block["type"], "text": block["text"]}
            if whatif and block.get("persisted") and msg.get("original_output"):
                base = {"type": block["type"], "text": msg["original_output"]}
            if whatif and msg["kind"] == "summary":
                rows.append(_row(msg, bj, block, None, "boundary"))
            elif mi in head_messages:
                rows.append(_row(msg, bj, block, base, "summarized"))
            elif mi < start:
                rows.append(_row(msg, bj, block, None, "summarized"))
            elif whole is not None:
                badge = BADGES.get(whole["kind"], whole["kind"])
                model = (
                    {"type": "text", "text": whole["text"]}
                    if whole.get("text") is not None and bj == 0
                    else None
                )
                rows.append(_row(msg, bj, block, model, badge, whole))
            elif (ov := active.get((mi, bj))) is not None:
                model = {"type": block["type"], "text": ov.get("text", "")}
                rows.append(_row(msg, bj, block, model, BADGES.get(ov["kind"], ov["kind"]), ov))
            elif block.get("persisted") and not whatif:
                rows.append(_row(msg, bj, block, base, "persisted"))
            else:
                rows.append(_row(msg, bj, block, base, "intact"))
    if start >= end:
        rows.extend(_synthetic_row(syn) for syn in head_synthetic)
    _mark_cache(rows, request.get("cache") or {})
    rows[0:0] = _anchored_rows(request)
    return {"request": request, "rows": rows, "start": start, "end": end, "omitted": omitted}


def _anchored_rows(request: dict[str, Any]) -> list[dict[str, Any]]:
    """What the model was sent that no record shows, sized from the recorded usage: first, as
    they sit in the prompt (with the unseen prefix, whose cache status they share)."""
    cache = request.get("cache") or {}
    status = "read" if int(cache.get("hit_blocks") or 0) >= PREFIX_BLOCKS else "write"
    spans = [
        (
            "earlier_history",
            int(request.get("earlier_history_tokens") or 0),
            "earlier history not in this file (the file continues another conversation)",
        ),
        (
            "unrecorded",
            int(request.get("unrecorded_tokens") or 0),
            "unrecorded input (hook output, attachments or restored files the transcript "
            "does not write down)",
        ),
    ]
    return [
        {
            "message": None,
            "block": 0,
            "role": "user",
            "kind": kind,
            "repl": None,
            "model": {"type": "marker", "text": f"{label}: ≈{tokens:,} tokens, from the usage"},
            "badge": "anchored",
            "anchored": {"tokens": tokens, "modeled": True},
            "cache": status,
        }
        for kind, tokens, label in spans
        if tokens > 0
    ]


#: blocks before the messages: the unseen prefix (tools + system) and the user context
PREFIX_BLOCKS = 2


def _mark_cache(rows: list[dict[str, Any]], cache: dict[str, Any]) -> None:
    """Give each block the model saw its prompt-cache status: read, write or uncached.

    The replay's cache model reads the first ``hit_blocks`` blocks of the prompt and writes up to
    the last breakpoint (the last block), so a block's position in the prompt decides.
    """
    hit = int(cache.get("hit_blocks") or 0)
    total = int(cache.get("blocks") or 0)
    cached = cache.get("reason") not in ("below_minimum", "no_breakpoint", "caching_off")
    position = PREFIX_BLOCKS
    for row in rows:
        if row.get("model") is None:
            continue
        if not cached:
            row["cache"] = "uncached"
        elif position < hit:
            row["cache"] = "read"
        elif position < total:
            row["cache"] = "write"
        else:
            row["cache"] = "uncached"
        position += 1


def _synthetic_row(syn: dict[str, Any]) -> dict[str, Any]:
    return {
        "message": None,
        "block": 0,
        "role": syn["role"],
        "kind": syn["kind"],
        "repl": None,
        "model": {"type": "text", "text": syn["text"]},
        "badge": "summarized" if syn["kind"] == "summary" else "restored",
        "synthetic": {k: v for k, v in syn.items() if k != "text"},
    }


def _row(
    msg: dict[str, Any],
    bj: int,
    block: dict[str, Any],
    model: dict[str, Any] | None,
    badge: str,
    transform: dict[str, Any] | None = None,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "message": msg["index"],
        "block": bj,
        "role": msg["role"],
        "kind": msg["kind"],
        "repl": {"type": block["type"], "text": block["text"], "tool_name": block.get("tool_name")},
        "model": model,
        "badge": badge,
    }
    if transform is not None:
        row["transform"] = {k: v for k, v in transform.items() if k != "text"}
    if badge == "persisted" and msg.get("original_output"):
        row["original"] = msg["original_output"]
    return row
