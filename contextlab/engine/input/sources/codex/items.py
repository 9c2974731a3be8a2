"""One rollout line as an item of the conversation Codex keeps (its shape, per version).

A rollout mixes what the model saw (``response_item``: messages, reasoning, tool calls and
their outputs), what Codex did around it (``turn_context``, ``compacted``) and events for the
client (``event_msg``, of which only ``token_count`` and ``context_compacted`` matter here).
Everything here is framework-free and reads untrusted JSON: a field of the wrong type is as
good as a missing one, never an exception.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from contextlab.engine.input.model import Block

#: Top-level record types Codex writes for its own bookkeeping, nothing the model is sent as
#: such: ``world_state`` (the state a resumed session diffs its context updates against),
#: ``security_risk_score`` (scores Codex keeps out of the model's context),
#: ``inter_agent_communication`` and its ``_metadata`` (a message between agents, which the
#: history holds as a response item of its own: ``agent_message``, or an assistant message)
BOOKKEEPING_RECORDS = frozenset(
    {
        "world_state",
        "security_risk_score",
        "inter_agent_communication",
        "inter_agent_communication_metadata",
    }
)
#: Top-level record types of the ``{timestamp, type, payload}`` form (0.45 onward).
RECORD_TYPES = (
    frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
    | BOOKKEEPING_RECORDS
)
#: Bare item types of the older (≤ 0.4x) rollouts, one item per line after the header line.
BARE_ITEMS = frozenset(
    {"message", "reasoning", "function_call", "function_call_output", "local_shell_call"}
)
#: Response items the model produces (the assistant side of a call).
OUTPUT_ITEMS = frozenset(
    {
        "reasoning",
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "tool_search_call",
        "image_generation_call",
    }
)
#: Response items that answer a tool call (the user side).
TOOL_OUTPUT_ITEMS = frozenset(
    {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
)
#: Response items that are bookkeeping or request controls, never sent to the model as text:
#: a git snapshot for /undo, a request to compact now, a change of reasoning settings.
IGNORED_ITEMS = frozenset({"ghost_snapshot", "compaction_trigger", "configuration_update"})
#: Response items holding a remote compaction's encrypted summary (``compaction_summary`` is
#: an older name of ``compaction``; ``context_compaction``'s content may be absent).
OPAQUE_ITEMS = frozenset({"compaction", "compaction_summary", "context_compaction"})
#: Text that opens a user message Codex injects itself (context, not a person's prompt).
INJECTED_PREFIXES = (
    "<environment_context",
    "<user_instructions",
    "# AGENTS.md instructions",
    "<permissions instructions",
    "<user_shell_command",
    "<turn_aborted",
    "<collaboration_mode",
)

#: How an assistant message that is another agent's message to this one begins: the JSON of
#: Codex's ``InterAgentCommunication`` (author, recipient, …), or its older plain-text form.
INTER_AGENT_PREFIXES = ('{"author":', "author: /")


def text_of(content: Any) -> str:
    """The text of a message's ``content``: a string, or a list of ``input_text`` /
    ``output_text`` parts (anything else in the list left out)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for part in content:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif isinstance(part, str):
            parts.append(part)
    return "\n".join(parts)


#: Content parts whose text (or image) the adapter reads: message text, images, reasoning.
KNOWN_PARTS = frozenset(
    {"input_text", "output_text", "text", "input_image", "summary_text", "reasoning_text"}
)


def unknown_parts(content: Any) -> list[str]:
    """The types of a content list's parts this adapter does not read (later versions:
    ``input_audio``, ``encrypted_content``, ``input_file``): left out of the replay, so reported."""
    unknown: list[str] = []
    if type(content) is not list:
        return unknown
    for part in content:
        if type(part) is dict:
            kind = part.get("type")
            # a type of the wrong kind (a list: unhashable) is no type, never an exception
            if type(kind) is not str:
                unknown.append("(no type)")
            elif kind not in KNOWN_PARTS:
                unknown.append(kind)
    return unknown


def parts_of(content: Any) -> tuple[str, int, tuple[str, ...]]:
    """A message's ``content`` as ``(text_of, images_in, unknown_parts)`` of it, read in one
    pass over its parts rather than three (every message of a rollout goes through this)."""
    if isinstance(content, str):
        return content, 0, ()
    if not isinstance(content, list):
        return "", 0, ()
    texts: list[str] = []
    images = 0
    unknown: list[str] = []
    for part in content:
        if isinstance(part, dict):
            text = part.get("text")
            if isinstance(text, str):
                texts.append(text)
            kind = part.get("type")
            # a type of the wrong kind (a list: unhashable) is no type, never an exception
            if type(kind) is not str:
                unknown.append("(no type)")
            elif kind not in KNOWN_PARTS:
                unknown.append(kind)
            elif kind == "input_image":
                images += 1
        elif isinstance(part, str):
            texts.append(part)
    return "\n".join(texts), images, tuple(unknown)


def images_in(content: Any) -> int:
    if not isinstance(content, list):
        return 0
    return sum(
        1 for part in content if isinstance(part, dict) and part.get("type") == "input_image"
    )


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def output_text(output: Any) -> str:
    """What the model saw of a tool output: the string (older versions wrapped it as JSON
    ``{"output": …, "metadata": …}``, which is what was sent), or a list of content parts."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        content = output.get("content")
        if isinstance(content, str):
            return content
        return text_of(content) or json.dumps(output, ensure_ascii=False)
    return text_of(output)


@dataclass(slots=True)
class Item:
    """A conversation item, already as the engine's blocks."""

    #: "user" (a prompt or injected context), "developer", "assistant" (output of a call),
    #: "tool_output"
    side: str
    blocks: list[Block]
    #: a user message Codex injected (environment, AGENTS.md, permissions)
    injected: bool = False
    #: the item is a remote compaction's opaque summary (``compaction`` item)
    opaque_bytes: int = 0
    #: the types of content parts the adapter does not read, in their order (reported by it)
    unknown_parts: tuple[str, ...] = ()


def with_parts(item: Item, content: Any) -> Item:
    """``item``, with the types of ``content``'s parts it does not read in its
    ``unknown_parts`` (reported by the adapter)."""
    if type(content) is list:  # (``unknown_parts`` finds none in anything else)
        item.unknown_parts = tuple(unknown_parts(content))
    return item


def item_of(payload: dict[str, Any]) -> Item | str | None:
    """The item of a response-item payload; None when it is bookkeeping; the item type (a
    string) when the shape is not one this adapter knows. Content parts of types it does not
    read are listed in the item's ``unknown_parts``."""
    kind = payload.get("type")
    if not isinstance(kind, str):
        return "(no type)"
    if kind in IGNORED_ITEMS:
        return None
    if kind == "message":
        role = payload.get("role")
        text, images, unknown = parts_of(payload.get("content"))
        if role == "assistant":
            if text[:40].lstrip().startswith(INTER_AGENT_PREFIXES):
                # a message from another agent, which Codex puts in the history as an assistant
                # message (its JSON; earlier, "author: …" lines): context, no output of a call
                return Item("developer", [Block("text", text)], True, unknown_parts=unknown)
            return Item("assistant", [Block("text", text)], False, 0, unknown)
        if role in ("user", "developer", "system"):
            blocks = [Block("text", text)]
            if images:
                blocks += [Block("image") for _ in range(images)]
            injected = role != "user" or text.lstrip().startswith(INJECTED_PREFIXES)
            side = "developer" if role != "user" else "user"
            return Item(side, blocks, injected, 0, unknown)
        return f"message/{role}"
    if kind == "reasoning":
        summary = payload.get("summary")
        text = text_of(summary) if isinstance(summary, list) else ""
        content = payload.get("content")
        if isinstance(content, list):
            text = "\n".join(t for t in (text, text_of(content)) if t)
        return with_parts(Item("assistant", [Block("thinking", text)]), content)
    if kind in ("function_call", "custom_tool_call"):
        name = payload.get("name")
        if not isinstance(name, str):
            name = "tool"
        # (``arguments``, else ``input``: the second looked up only when the first is absent)
        args = payload["arguments"] if "arguments" in payload else payload.get("input", "")
        args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        call_id = payload.get("call_id")
        if not isinstance(call_id, str):
            call_id = None
        # (positional: ``Block``'s type, text, tool_use_id, tool_name; a call per item)
        return Item("assistant", [Block("tool_use", f"{name} {args_text}", call_id, name)])
    call_id = payload.get("call_id")
    call_id = call_id if isinstance(call_id, str) else None
    if kind in OUTPUT_ITEMS:
        # an image generation's ``result`` is the image itself (base64): one image, not text
        image = kind == "image_generation_call" and bool(payload.get("result"))
        hidden = ("id", "encrypted_content", "result") if image else ("id", "encrypted_content")
        text = json_text({k: v for k, v in payload.items() if k not in hidden})
        block = Block("tool_use", text, tool_use_id=call_id, tool_name=kind, media=int(image))
        return Item("assistant", [block])
    if kind in TOOL_OUTPUT_ITEMS:
        output = payload.get("output")
        if type(output) is str:  # the usual output: no parts, no images
            return Item("tool_output", [Block("tool_result", output, call_id)])
        block = Block("tool_result", output_text(output), tool_use_id=call_id)
        block.media = images_in(output)  # content items: text and images (MCP, view_image)
        return with_parts(Item("tool_output", [block]), output)
    if kind in OPAQUE_ITEMS:
        encrypted = payload.get("encrypted_content")
        size = len(encrypted) if isinstance(encrypted, str) else 0
        return Item("opaque", [], opaque_bytes=size)
    return context_item(kind, payload, call_id)


def context_item(kind: str, payload: dict[str, Any], call_id: str | None) -> Item | str:
    """Items of newer versions that put text before the model without being a message: the
    tools a tool search loaded (``tool_search_output``: their definitions, which the model
    reads), tools added mid-session (``additional_tools``) and a message from another agent
    (``agent_message``); the item type (a string) for a shape this adapter does not know."""
    if kind == "tool_search_output":
        text = json_text(payload.get("tools", []))
        if call_id is None:  # run by the server: part of the model's own output, as a web search
            return Item("assistant", [Block("tool_use", text, tool_name=kind)])
        return Item("tool_output", [Block("tool_result", text, tool_use_id=call_id)])
    if kind == "additional_tools":
        return Item("developer", [Block("text", json_text(payload.get("tools", [])))], True)
    if kind == "agent_message":
        header = {k: payload.get(k) for k in ("author", "recipient") if k in payload}
        content = payload.get("content")
        text = "\n".join(t for t in (json_text(header), text_of(content)) if t)
        blocks = [Block("text", text), *(Block("image") for _ in range(images_in(content)))]
        return with_parts(Item("developer", blocks, injected=True), content)
    return kind


def usage_of(value: Any) -> dict[str, int] | None:
    """A ``token_usage`` object as ints (missing or malformed figures are 0); None when it is
    not an object."""
    if not isinstance(value, dict):
        return None
    # the usual object: five figures, each an int of at least 0 (the checks below, at once)
    get = value.get
    input_tokens, cached, output, reasoning, total = (
        get("input_tokens"),
        get("cached_input_tokens"),
        get("output_tokens"),
        get("reasoning_output_tokens"),
        get("total_tokens"),
    )
    if (
        type(input_tokens) is int
        and type(cached) is int
        and type(output) is int
        and type(reasoning) is int
        and type(total) is int
        and input_tokens >= 0  # (comparisons, not ``min``: a builtin call per usage)
        and cached >= 0
        and output >= 0
        and reasoning >= 0
        and total >= 0
    ):
        return {
            "input_tokens": input_tokens,
            "cached_input_tokens": cached,
            "output_tokens": output,
            "reasoning_output_tokens": reasoning,
            "total_tokens": total,
        }
    out = {}
    for key in USAGE_FIGURES:
        figure: Any = value.get(key)
        if type(figure) is int and figure >= 0:  # the usual figure: the checks below in one
            out[key] = figure
            continue
        ok = isinstance(figure, int | float) and not isinstance(figure, bool) and figure >= 0
        out[key] = int(figure) if ok else 0
    return out


#: the figures of a ``token_usage`` object, in the order ``usage_of`` gives them
USAGE_FIGURES = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "total_tokens",
)


def is_codex_record(record: dict[str, Any], index: int) -> bool:
    """Whether one of a file's first records is Codex's: a ``{type, payload}`` record of the
    rollout types, or an older rollout's header line (the first) and bare response items."""
    kind = record.get("type")
    if isinstance(kind, str) and kind in RECORD_TYPES:
        return isinstance(record.get("payload"), dict) and "uuid" not in record
    if index == 0 and kind is None:
        return isinstance(record.get("id"), str) and "instructions" in record
    if isinstance(kind, str) and kind in BARE_ITEMS:
        return "uuid" not in record and "payload" not in record
    return record.get("record_type") == "state"
