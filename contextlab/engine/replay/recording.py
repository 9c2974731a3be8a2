"""What a thread's transcript holds that a replay sets aside or puts back.

Both modes hide a recorded summary's own position when the messages its compaction kept come
before it (they lead the view's head instead). A what-if replay starts from the raw
conversation: the recorded compaction artifacts (boundaries, summaries) are hidden and the
original tool output comes back where the model saw a persisted preview; where the recording
compacted is kept, so a what-if replay can reuse the recorded summary and Claude Code's own
count there.
"""

from __future__ import annotations

from contextlab.engine.input.model import Block
from contextlab.engine.input.session import RequestInfo, Session, Thread
from contextlab.engine.pipeline.boundary import preserved_before_boundary, preserved_head


class RecordedHistory:
    """A thread's recording as the replay uses it (a plain class: see ``state``)."""

    __slots__ = ("hidden", "kept_after", "pre_tokens", "preserved", "restored", "summaries")

    def __init__(self) -> None:
        #: message indices left out of the view
        self.hidden: set[int] = set()
        #: (message, block) → the original tool output a persisted preview stood for (what-if)
        self.restored: dict[tuple[int, int], str] = {}
        #: request index → message index of a recorded summary (what-if may reuse it there)
        self.summaries: dict[int, int] = {}
        #: request index → Claude Code's own count where it compacted (``preTokens``)
        self.pre_tokens: dict[int, int] = {}
        #: message index of a recorded summary → the first message its compaction kept
        self.preserved: dict[int, int] = {}
        #: message index of a recorded summary → the copies of earlier history its compaction
        #: sent after it (Codex's ``replacement_history``), hidden in what-if
        self.kept_after: dict[int, list[int]] = {}

    def base_text(self, i: int, j: int, block: Block) -> str | None:
        """The text block ``j`` of message ``i`` starts from when it is not the recorded one."""
        if not self.restored:
            return None
        return self.restored.get((i, j))


def read_recording(
    session: Session, thread: Thread, requests: list[RequestInfo], mode: str
) -> RecordedHistory:
    """What ``mode`` sets aside or puts back of ``thread``'s recording."""
    recording = RecordedHistory()
    # A summary whose kept messages precede its boundary leads them from the view's head;
    # its own position is hidden (both modes: a /compact stays in what-if too).
    recording.hidden.update(preserved_before_boundary(thread.messages))
    if mode == "whatif":
        _raw_conversation(session, thread, requests, recording)
    return recording


def _raw_conversation(
    session: Session, thread: Thread, requests: list[RequestInfo], recording: RecordedHistory
) -> None:
    """Raw conversation: recorded compaction artifacts out, original tool output back."""
    upload = session.upload
    summaries: dict[int, int] = {}
    pre_tokens: int | None = None
    manual = False
    last_summary: int | None = None
    for i, msg in enumerate(thread.messages):
        if msg.metadata.get("compaction_kept") and last_summary is not None:
            # history a recorded compaction sent again (Codex): what-if has the original
            recording.hidden.add(i)
            recording.kept_after.setdefault(last_summary, []).append(i)
            continue
        if msg.kind == "compact_boundary" and msg.metadata.get("trigger") == "manual":
            # a /compact the user typed is part of the conversation, not a pipeline decision
            manual = True
            last_summary = None
        elif msg.kind in ("compact_boundary", "microcompact_boundary", "snip_boundary"):
            manual = False
            last_summary = None
            recording.hidden.add(i)
            if msg.kind == "compact_boundary":
                pre = msg.metadata.get("preTokens")
                pre_tokens = int(pre) if isinstance(pre, int | float) and pre > 0 else None
        elif msg.kind == "summary" and manual:
            manual = False
        elif msg.kind == "summary":
            recording.hidden.add(i)
            last_summary = i
            if i > 0 and thread.messages[i - 1].kind == "compact_boundary":
                kept = preserved_head(thread.messages, i - 1)
                if kept is not None:
                    recording.preserved[i] = kept
            # the request right after a recorded compaction is where it happened
            k = next((r.index for r in requests if r.position > i), None)
            if k is not None:
                summaries[k] = i
                if pre_tokens is not None:
                    recording.pre_tokens[k] = pre_tokens
            pre_tokens = None
        elif msg.kind == "tool_result":
            for j, block in enumerate(msg.blocks):
                if block.type != "tool_result" or not block.text.startswith("<persisted-output>"):
                    continue
                original = None
                if upload is not None and block.tool_use_id:
                    original = upload.read_tool_result(block.tool_use_id)
                if original is None:
                    original = msg.original_output
                if original:
                    recording.restored[(i, j)] = original
    recording.summaries = summaries


def session_dir(session: Session, thread: Thread) -> str:
    """Where Claude Code saved tool results: read off a recorded wrapper when there is one
    (looked up once per thread and length: both passes of a replay, and every config, ask)."""
    key = ("session_dir", thread.id, len(thread.messages))
    found = session.memo.get(key)
    if found is None:
        found = session.memo[key] = _session_dir(session, thread)
    return str(found)


def _session_dir(session: Session, thread: Thread) -> str:
    for msg in thread.messages:
        for block in msg.blocks:
            if block.type == "tool_result" and block.text.startswith("<persisted-output>"):
                marker = "Full output saved to: "
                start = block.text.find(marker)
                end = block.text.find("/tool-results/", start)
                if start >= 0 and end > start:
                    return block.text[start + len(marker) : end]
    sid = session.session_id or "session"
    return f"~/.claude/projects/<project>/{sid}"
