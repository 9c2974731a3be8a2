"""Claude Code's JSONL, record by record: what each record kind is and what the model saw of it.

Claude Code writes one JSON object per line. Conversation records (``user``, ``assistant``,
``system``, ``progress``, ``attachment``) become ``Record`` links of the chain, carrying a
``Message`` when the model saw them; side records (titles, content replacements, context-collapse
commits, Claude Code's own cost) are kept on ``SideRecords``; anything else is counted and
reported. A response's ``usage.iterations`` (an advisor, a server-side tool loop) becomes
``Iteration`` entries. Problems are reported, never raised.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from contextlab.engine.input.json_line import decode_json_line
from contextlab.engine.input.jsutil import json_stringify
from contextlab.engine.input.loading import LineCursor, TranscriptFile, iter_lines
from contextlab.engine.input.model import (
    SIGNATURE_CHARS,
    Block,
    Iteration,
    Message,
    MessageKind,
    Problem,
    Usage,
)
from contextlab.engine.input.session import SideRecords

from .attachments import render_attachment, snapshot_tools

#: A usage count above this is garbage (the largest context window is 1M tokens); it also keeps
#: every sum of counts inside a 32-bit database column.
MAX_USAGE_TOKENS = 100_000_000
#: the hook Claude Code runs when a session is resumed (``claude --resume``/``--continue``)
RESUME_HOOK = "SessionStart:resume"
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
_Shared = TypeVar("_Shared", bound=str | None)
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
    #: a ``SessionStart:resume`` hook's progress record: the process restarted and resumed
    #: the session in this file (its system prompt and tools were rebuilt)
    resumed: bool = False


class RecordParser:
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
        #: one copy of each value of the fields most records repeat (version, cwd, model, tool
        #: name, record type): the JSON decoder makes a string per record, and a session of
        #: gigabytes holds hundreds of thousands of them (and its pickle as many memo entries);
        #: while the file is read, also its records' uuids, so that a record's parent is its
        #: parent's uuid string, not a copy (let go by ``finish``)
        self.shared: dict[str, str] = {}

    def share(self, value: _Shared) -> _Shared:
        """``value``, or the equal string this parser met first."""
        return value if value is None else cast(_Shared, self.shared.setdefault(value, value))

    def problem(self, line: int, code: str, message: str, severity: str = "warning") -> None:
        self.problems.append(Problem(line, code, message, self.tfile.name, severity))  # type: ignore[arg-type]

    def parse(self) -> None:
        self.feed()
        self.finish()

    def feed(self, cursor: LineCursor | None = None) -> None:
        """Read the file's lines into records (from ``cursor`` on, moving it: see ``iter_lines``)."""
        for number, text, is_last in iter_lines(self.tfile, self.problems, cursor):
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

    def finish(self) -> None:
        """What is reported once the file is read: the record and attachment kinds not known."""
        self.shared = {}  # (its values stay where they are held)
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
        # (a record named as a parent before it was read: the message takes that string)
        uuid = obj["uuid"] = self.share(uuid)
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
            type=self.share(rtype),
            uuid=uuid,
            parent=self.share(parent),
            logical_parent=self.share(logical) if isinstance(logical, str) else None,
            subtype=self.share(_opt_str(obj, "subtype")),
            is_sidechain=obj.get("isSidechain") is True,
        )
        src = obj.get("sourceToolAssistantUUID")
        if isinstance(src, str):
            rec.source_assistant = self.share(src)
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
        if rtype in ("progress", "attachment"):
            # 2.1.5x writes the hook as a progress record, later versions as an attachment
            data = obj.get("data") if rtype == "progress" else obj.get("attachment")
            rec.resumed = isinstance(data, dict) and data.get("hookName") == RESUME_HOOK
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
            "version": self.share(_opt_str(obj, "version")),
            "cwd": self.share(_opt_str(obj, "cwd")),
            "is_meta": obj.get("isMeta") is True,
            "is_sidechain": obj.get("isSidechain") is True,
            "agent_id": self.share(_opt_str(obj, "agentId")),
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
                model=self.share(model),
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
            signature = item.get("signature")
            # the signature encrypts the whole thinking, so its length sizes a thinking whose
            # text the file leaves out or whose output the record holds only as a snapshot
            # (``replay.forecast``)
            return Block(
                "thinking",
                text if isinstance(text, str) else "",
                data={SIGNATURE_CHARS: len(signature)} if isinstance(signature, str) else None,
            )
        if btype == "redacted_thinking":
            data = item.get("data")
            return Block("redacted_thinking", data if isinstance(data, str) else "")
        if btype == "tool_use":
            name = self.share(_str(item, "name"))
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
            "version": self.share(_opt_str(obj, "version")),
            "cwd": self.share(_opt_str(obj, "cwd")),
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
        metadata: dict[str, Any] = {"attachment_type": kind} if isinstance(kind, str) else {}
        tools = snapshot_tools(attachment) if isinstance(attachment, dict) else None
        if tools is not None:
            metadata["tools"] = tools
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
            metadata=metadata,
        )


def _str(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def _opt_str(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) else None


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
