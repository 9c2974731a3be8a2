"""Turn transcript lines into records, then records into threads (the chains the model saw).

Claude Code writes a tree: ``parentUuid`` links records; parallel tool results hang on side
branches; compact boundaries start new roots linked back by ``logicalParentUuid``; one API
response is split over several records sharing ``message.id``. ``build_session`` rebuilds the
active main chain, abandoned branches that made requests, inline sidechains and subagent files.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .attachments import render_attachment
from .input.jsutil import json_stringify
from .input.loading import (
    EarlierUpload,
    ProblemList,
    TranscriptFile,
    Upload,
    decode_json_line,
    iter_lines,
    open_upload_chain,
)
from .input.model import Block, Iteration, Message, MessageKind, Problem, TranscriptError, Usage

#: A usage count above this is garbage (the largest context window is 1M tokens); it also keeps
#: every sum of counts inside a 32-bit database column.
MAX_USAGE_TOKENS = 100_000_000
CONVERSATION_TYPES = frozenset({"user", "assistant", "system", "progress", "attachment"})
#: side records: known, carry no model context
SIDE_TYPES = frozenset(
    {
        "summary",
        "file-history-snapshot",
        "file-history-delta",
        "queue-operation",
        "pr-link",
        "ai-title",
        "custom-title",
        "last-prompt",
        "task-summary",
        "tag",
        "agent-name",
        "agent-color",
        "agent-setting",
        "mode",
        "permission-mode",
        "worktree-state",
        "attribution-snapshot",
        "speculation-accept",
        "atis-latch",
        "bridge-session",
        "frame-link",
        "relocated",
    }
)
#: side records the pipeline replays
PIPELINE_SIDE_TYPES = frozenset(
    {"content-replacement", "marble-origami-commit", "marble-origami-snapshot"}
)
#: system subtypes that are model context or pipeline markers
KEPT_SYSTEM_SUBTYPES = frozenset(
    {"compact_boundary", "microcompact_boundary", "snip_boundary", "local_command"}
)
SYNTHETIC_MODEL = "<synthetic>"
PERSISTED_TAG = "<persisted-output>"


@dataclass(slots=True)
class Record:
    """A conversation record, reduced to what chain building and the pipeline need."""

    line: int
    file: str
    type: str
    uuid: str
    parent: str | None
    logical_parent: str | None = None
    subtype: str | None = None
    is_sidechain: bool = False
    message: Message | None = None
    source_assistant: str | None = None
    synthetic: bool = False


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
    #: continuing this session can hang from
    record_uuids: frozenset[str] = frozenset()
    #: results derived from the session alone, reused by later replays in this process
    memo: dict[Any, Any] = field(default_factory=dict)

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


class _FileParser:
    """Parses one JSONL stream into records, reporting problems instead of raising."""

    def __init__(self, tfile: TranscriptFile, problems: list[Problem], side: SideRecords) -> None:
        self.tfile = tfile
        self.problems = problems
        self.side = side
        self.records: list[Record] = []
        self.versions: list[str] = []
        self.session_id: str | None = None
        self.usable = 0
        self.unknown_types: dict[str, int] = {}
        #: attachment types this version of ContextLab cannot render, counted as their JSON
        self.unknown_attachments: dict[str, int] = {}

    def problem(self, line: int, code: str, message: str, severity: str = "warning") -> None:
        self.problems.append(Problem(line, code, message, self.tfile.name, severity))  # type: ignore[arg-type]

    def parse(self) -> None:
        for number, text, is_last in iter_lines(self.tfile, self.problems):
            try:
                obj, replaced = decode_json_line(text)
            except ValueError as exc:
                if is_last and not text.endswith("\n"):
                    self.problem(
                        number, "truncated_line", "the last line is cut off (incomplete JSON)"
                    )
                else:
                    self.problem(number, "invalid_json", f"not valid JSON: {_json_reason(exc)}")
                continue
            if not isinstance(obj, dict):
                self.problem(
                    number, "not_an_object", f"a JSON {type(obj).__name__}, not a record object"
                )
                continue
            if replaced:
                self.problem(
                    number,
                    "replaced_characters",
                    f"{replaced} NUL or lone-surrogate character(s) replaced with U+FFFD",
                    "info",
                )
            self.record(number, obj)
        for rtype, count in sorted(self.unknown_types.items()):
            self.problem(
                0,
                "unknown_record_type",
                f"{count} record(s) of unknown type {rtype!r} kept out of the replay",
                "info",
            )
        for kind, count in sorted(self.unknown_attachments.items()):
            self.problem(
                0,
                "unknown_attachment_type",
                f"{count} attachment(s) of type {kind!r} that ContextLab does not know how Claude "
                "Code renders: counted as their JSON",
                "info",
            )

    def record(self, number: int, obj: dict[str, Any]) -> None:
        rtype = obj.get("type")
        if not isinstance(rtype, str):
            self.problem(number, "missing_type", "record has no string 'type' field")
            return
        if rtype == "cost-state":
            self.usable += 1
            self.cost_state(number, obj)
            return
        if rtype in SIDE_TYPES:
            self.usable += 1
            if rtype in ("summary", "ai-title", "custom-title"):
                title = obj.get("summary") or obj.get("aiTitle") or obj.get("customTitle")
                if isinstance(title, str) and title.strip():
                    self.side.titles.append((rtype, title.strip()))
            return
        if rtype in PIPELINE_SIDE_TYPES:
            self.usable += 1
            self.pipeline_side(number, rtype, obj)
            return
        if rtype not in CONVERSATION_TYPES:
            self.unknown_types[rtype] = self.unknown_types.get(rtype, 0) + 1
            return
        uuid = obj.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            self.problem(number, "missing_uuid", f"{rtype} record without a uuid")
            return
        parent = obj.get("parentUuid")
        if parent is not None and not isinstance(parent, str):
            self.problem(number, "bad_field", "parentUuid is not a string; treated as a root")
            parent = None
        version = obj.get("version")
        if isinstance(version, str) and version not in self.versions:
            self.versions.append(version)
        sid = obj.get("sessionId")
        if isinstance(sid, str) and self.session_id is None:
            self.session_id = sid
        logical = obj.get("logicalParentUuid")
        rec = Record(
            line=number,
            file=self.tfile.name,
            type=rtype,
            uuid=uuid,
            parent=parent,
            logical_parent=logical if isinstance(logical, str) else None,
            subtype=obj.get("subtype") if isinstance(obj.get("subtype"), str) else None,
            is_sidechain=obj.get("isSidechain") is True,
        )
        src = obj.get("sourceToolAssistantUUID")
        if isinstance(src, str):
            rec.source_assistant = src
        if rtype in ("user", "assistant"):
            message = self.message(number, rtype, obj)
            if message is None:
                rec.type = "progress"  # keep it as a link so the chain is not cut
            else:
                if rtype == "assistant" and message.model == SYNTHETIC_MODEL:
                    rec.synthetic = True
                rec.message = message
        elif rtype == "system" and rec.subtype in KEPT_SYSTEM_SUBTYPES:
            rec.message = self.system_message(number, obj, rec.subtype)
        elif rtype == "attachment":
            rec.message = self.attachment_message(number, obj)
        self.records.append(rec)
        self.usable += 1

    def cost_state(self, number: int, obj: dict[str, Any]) -> None:
        """``cost-state``: Claude Code's running cost of the session (the newest one wins)."""
        total = obj.get("totalCostUSD")
        if (
            isinstance(total, int | float)
            and not isinstance(total, bool)
            and math.isfinite(total)
            and total >= 0
        ):
            self.side.claude_code_cost_usd = float(total)
        else:
            self.problem(number, "bad_field", "cost-state without a numeric totalCostUSD; ignored")

    def pipeline_side(self, number: int, rtype: str, obj: dict[str, Any]) -> None:
        if rtype == "content-replacement":
            items = obj.get("replacements")
            if not isinstance(items, list):
                self.problem(number, "bad_field", "content-replacement without a replacements list")
                return
            for item in items:
                if (
                    isinstance(item, dict)
                    and isinstance(item.get("toolUseId"), str)
                    and isinstance(item.get("replacement"), str)
                ):
                    self.side.content_replacements[item["toolUseId"]] = item["replacement"]
        elif rtype == "marble-origami-commit":
            needed = ("summaryUuid", "summaryContent", "firstArchivedUuid", "lastArchivedUuid")
            if all(isinstance(obj.get(k), str) for k in needed):
                self.side.collapse_commits.append({**obj, "line": number})
            else:
                self.problem(
                    number, "bad_field", "marble-origami-commit misses span fields; skipped"
                )
        else:
            self.side.collapse_snapshot = obj

    def message(self, number: int, rtype: str, obj: dict[str, Any]) -> Message | None:
        raw = obj.get("message")
        if not isinstance(raw, dict):
            self.problem(number, "bad_field", f"{rtype} record without a message object; skipped")
            return None
        content = raw.get("content")
        blocks: list[Block]
        string_content = False
        if isinstance(content, str):
            blocks = [Block("text", content)]
            string_content = True
        elif isinstance(content, list):
            blocks = [b for b in (self.block(number, item) for item in content) if b is not None]
        elif content is None:
            blocks = []
        else:
            self.problem(
                number,
                "bad_field",
                f"message.content is a {type(content).__name__}; treated as empty",
            )
            blocks = []
        timestamp = obj.get("timestamp") if isinstance(obj.get("timestamp"), str) else ""
        common: dict[str, Any] = {
            "uuid": obj["uuid"],
            "timestamp": timestamp,
            "line": number,
            "file": self.tfile.name,
            "version": obj.get("version") if isinstance(obj.get("version"), str) else None,
            "cwd": obj.get("cwd") if isinstance(obj.get("cwd"), str) else None,
            "is_meta": obj.get("isMeta") is True,
            "is_sidechain": obj.get("isSidechain") is True,
            "agent_id": obj.get("agentId") if isinstance(obj.get("agentId"), str) else None,
            "uuids": [obj["uuid"]],
            "string_content": string_content,
        }
        if rtype == "assistant":
            mid = raw.get("id")
            model = raw.get("model") if isinstance(raw.get("model"), str) else None
            return Message(
                role="assistant",
                kind="assistant",
                blocks=blocks,
                message_id=mid if isinstance(mid, str) and mid else f"uuid:{obj['uuid']}",
                request_id=obj.get("requestId") if isinstance(obj.get("requestId"), str) else None,
                model=model,
                usage=self.usage(number, raw.get("usage")),
                **common,
            )
        kind: MessageKind
        if obj.get("isCompactSummary") is True:
            kind = "summary"
        elif any(b.type == "tool_result" for b in blocks):
            kind = "tool_result"
        elif common["is_meta"]:
            kind = "meta"
        elif string_content and isinstance(content, str) and _is_command_text(content):
            kind = "command"
        else:
            kind = "prompt"
        message = Message(role="user", kind=kind, blocks=blocks, **common)
        if kind == "tool_result":
            message.original_output = self.original_output(blocks, obj.get("toolUseResult"))
        return message

    def original_output(self, blocks: list[Block], tool_use_result: Any) -> str | None:
        """Keep the raw tool output only where the model saw a persisted preview of it."""
        if not any(b.type == "tool_result" and b.text.startswith(PERSISTED_TAG) for b in blocks):
            return None
        if isinstance(tool_use_result, dict):
            for key in ("stdout", "content", "output"):
                value = tool_use_result.get(key)
                if isinstance(value, str) and value:
                    stderr = tool_use_result.get("stderr")
                    if key == "stdout" and isinstance(stderr, str) and stderr:
                        return value + "\n" + stderr
                    return value
            file = tool_use_result.get("file")
            if isinstance(file, dict) and isinstance(file.get("content"), str):
                return str(file["content"])
        if isinstance(tool_use_result, str) and tool_use_result:
            return tool_use_result
        return None

    def block(self, number: int, item: Any) -> Block | None:
        if isinstance(item, str):
            return Block("text", item)
        if not isinstance(item, dict):
            self.problem(number, "bad_field", "a content block that is not an object; skipped")
            return None
        btype = item.get("type")
        if btype == "text":
            text = item.get("text")
            return Block("text", text if isinstance(text, str) else "")
        if btype == "thinking":
            text = item.get("thinking")
            return Block("thinking", text if isinstance(text, str) else "")
        if btype == "redacted_thinking":
            data = item.get("data")
            return Block("redacted_thinking", data if isinstance(data, str) else "")
        if btype == "tool_use":
            name = _str(item, "name")
            tool_input = item.get("input") if item.get("input") is not None else {}
            return Block(
                "tool_use",
                name + json_stringify(tool_input),
                tool_use_id=item.get("id") if isinstance(item.get("id"), str) else None,
                tool_name=name,
                data=tool_input,
            )
        if btype == "tool_result":
            content = item.get("content")
            text, media, is_list = _flatten_tool_result(content)
            tid = item.get("tool_use_id")
            return Block(
                "tool_result",
                text,
                tool_use_id=tid if isinstance(tid, str) else None,
                is_error=item.get("is_error") is True,
                media=media,
                is_list=is_list,
            )
        if btype in ("image", "document"):
            return Block(btype)
        return Block("other", json_stringify(item), data=btype if isinstance(btype, str) else None)

    def usage(self, number: int, raw: Any) -> Usage | None:
        if raw is None:
            return None
        if not isinstance(raw, dict):
            self.problem(number, "bad_field", "usage is not an object; ignored")
            return None

        def num(key: str, src: dict[str, Any] = raw) -> int:
            value = src.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float):
                return 0
            if value > MAX_USAGE_TOKENS:  # no request is that large: garbage, not a count
                self.problem(
                    number,
                    "bad_field",
                    f"usage.{key} of {str(value)[:24]} is out of range; ignored",
                )
                return 0
            return max(0, int(value))

        def fields(src: dict[str, Any]) -> Usage:
            usage = Usage(
                input=num("input_tokens", src),
                cache_write=num("cache_creation_input_tokens", src),
                cache_read=num("cache_read_input_tokens", src),
                output=num("output_tokens", src),
            )
            split = src.get("cache_creation")
            if isinstance(split, dict):
                usage.cache_write_5m = num("ephemeral_5m_input_tokens", split)
                usage.cache_write_1h = num("ephemeral_1h_input_tokens", split)
            return usage

        usage = fields(raw)
        calls = [c for c in raw.get("iterations") or [] if isinstance(c, dict)]
        if not calls or (len(calls) == 1 and calls[0].get("type") == "message"):
            return usage
        # Several model calls in one request (an advisor, a server-side tool loop): the
        # top-level fields add up the request model's calls, so the prompt as the request
        # sent it is its first call's, and the other calls are kept apart, with their models.
        first = next((c for c in calls if c.get("type") == "message"), None)
        if first is None:
            return usage
        request = fields(first)
        later: list[Iteration] = []
        for call in calls:
            if call is first:
                continue
            part = fields(call)
            write_1h = part.cache_write_1h or 0
            kind = call.get("type")
            model = call.get("model")
            later.append(
                Iteration(
                    kind=kind if isinstance(kind, str) else "unknown",
                    model=model[:200] if isinstance(model, str) else None,
                    input=part.input,
                    cache_read=part.cache_read,
                    cache_write_5m=part.cache_write - write_1h,
                    cache_write_1h=write_1h,
                    output=part.output,
                )
            )
        request.iterations = tuple(later)
        return request

    def system_message(self, number: int, obj: dict[str, Any], subtype: str) -> Message:
        content = _str(obj, "content")
        metadata: dict[str, Any] = {}
        for key in ("compactMetadata", "microcompactMetadata", "snipMetadata"):
            if isinstance(obj.get(key), dict):
                metadata = dict(obj[key])
        common = {
            "uuid": obj["uuid"],
            "timestamp": obj.get("timestamp") if isinstance(obj.get("timestamp"), str) else "",
            "line": number,
            "file": self.tfile.name,
            "version": obj.get("version") if isinstance(obj.get("version"), str) else None,
            "cwd": obj.get("cwd") if isinstance(obj.get("cwd"), str) else None,
            "uuids": [obj["uuid"]],
            "metadata": metadata,
        }
        if subtype == "local_command":
            # normalizeMessagesForAPI sends local_command system messages as user text
            return Message(
                role="user",
                kind="command",
                blocks=[Block("text", content)],
                string_content=True,
                **common,
            )
        return Message(role="system", kind=subtype, blocks=[], **common)  # type: ignore[arg-type]

    def attachment_message(self, number: int, obj: dict[str, Any]) -> Message:
        """An attachment record (2.1.x): a meta user message in the model's view, with the
        text Claude Code sends for it (``attachments.render_attachment``; empty when the type
        is never sent)."""
        attachment = obj.get("attachment")
        kind = attachment.get("type") if isinstance(attachment, dict) else None
        if isinstance(attachment, dict):
            text, known = render_attachment(attachment)
        else:
            text, known = (json_stringify(attachment) if attachment is not None else ""), False
        if not known:
            label = kind if isinstance(kind, str) else "(no type)"
            self.unknown_attachments[label] = self.unknown_attachments.get(label, 0) + 1
        return Message(
            uuid=obj["uuid"],
            role="user",
            kind="attachment",
            blocks=[Block("text", text)],
            timestamp=_str(obj, "timestamp"),
            line=number,
            file=self.tfile.name,
            is_meta=True,
            uuids=[obj["uuid"]],
            # which attachment it is: a recorded post-compact file restoration replaces the
            # modeled one
            metadata={"attachment_type": kind} if isinstance(kind, str) else {},
        )


def _str(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def _json_reason(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    return str(exc)


def _is_command_text(content: str) -> bool:
    head = content.lstrip()[:40]
    return head.startswith(
        (
            "<command-name>",
            "<command-message>",
            "<local-command-stdout>",
            "<local-command-caveat>",
            "<bash-input>",
            "<bash-stdout>",
        )
    )


def _flatten_tool_result(content: Any) -> tuple[str, int, bool]:
    """Text the model sees in a tool_result, the count of nested media, and list-ness."""
    if content is None:
        return "", 0, False
    if isinstance(content, str):
        return content, 0, False
    if isinstance(content, list):
        parts: list[str] = []
        media = 0
        for item in content:
            if isinstance(item, dict):
                itype = item.get("type")
                if itype == "text" and isinstance(item.get("text"), str):
                    parts.append(item["text"])
                elif itype in ("image", "document"):
                    media += 1
                else:
                    parts.append(json_stringify(item))
            elif isinstance(item, str):
                parts.append(item)
        return "\n".join(parts), media, True
    return json_stringify(content), 0, False


# --------------------------------------------------------------------------- chain building


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


def _messages_from_records(records: Iterable[Record], thread: Thread) -> None:
    """Group records into messages: one assistant message per message.id, in chain order."""
    by_id: dict[str, Message] = {}
    messages: list[Message] = []
    seen_results: set[str] = set()
    for rec in records:
        msg = rec.message
        if msg is None:
            continue
        if rec.synthetic:
            thread.synthetic_dropped += 1
            continue
        if msg.role == "assistant" and msg.message_id:
            existing = by_id.get(msg.message_id)
            if existing is not None:
                _merge_into(existing, _copy_message(msg))
                continue
            msg = _copy_message(msg)
            msg.metadata["first_record_blocks"] = len(msg.blocks)
            by_id[msg.message_id or msg.uuid] = msg
        else:
            if msg.kind == "tool_result":
                ids = [
                    b.tool_use_id for b in msg.blocks if b.type == "tool_result" and b.tool_use_id
                ]
                if ids and all(i in seen_results for i in ids):
                    continue  # a duplicate result for a tool_use already answered
                seen_results.update(ids)
            msg = _copy_message(msg)
        messages.append(msg)
    for index, msg in enumerate(messages):
        msg.index = index
    thread.messages = messages


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
        original_output=msg.original_output,
        string_content=msg.string_content,
    )


class _Tree:
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

    def reattach(self, chain: list[Record]) -> list[Record]:
        """Add split-response siblings and parallel tool results that sit on side branches."""
        members = {r.uuid for r in chain}
        message_ids = {
            r.message.message_id for r in chain if r.message is not None and r.type == "assistant"
        }
        tool_ids = {
            b.tool_use_id
            for r in chain
            if r.message is not None and r.type == "assistant"
            for b in r.message.blocks
            if b.type == "tool_use"
        }
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


def _build_threads(
    records: list[Record], problems: list[Problem], file_name: str, main_kind: str, main_id: str
) -> list[Thread]:
    """Main chain of one file plus its abandoned branches and inline sidechains."""
    threads: list[Thread] = []
    main_records = [r for r in records if not r.is_sidechain]
    side_records = [r for r in records if r.is_sidechain]
    tree = _Tree(main_records)
    leaf = _main_leaf(main_records)
    main_chain: list[Record] = []
    if leaf is not None:
        main_chain = tree.reattach(tree.walk(leaf, problems))
        main = Thread(id=main_id, kind=main_kind, messages=[], file=file_name)
        root = main_chain[0] if main_chain else None
        if root is not None and root.parent is not None and root.parent not in tree.by_uuid:
            main.starts_outside = True
            main.continues_uuid = root.parent
        _messages_from_records(main_chain, main)
        threads.append(main)
        threads.extend(_branches(tree, main_chain, main, problems, file_name))
    if side_records:
        threads.extend(_sidechains(side_records, problems, file_name))
    return threads


def _branches(
    tree: _Tree, main_chain: list[Record], main: Thread, problems: list[Problem], file_name: str
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
        fork = 0
        for i, r in enumerate(chain):
            if r.uuid not in on_main:
                break
            fork = i + 1
        thread.fork_index = fork
        branches.append(thread)
    branches.reverse()
    return branches


def _sidechains(records: list[Record], problems: list[Problem], file_name: str) -> list[Thread]:
    """1.0.x inline subagents: isSidechain records, one tree per root."""
    tree = _Tree(records)
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
        sub = _Tree(group)
        leaf = _main_leaf(group)
        if leaf is None:
            continue
        chain = sub.reattach(sub.walk(leaf, problems))
        thread = Thread(id=f"sidechain-{n}", kind="sidechain", messages=[], file=file_name)
        _messages_from_records(chain, thread)
        threads.append(thread)
    del tree
    return threads


def _stitched_chain(upload: Upload, problems: ProblemList, side: SideRecords) -> _FileParser:
    """The main file with the session files it continues (and that continue it), as one parse.

    A resumed or continued session writes a new file whose first record's ``parentUuid`` is a
    record of the older file. Files are linked that way, earliest first, and their records read
    as one stream (a record already read from an earlier file is skipped, as Claude Code skips
    uuids it has written); so the "earlier history not in this file" is the real history.
    Files that neither continue nor are continued by the chain are reported and left out.
    """
    assert upload.main is not None
    parsed: list[_FileParser] = []
    for tfile in [upload.main, *upload.siblings]:
        parser = _FileParser(tfile, problems, side)
        parser.parse()
        parsed.append(parser)
    uuids = [{r.uuid for r in p.records} for p in parsed]

    def continued(i: int) -> int | None:
        """The file whose record the first record of file ``i`` hangs from."""
        roots = [r for r in parsed[i].records if not r.is_sidechain]
        parent = roots[0].parent if roots else None
        if parent is None or parent in uuids[i]:
            return None
        return next((j for j in range(len(parsed)) if j != i and parent in uuids[j]), None)

    before = {i: continued(i) for i in range(len(parsed))}
    chain = [0]
    while (earlier := before[chain[0]]) is not None and earlier not in chain:
        chain.insert(0, earlier)
    while (
        later := next((i for i, b in before.items() if b == chain[-1] and i not in chain), None)
    ) is not None:
        chain.append(later)
    for i, parser in enumerate(parsed):
        if i not in chain:
            problems.append(
                Problem(
                    0,
                    "extra_transcript",
                    f"{parser.tfile.name}: a second session file in the archive was not read "
                    "(it neither continues this session nor is continued by it)",
                    upload.name,
                    "info",
                )
            )
    stitched = _FileParser(parsed[chain[-1]].tfile, problems, side)
    seen: set[str] = set()
    for i in chain:
        parser = parsed[i]
        stitched.records.extend(r for r in parser.records if r.uuid not in seen)
        seen |= uuids[i]
        stitched.usable += parser.usable
        stitched.versions.extend(v for v in parser.versions if v not in stitched.versions)
        # the newest file's id names the session (it is the one Claude Code resumes)
        stitched.session_id = parser.session_id or stitched.session_id
    if len(chain) > 1:
        problems.append(
            Problem(
                0,
                "stitched_files",
                "read as one conversation, earliest first: "
                + ", ".join(parsed[i].tfile.name for i in chain),
                upload.name,
                "info",
            )
        )
    return stitched


def build_session(upload: Upload) -> Session:
    """Parse every file of an upload into threads.

    Raises ``TranscriptError`` when nothing usable was found; otherwise problems are returned on
    the session and the replay goes on with what was valid.
    """
    problems = ProblemList(upload.problems)
    side = SideRecords()
    threads: list[Thread] = []
    versions: list[str] = []
    session_id: str | None = None
    total_usable = 0
    record_count = 0
    files: list[tuple[TranscriptFile, str, str]] = []
    forks: list[tuple[Thread, str]] = []
    #: uuid → parent of every main-file record (system and progress records included), to
    #: find the message a compaction fork hangs from when its parent is a turn-end record
    main_parents: dict[str, str | None] = {}
    record_uuids: frozenset[str] = frozenset()
    if upload.main is not None:
        files.append((upload.main, "main", "main"))
    for sub in upload.subagents:
        files.append((sub, "subagent", f"agent-{sub.agent_id}"))
    chain = _stitched_chain(upload, problems, side) if upload.siblings else None
    for tfile, kind, thread_id in files:
        if kind == "main" and chain is not None:
            parser = chain
        else:
            parser = _FileParser(tfile, problems, side)
            parser.parse()
        total_usable += parser.usable
        record_count += len(parser.records)
        session_id = session_id or parser.session_id
        for v in parser.versions:
            if v not in versions:
                versions.append(v)
        subagent_file = bool(parser.records) and (
            kind == "subagent" or all(r.is_sidechain for r in parser.records)
        )
        if subagent_file:
            # a subagent file (or one uploaded on its own) is one chain of sidechain records
            for r in parser.records:
                r.is_sidechain = False
        if kind == "main":
            record_uuids = frozenset(r.uuid for r in parser.records)
        if kind == "main" and upload.subagents:
            main_parents = {r.uuid: r.parent for r in parser.records}
        file_threads = _build_threads(parser.records, problems, parser.tfile.name, kind, thread_id)
        fork_point = (
            _fork_point(parser.records)
            if kind == "subagent" and COMPACTION_FORK_ID.fullmatch(tfile.agent_id or "")
            else None
        )
        if fork_point is not None and len(file_threads) == 1:
            forks.append((file_threads[0], fork_point))
        if kind == "main" and not file_threads:
            file_threads = [Thread(id="main", kind="main", messages=[], file=tfile.name)]
        if kind == "main" and subagent_file:
            # a subagent's file uploaded alone hangs from the conversation that started it:
            # not a resumed session, and no stitching reads the two as one conversation
            file_threads[0].continues_uuid = None
        threads.extend(file_threads)
    _link_tool_results(threads, problems)
    if threads and threads[0].kind == "main":
        for thread, fork_point in forks:
            _continue_main(thread, threads[0], fork_point, main_parents)
    has_messages = any(t.messages for t in threads)
    if total_usable == 0 or not has_messages:
        reason = _nothing_usable_reason(problems, total_usable)
        raise TranscriptError(reason, problems)
    if not threads or threads[0].kind != "main":
        threads.insert(0, Thread(id="main", kind="main", messages=[], file=""))
    return Session(
        name=upload.name,
        session_id=session_id,
        threads=threads,
        problems=problems,
        side=side,
        versions=versions,
        upload=upload,
        record_count=record_count,
        record_uuids=record_uuids,
    )


#: the compaction fork's agent id, ``a`` + label + ``-`` + hex (Claude Code writes agent-acompact-…)
COMPACTION_FORK_ID = re.compile(r"acompact-[0-9a-f]+")


def _fork_point(records: list[Record]) -> str | None:
    """The main-chain uuid a compaction fork's prompt hangs from: the parent of its first user
    record that is not a copied meta message, when that parent is not in the fork's own file."""
    own = {r.uuid for r in records}
    for rec in records:
        if rec.type == "user" and rec.message is not None and not rec.message.is_meta:
            return rec.parent if rec.parent and rec.parent not in own else None
    return None


def _continue_main(
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


def _nothing_usable_reason(problems: list[Problem], usable: int) -> str:
    bad = [
        p
        for p in problems
        if p.code in ("invalid_json", "not_an_object", "truncated_line", "missing_type")
    ]
    if not problems and usable == 0:
        return "the file is empty: no transcript records found"
    if bad and usable == 0:
        return (
            f"not a Claude Code transcript: none of the lines is a transcript record "
            f"({len(bad)} line(s) rejected, first: {bad[0]})"
        )
    return "no conversation messages found: the file has no user or assistant records"


def _link_tool_results(threads: list[Thread], problems: list[Problem]) -> None:
    """Give tool_result blocks their tool name; report results without a matching tool_use."""
    for thread in threads:
        names: dict[str, str] = {}
        orphans = 0
        first_line = 0
        for msg in thread.messages:
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


def load_session(
    path: str | os.PathLike[str],
    name: str | None = None,
    *,
    earlier: Sequence[str | os.PathLike[str] | EarlierUpload] = (),
) -> Session:
    """Open and parse an upload (see ``loading.open_upload`` for the accepted forms); with
    ``earlier``, stitched to the uploads it continues (``loading.open_upload_chain``)."""
    upload = open_upload_chain(path, earlier, name)
    try:
        return build_session(upload)
    except BaseException:
        upload.close()
        raise
