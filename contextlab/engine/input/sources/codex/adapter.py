"""The Codex adapter: recognises a rollout by its content and builds the engine's ``Session``.

The conversation is the stream of response items (``items``); model calls are the
de-duplicated ``token_count`` events (``calls``), each an assistant message holding the output
items of that call, with its recorded figures as usage. A ``compacted`` record is a
``compact_boundary`` (its trigger inferred, and labelled so: rollouts do not say whether the
user asked for it) followed by the summary: the readable ``message`` of a local compaction, or
for a remote one an opaque span (the ``compaction`` item's encrypted content) sized from the
next recorded count; the history it kept (``replacement_history``) follows the summary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from contextlab.engine.input.json_line import decode_json_line
from contextlab.engine.input.loading import Upload, iter_lines
from contextlab.engine.input.model import Block, Message, Problem, ProblemList, TranscriptError
from contextlab.engine.input.rough import block_rough
from contextlab.engine.input.session import Session, SideRecords, Thread, link_tool_results

from .calls import (
    USAGE_KEYS,
    CallFigures,
    TokenCounter,
    carried_in_note,
    usage_gap,
    window_for_version,
)
from .compaction import compaction_kind, inferred_trigger, kept_history
from .history import modeled_kept, rolled_back_branch
from .items import RECORD_TYPES, Item, is_codex_record, item_of
from .lineage import ChildRollout, parent_of


class CodexAdapter:
    """OpenAI Codex CLI rollouts, as a ``sources.SourceAdapter``."""

    name = "codex"
    label = "Codex"

    def detect(self, head: Sequence[Any]) -> float:
        """The share of the first records that are Codex's: ``{type, payload}`` records of
        the rollout types, or an older rollout's header line and bare response items."""
        records = [record for record in head if isinstance(record, dict)]
        if not records:
            return 0.0
        hits = sum(1 for i, record in enumerate(records) if is_codex_record(record, i))
        return hits / len(records)

    def parse(self, upload: Upload) -> Session:
        return RolloutReader(upload).session()


class RolloutReader:
    """Reads one rollout into messages, line by line."""

    def __init__(self, upload: Upload) -> None:
        self.upload = upload
        self.problems = ProblemList(upload.problems)
        self.file = upload.main.name if upload.main else ""
        self.messages: list[Message] = []
        self.counter = TokenCounter()
        self.run: Message | None = None
        self.pending: list[CallFigures] = []
        self.session_id: str | None = None
        self.meta_seen = False
        self.version: str | None = None
        self.cwd: str | None = None
        self.model: str | None = None
        self.window: int | None = None
        self.calls = 0
        self.records = 0
        self.usable = 0
        self.unknown: Counter[str] = Counter()
        self.baseline: int | None = None
        self.opaque: list[Block] = []
        self.opaque_rough = 0
        self.last_boundary: Message | None = None
        #: the context-size count of a remote compaction not yet recorded: later versions
        #: (0.104) write it just before the ``compacted`` record, 0.64 just after
        self.held_marker: CallFigures | None = None
        #: whether a call came after the last compaction (its context-size count, if any more
        #: comes, is then the next compaction's)
        self.called_since_boundary = False
        #: local compactions' summarising calls, as compaction forks of the main thread
        self.forks: list[Thread] = []
        #: a forked or subagent rollout's parent and its copied history (``lineage``)
        self.child: ChildRollout | None = None
        self.copying = False
        #: input tokens the cumulative figures grew by beyond the calls' own
        self.jumped_in = 0
        #: the cumulative usage the rollout's totals start from (a child's parent's), read
        #: from its first own call: its ``total_token_usage`` less its ``last_token_usage``
        self.carried: dict[str, int] | None = None

    # -- reading ---------------------------------------------------------------------------

    def session(self) -> Session:
        main = self.upload.main or next(iter(self.upload.subagents), None)
        if main is None:
            raise TranscriptError("the upload has no rollout file", self.problems)
        self.file = main.name
        for number, text, is_last in iter_lines(main, self.problems):
            self.line(number, text, is_last)
        self.close_run()
        self.flush_pending(self.counter.final_total is not None and self.records)
        for extra in (*self.upload.siblings, *self.upload.subagents):
            if extra is not main:
                self.problem(0, "other_file_ignored", f"{extra.name}: only one rollout is read")
        for kind, count in sorted(self.unknown.items()):
            self.problem(
                0,
                "unknown_codex_shape",
                f"{count} record(s) of a shape this version of ContextLab does not know "
                f"({kind}) kept out of the replay",
            )
        if not self.messages:
            reason = (
                "not a Codex rollout: no conversation item found"
                if not self.usable
                else "no conversation items found in the rollout"
            )
            raise TranscriptError(reason, self.problems)
        threads = [Thread(id="main", kind="main", messages=self.messages, file=self.file)]
        for index, message in enumerate(self.messages):
            message.index = index
        threads += self.forks
        link_tool_results(threads, self.problems)
        side = SideRecords()
        side.recorded_totals = self.own_totals()
        if self.child is not None and self.carried is not None:
            side.recorded_carried = {k: self.carried[k] for k in USAGE_KEYS}
        self.report_lineage()
        self.check_totals()
        return Session(
            name=self.upload.name,
            session_id=self.session_id,
            threads=threads,
            problems=self.problems,
            side=side,
            versions=[self.version] if self.version else [],
            upload=self.upload,
            record_count=self.records,
            agent="codex",
            context_window=self.window or window_for_version(self.version),
        )

    def problem(self, line: int, code: str, message: str, severity: str = "warning") -> None:
        self.problems.append(Problem(line, code, message, self.file, severity))  # type: ignore[arg-type]

    def line(self, number: int, text: str, is_last: bool) -> None:
        try:
            obj, _ = decode_json_line(text)
        except ValueError as exc:
            if is_last and not text.endswith("\n"):
                self.problem(number, "truncated_line", "the last line is cut off (incomplete JSON)")
            else:
                self.problem(number, "invalid_json", f"not valid JSON: {exc}")
            return
        if not isinstance(obj, dict):
            self.problem(number, "not_an_object", f"a JSON {type(obj).__name__}, not a record")
            return
        self.records += 1
        kind = obj.get("type")
        payload = obj.get("payload")
        stamp = obj.get("timestamp")
        if not isinstance(stamp, str):
            stamp = ""
        if isinstance(kind, str) and kind in RECORD_TYPES and isinstance(payload, dict):
            self.usable += 1
            if self.child is not None and kind != "session_meta":
                self.copying = self.child.copied(kind, payload, stamp)
            # the two record types of almost every line first, without a call between
            if kind == "response_item":
                self.response_item(number, payload, stamp)
            elif kind == "event_msg" and payload.get("type") == "token_count":
                self.token_count(number, payload.get("info"), stamp)
            else:
                self.record(number, kind, payload, stamp)
        elif kind is None and self.records == 1 and isinstance(obj.get("id"), str):
            self.usable += 1  # the older rollouts' header line
            self.meta(obj)
        elif obj.get("record_type") == "state":
            self.usable += 1
        elif isinstance(kind, str) and "payload" not in obj:
            self.usable += 1
            self.response_item(number, obj, stamp)
        else:
            self.unknown[f"record type {kind!r}" if isinstance(kind, str) else "no type"] += 1

    def record(self, number: int, kind: str, payload: dict[str, Any], stamp: str) -> None:
        if kind == "session_meta":
            self.meta(payload, stamp)
        elif kind == "turn_context":
            model = payload.get("model")
            if isinstance(model, str) and model:
                self.model = model
            cwd = payload.get("cwd")
            if isinstance(cwd, str):
                self.cwd = cwd
        elif kind == "compacted":
            self.compacted(number, payload, stamp)
        elif kind == "event_msg":  # (``line`` reads response items and token counts itself)
            event = payload.get("type")
            if event == "thread_rolled_back":
                self.roll_back(number, payload.get("num_turns"))
            elif not isinstance(event, str):  # a list or object is no type (nor hashable)
                self.unknown["event without a type"] += 1

    def meta(self, payload: dict[str, Any], stamp: str = "") -> None:
        # the first session_meta is the rollout's own: a fork writes its parent's again among
        # the records it copies, whose version and parent are the parent's
        first = not self.meta_seen
        self.meta_seen = True
        own_id = payload.get("id", payload.get("session_id"))  # 0.15x: session_id beside id
        if self.session_id is None and isinstance(own_id, str):
            self.session_id = own_id
        parent = parent_of(payload) if first and not self.messages else None
        if parent is not None:
            start = stamp or _text(payload.get("timestamp"))
            self.child = ChildRollout(parent, start, self.upload.siblings)
        version = payload.get("cli_version")
        if isinstance(version, str) and version and (first or self.version is None):
            self.version = version
        if self.cwd is None and isinstance(payload.get("cwd"), str):
            self.cwd = payload["cwd"]
        model = payload.get("model")
        if self.model is None and isinstance(model, str):
            self.model = model

    # -- items -----------------------------------------------------------------------------

    def response_item(self, number: int, payload: dict[str, Any], stamp: str) -> None:
        item = item_of(payload)
        if item is None:
            return
        if isinstance(item, str):
            self.unknown[f"response item {item!r}"] += 1
            return
        for part in item.unknown_parts:
            self.unknown[f"content part {part!r}"] += 1
        if self.copying:
            self.close_run()
            self.append(self.copied_message(item, number, stamp))
            return
        if item.side == "assistant":
            if self.run is None:
                self.run = self.new_call(
                    number, stamp, self.pending.pop(0) if self.pending else None
                )
            self.run.blocks.extend(item.blocks)
            return
        self.run = None  # (``close_run``, inline: this runs for every other item)
        if self.pending:
            self.flush_pending(True)
        message = self.user_message(item, number, stamp)
        message.index = len(self.messages)  # (``append``, inline)
        self.messages.append(message)

    def copied_message(self, item: Item, number: int, stamp: str) -> Message:
        """An item of the parent's history, copied: context the rollout's calls were sent,
        never a call of its own (its tool calls and outputs as text, paired in the parent)."""
        blocks = [
            Block("text", b.text) if b.type in ("tool_use", "tool_result") else b
            for b in item.blocks
        ]
        copied = {"copied_from_parent": self.child.parent.id if self.child else None}
        return self.history_message(blocks, number, stamp, copied)

    def history_message(
        self,
        blocks: list[Block],
        number: int,
        stamp: str,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        """Context the model was sent that is no call of this rollout's (a compaction's kept
        history, a parent's copied history): a meta message, never a request."""
        return Message(
            uuid=f"codex:{number}:{len(self.messages)}",
            role="user",
            kind="meta",
            blocks=blocks,
            timestamp=stamp,
            line=number,
            file=self.file,
            version=self.version,
            cwd=self.cwd,
            is_meta=True,
            metadata=metadata or {},
        )

    def append(self, message: Message) -> None:
        message.index = len(self.messages)
        self.messages.append(message)

    def user_message(self, item: Item, number: int, stamp: str) -> Message:
        injected = item.injected
        kind = "tool_result" if item.side == "tool_output" else "meta" if injected else "prompt"
        # positional (the fields' order: tests/engine/test_codex.py): keywords cost half of it
        return Message(
            f"codex:{number}:{len(self.messages)}",
            "user",
            kind,  # type: ignore[arg-type]
            item.blocks,
            stamp,
            number,
            self.file,
            *(None, None, None, None),  # message_id, request_id, model, usage
            self.version,
            self.cwd,
            injected,
        )

    def new_call(self, number: int, stamp: str, figures: CallFigures | None) -> Message:
        self.calls += 1
        message = Message(  # positional, as in ``user_message``
            f"codex:{number}:{len(self.messages)}",
            "assistant",
            "assistant",
            [],
            stamp,
            number,
            self.file,
            f"call-{self.calls}",
            None,
            self.model,
            None,
            self.version,
            self.cwd,
        )
        self.append(message)
        if figures is not None:
            self.give(message, figures)
        return message

    def give(self, message: Message, figures: CallFigures) -> None:
        message.usage = figures.usage()
        message.metadata["reasoning_output_tokens"] = figures.reasoning
        message.metadata["usage_line"] = figures.line
        if figures.window:
            message.metadata["model_context_window"] = figures.window
        if self.baseline is None:
            seen = sum(len(b.text) for m in self.messages[:-1] for b in m.blocks)
            self.baseline = max(0, figures.input - seen // 4)
        self.size_opaque(figures.input)

    def close_run(self) -> None:
        self.run = None

    def flush_pending(self, flush: Any) -> None:
        """Calls whose output items the rollout does not hold (a local compaction's
        summarising call, an aborted call): empty assistant messages, where they happened."""
        if not flush:
            return
        while self.pending:
            figures = self.pending.pop(0)
            call = self.new_call(figures.line, figures.timestamp, figures)
            call.metadata["no_output_items"] = True

    def token_count(self, number: int, info: Any, stamp: str) -> None:
        figures = self.counter.read(info, number, stamp)
        if figures is None:
            return
        if figures.window:
            self.window = figures.window
        if self.copying and self.child is not None:
            self.child.counts += not figures.is_context_marker
            return  # the parent's call, counted in the parent's rollout
        if figures.is_context_marker:
            boundary = self.last_boundary
            if boundary is None or self.called_since_boundary or "postTokens" in boundary.metadata:
                self.held_marker = figures  # the count of a compaction whose record comes next
            else:
                self.context_after(boundary, figures)
            return
        self.jumped_in += figures.jump
        if self.carried is None:
            self.carried = figures.carried()
        self.held_marker = None
        self.called_since_boundary = True
        if self.run is not None and self.run.usage is None:
            self.give(self.run, figures)
            return
        self.close_run()
        last = next((m for m in reversed(self.messages) if m.role == "assistant"), None)
        after_last = (
            last is not None
            and last.usage is None
            and not self.pending
            and all(m.kind == "tool_result" for m in self.messages[last.index + 1 :])
            if last is not None
            else False
        )
        if after_last and last is not None:
            self.give(last, figures)
        else:
            self.pending.append(figures)

    # -- compaction ------------------------------------------------------------------------

    def compacted(self, number: int, payload: dict[str, Any], stamp: str) -> None:
        """A ``compacted`` record: boundary, summary, then the history it kept."""
        before = self.messages[-1] if self.messages else None
        self.close_run()
        self.flush_pending(True)
        summary_text = _text(payload.get("message"))
        history = payload.get("replacement_history")
        kept, opaque_bytes, unknown = kept_history(history)
        for kind in unknown:
            self.unknown[f"kept item {kind!r}"] += 1
        kind = compaction_kind(payload, summary_text, opaque_bytes)
        remote = kind != "local"
        last_call = next(
            (m for m in reversed(self.messages) if m.role == "assistant" and m.usage), None
        )
        pre = (
            last_call.usage.prompt_total + last_call.usage.output
            if last_call and last_call.usage
            else 0
        )
        # what the replay's compaction decides on, as for Claude Code's preTokens: the last
        # usage plus the rough estimate of what came after it (the tool outputs since), so a
        # limit inferred from it compacts where the recording did
        after = self.messages[last_call.index + 1 :] if last_call is not None else []
        decided = pre + sum(block_rough(b) for m in after for b in m.blocks)
        if not remote:
            self.fork_summarizer(summary_text, number, stamp)
        trigger, reason, label = inferred_trigger(before, pre, self.window or 0, kind)
        boundary = Message(
            uuid=f"codex:{number}:boundary",
            role="system",
            kind="compact_boundary",
            blocks=[Block("text", label)],
            timestamp=stamp,
            line=number,
            file=self.file,
            version=self.version,
            cwd=self.cwd,
            metadata={
                "trigger": trigger,
                "trigger_inferred": True,
                "trigger_reason": f"inferred: {reason}",
                "label": label,
                "preTokens": decided,
                "pre_recorded": pre,
                "codex_compaction": kind,
                "kept_items": len(kept),
                "kept_modeled": not isinstance(history, list),
            },
        )
        self.append(boundary)
        self.last_boundary = boundary
        self.called_since_boundary = False
        kept_texts = [b.text for item in kept for b in item.blocks]
        if kind == "new_window":
            block = Block("text", "")  # a new window writes no summary
        elif remote:
            note = f"[compaction summary: {opaque_bytes:,} bytes of encrypted content]"
            block = Block("text", note)
            block.data = {"opaque": True, "encrypted_bytes": opaque_bytes}
            self.opaque = [block]
            self.opaque_rough = sum(len(t) for t in kept_texts) // 4
        elif any(summary_text[:200] in text for text in kept_texts):
            block = Block("text", "")  # the summary is among the kept items
        else:
            block = Block("text", summary_text)
        self.append(
            Message(
                uuid=f"codex:{number}:summary",
                role="user",
                kind="summary",
                blocks=[block],
                timestamp=stamp,
                line=number,
                file=self.file,
                version=self.version,
                cwd=self.cwd,
                metadata={"opaque": kind == "remote"},
            )
        )
        if self.held_marker is not None:
            self.context_after(boundary, self.held_marker)
            self.held_marker = None
        if not isinstance(history, list):
            kept = modeled_kept(self.messages, boundary.index)
        for item in kept:  # copies of earlier history: a what-if sets them aside
            copy = self.kept_call(item, number, stamp) if item.side == "assistant" else None
            copy = copy or self.user_message(item, number, stamp)
            copy.metadata["compaction_kept"] = True
            self.append(copy)

    def fork_summarizer(self, summary: str, number: int, stamp: str) -> None:
        """A local compaction's summarising call (the call just before it, with no output
        items of its own) as a compaction fork: the main conversation up to it, Codex's
        compaction prompt (not in the rollout: an empty placeholder) and the summary as its
        reply, as Claude Code's compaction fork is. It leaves the main thread's requests."""
        if not self.messages or not self.messages[-1].metadata.get("no_output_items"):
            return
        call = self.messages.pop()
        at = len(self.messages)
        prompt = Message(
            uuid=f"codex:{number}:compaction-prompt",
            role="user",
            kind="meta",
            blocks=[Block("text", "")],
            timestamp=stamp,
            line=number,
            file=self.file,
            version=self.version,
            is_meta=True,
            metadata={"codex_compaction_prompt": "not recorded in the rollout"},
            index=at,
        )
        call.blocks = [Block("text", summary)]
        call.index = at + 1
        call.metadata["compaction_call"] = True
        self.forks.append(
            Thread(
                id=f"compaction-{len(self.forks) + 1}",
                kind="subagent",
                messages=[*self.messages, prompt, call],
                file=self.file,
                fork_index=at,
                compaction_fork=True,
            )
        )

    def kept_call(self, item: Item, number: int, stamp: str) -> Message:
        """An assistant item a compaction kept: history, not a call (no request of its own)."""
        return self.history_message([Block("text", b.text) for b in item.blocks], number, stamp)

    def roll_back(self, number: int, num_turns: object) -> None:
        """A ``thread_rolled_back`` event: the turns it removed leave for a branch of their own."""
        self.close_run()
        self.flush_pending(True)
        branch_id = f"rolled-back-{len(self.forks) + 1}"
        branch, note = rolled_back_branch(self.messages, num_turns, branch_id, self.file)
        self.forks += [branch] if branch else []
        self.problem(number, "rolled_back" if branch else "rollback_not_applied", note, "info")

    def context_after(self, boundary: Message, marker: CallFigures) -> None:
        """A remote compaction's context-size count, as recorded. Codex's own estimate of the
        kept history: above the window where the kept user messages hold images (counted by
        their bytes, 0.104), where the opaque summary is sized from the next call instead."""
        boundary.metadata["postTokens"] = marker.total
        window = marker.window or self.window
        if window and marker.total > window:
            boundary.metadata["postTokens_over_window"] = True
            return
        self.size_opaque(marker.total)

    def size_opaque(self, context: int) -> None:
        """Size a remote compaction's opaque summary from the first count after it: the
        context then, less what the session sends before any message (the first call's input
        less its messages, roughly) and the kept history (roughly)."""
        if not self.opaque:
            return
        baseline = self.baseline or 0
        for block in self.opaque:
            block.tok = max(0, context - baseline - self.opaque_rough)
            block.rough = block.tok
            block.data["sized_from"] = context
        self.opaque = []

    def own_totals(self) -> dict[str, int] | None:
        """The session's totals: the final ``total_token_usage``, less, for a forked or
        subagent rollout, what it carried from its parent."""
        final = self.counter.final_total
        if final is None or self.child is None or self.carried is None:
            return final
        return {k: max(0, v - self.carried.get(k, 0)) for k, v in final.items()}

    def report_lineage(self) -> None:
        if self.child is None:
            if self.jumped_in:
                self.problem(0, "totals_carried_in", carried_in_note(self.jumped_in), "info")
            return
        carried = (self.carried or {}).get("input_tokens", 0)
        self.problem(0, "copied_parent_history", self.child.note(carried), "info")

    def check_totals(self) -> None:
        """The calls' figures should add up to the file's final cumulative totals."""
        final = self.own_totals()
        if final is None:
            if self.calls:
                self.problem(0, "no_token_counts", "the rollout records no token counts", "info")
            return
        forks = (m for fork in self.forks for m in fork.messages[fork.fork_index :])
        calls = [m.usage for m in (*self.messages, *forks) if m.role == "assistant" and m.usage]
        gap = usage_gap(final, calls)
        if gap:
            self.problem(0, "usage_gap", gap, "info")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
