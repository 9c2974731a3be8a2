"""Post-compact restoration (compact.ts, spec §4.6.7) — MODELED.

After a compaction Claude Code re-reads up to 5 recently read files (≤ 5,000 tokens each,
≤ 50,000 in all) and attaches them. Those attachments are never written to the transcript, so
we rebuild them from the Read results the history holds: the most recent distinct files, each
cut to the per-file limit, in the attachment wording Claude Code uses. Newer versions write
them as ``file`` (or ``compact_file_reference``) attachment records right after the summary:
there the recorded ones are the restoration and none is modeled (``restoration_recorded``).
"""

from __future__ import annotations

from contextlab.engine.input.jsutil import json_stringify
from contextlab.engine.input.model import Block, Message
from contextlab.engine.input.rough import rough_text

from .base import HeadItem, StepContext

#: attachment types Claude Code writes for the files it restored after a compaction
RESTORED_FILE_ATTACHMENTS = frozenset({"file", "compact_file_reference"})


def restoration_recorded(messages: list[Message], summary: int) -> bool:
    """Whether the attachments right after the summary at ``summary`` hold restored files."""
    i = summary + 1
    while i < len(messages) and messages[i].kind == "attachment":
        if messages[i].metadata.get("attachment_type") in RESTORED_FILE_ATTACHMENTS:
            return True
        i += 1
    return False


def recent_read_files(ctx: StepContext, before: int) -> list[tuple[str, str]]:
    """(path, content) of the most recently read distinct files before message ``before``.

    readFileState is cleared at each compaction and refilled by the restored files, so the most
    recent reads over the whole history approximate it in both modes. The index is kept in the
    thread's state and extended from where the last call stopped (calls come in order).
    """
    view = ctx.view
    index = ctx.step_state("restore")
    # path → the block holding its content, oldest first (the block, not its text: a text is
    # held compact by its block and read back only for the files picked)
    reads: dict[str, Block] = index.setdefault("reads", {})
    paths_by_id: dict[str, str] = index.setdefault("paths_by_id", {})
    for i in range(index.get("scanned", 0), before):
        for block in view.messages[i].blocks:
            if (
                block.type == "tool_use"
                and block.tool_name == "Read"
                and isinstance(block.data, dict)
            ):
                path = block.data.get("file_path")
                if isinstance(path, str) and block.tool_use_id:
                    paths_by_id[block.tool_use_id] = path
            elif (
                block.type == "tool_result"
                and block.tool_use_id in paths_by_id
                and not block.is_error
            ):
                path = paths_by_id[block.tool_use_id]
                reads.pop(path, None)  # re-read: move to the most recent end
                reads[path] = block
    index["scanned"] = max(index.get("scanned", 0), before)
    picked: list[tuple[str, str]] = []
    for path in reversed(reads):
        lowered = path.lower()
        if lowered.endswith("claude.md") or "/.claude/plans/" in lowered:
            continue
        picked.append((path, reads[path].text))
        if len(picked) >= ctx.config.post_compact_max_files_to_restore:
            break
    return picked


def restoration_head(ctx: StepContext, before: int) -> tuple[list[HeadItem], list[str]]:
    """Head items for the files restored after a compaction at message ``before``."""
    cfg = ctx.config
    items: list[HeadItem] = []
    names: list[str] = []
    used = 0
    for path, content in recent_read_files(ctx, before):
        if rough_text(content) > cfg.post_compact_max_tokens_per_file:
            # too large to re-read within the per-file limit: Claude Code attaches a note instead
            text = (
                f"<system-reminder>\nNote: {path} was read before the last conversation was "
                "summarized, but the contents are too large to include. Use Read tool if you need "
                "to access it.\n</system-reminder>"
            )
        else:
            text = (
                "<system-reminder>\nCalled the Read tool with the following input: "
                + json_stringify({"file_path": path})
                + "\n</system-reminder>\n<system-reminder>\nResult of calling the Read tool:\n"
                + content
                + "\n</system-reminder>"
            )
        cost = rough_text(text)
        if used + cost > cfg.post_compact_token_budget:
            continue
        used += cost
        message = Message(
            uuid=f"restore-{ctx.k}-{len(items)}",
            role="user",
            kind="attachment",
            blocks=[Block("text", text)],
            timestamp=ctx.request.timestamp,
            is_meta=True,
        )
        ref = ctx.view.log.add_synthetic(
            ctx.view.thread.id,
            "restored_file",
            message,
            {"path": path, "request": ctx.k, "modeled": True},
        )
        items.append(ctx.view.head_item(message, ref))
        names.append(path)
    return items, names
