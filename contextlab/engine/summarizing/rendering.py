"""The conversation as a summarizing model reads it, and how it is cut when it is too long.

``render_conversation`` turns the messages of a ``SummaryRequest`` into alternating API turns
ending with the prompt, as Claude Code's direct compaction call does (spec §4.6.6, facts §6.4:
thinking left out, images as ``[image]``). ``truncate_head_for_ptl_retry`` drops the oldest API
rounds after a "prompt is too long" answer (spec §4.6.8). Both backends send exactly this, so a
change here changes what every LLM summary is written from.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from contextlab.engine.input.model import Block, Message
from contextlab.engine.measures.tokens import message_rough

#: Prompt-too-long retries before giving up (MAX_PTL_RETRIES in compact.ts).
MAX_PTL_RETRIES = 3
#: Meta user message put in front of a truncated history that would start with the assistant.
PTL_MARKER = "[earlier conversation truncated for compaction retry]"
#: Put in front of a span that starts with an assistant message (a collapse span can), because
#: the Messages API wants the conversation to open with a user turn.
EXCERPT_MARKER = "[conversation excerpt: the messages before this point are not shown]"


@dataclass
class Turn:
    """One API message: a role and its text parts (consecutive same-role messages merged)."""

    role: str
    parts: list[str]


def render_block(block: Block) -> str | None:
    """The text a summarizing model gets for one block, or None to leave the block out."""
    if block.type in ("thinking", "redacted_thinking"):
        # The API drops earlier turns' thinking from the context anyway, and Claude Code's direct
        # compaction call runs with thinking disabled: the summarizer never reads it.
        return None
    if block.type == "image":
        return "[image]"
    if block.type == "document":
        return "[document]"
    if block.type == "tool_use":
        name = block.tool_name or "tool"
        if block.data is not None:
            args = json.dumps(block.data, ensure_ascii=False)
        else:
            args = block.text[len(name) :] if block.text.startswith(name) else block.text
        ident = f" {block.tool_use_id}" if block.tool_use_id else ""
        return f"[Tool call{ident}: {name}] {args}"
    if block.type == "tool_result":
        label = block.tool_name or block.tool_use_id or "tool"
        head = f"[Tool result for {label}{' (error)' if block.is_error else ''}]"
        # stripImages: media nested in a tool result become text markers too
        media = " [image]" * block.media
        return f"{head}\n{block.text}{media}" if block.text else head + media
    return block.text or None


def render_conversation(messages: list[Message], prompt: str) -> list[Turn]:
    """The conversation as alternating user/assistant turns, then the prompt as the last user
    turn (merged into a trailing user turn, as Claude Code's normalization does)."""
    turns: list[Turn] = []
    for message in messages:
        if message.role not in ("user", "assistant"):
            continue  # boundaries and other system records are never sent
        parts = [text for block in message.blocks if (text := render_block(block))]
        if not parts:
            continue
        if turns and turns[-1].role == message.role:
            turns[-1].parts.extend(parts)
        else:
            turns.append(Turn(message.role, parts))
    if turns and turns[0].role == "assistant":
        turns.insert(0, Turn("user", [EXCERPT_MARKER]))
    if turns and turns[-1].role == "user":
        turns[-1].parts.append(prompt)
    else:
        turns.append(Turn("user", [prompt]))
    return turns


def group_by_api_round(messages: list[Message]) -> list[list[Message]]:
    """``groupMessagesByApiRound``: a group starts at each assistant message whose id differs
    from the previous assistant's (group 0 is whatever precedes the first assistant)."""
    groups: list[list[Message]] = []
    current: list[Message] = []
    last_id: str | None = None
    for message in messages:
        if message.role == "assistant":
            key = message.message_id or message.uuid
            if key != last_id and current:
                groups.append(current)
                current = []
            last_id = key
        current.append(message)
    if current:
        groups.append(current)
    return groups


def _is_ptl_marker(message: Message) -> bool:
    return (
        message.role == "user" and len(message.blocks) == 1 and message.blocks[0].text == PTL_MARKER
    )


def ptl_marker_message() -> Message:
    return Message(
        uuid="ptl-retry-marker",
        role="user",
        kind="meta",
        blocks=[Block("text", PTL_MARKER)],
        is_meta=True,
    )


def truncate_head_for_ptl_retry(
    messages: list[Message], token_gap: int | None
) -> list[Message] | None:
    """``truncateHeadForPTLRetry`` (spec §4.6.8): drop the oldest API rounds, or None when there
    is nothing left to drop.

    With a known gap, groups are dropped until their rough estimate covers it; without one,
    max(1, floor(20 %)) of the groups go. At least one group always stays.
    """
    if messages and _is_ptl_marker(messages[0]):
        messages = messages[1:]
    groups = group_by_api_round(messages)
    if len(groups) < 2:
        return None
    if token_gap is not None and token_gap > 0:
        drop = 0
        freed = 0
        for drop, group in enumerate(groups[:-1], start=1):  # noqa: B007 (drop is the result)
            freed += sum(message_rough(m) for m in group)
            if freed >= token_gap:
                break
    else:
        drop = max(1, math.floor(len(groups) * 0.2))
    drop = min(drop, len(groups) - 1)
    rest = [m for group in groups[drop:] for m in group]
    if rest and rest[0].role == "assistant":
        rest.insert(0, ptl_marker_message())
    return rest


def real_message_count(messages: list[Message]) -> int:
    """The messages that came from the transcript (a truncation marker is not one)."""
    return sum(1 for m in messages if not _is_ptl_marker(m))
