"""Per-tool persistence of large tool results (toolResultStorage.ts, spec §4.1 and §4.2.6).

At tool time Claude Code writes a result larger than the tool's threshold to
``tool-results/<id>.txt`` and puts a ``<persisted-output>`` wrapper with a 2,000-character
preview in the history. Recorded mode keeps the wrappers the transcript holds; what-if mode
starts from the original output and applies the configured thresholds itself.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from contextlab.engine.input.jsutil import format_file_size, js_len, js_slice

from .base import StepContext

if TYPE_CHECKING:
    from contextlab.engine.config.fields import PipelineConfig
    from contextlab.engine.input.session import Session

PERSISTED_OPEN = "<persisted-output>"
PERSISTED_CLOSE = "</persisted-output>"
PREVIEW_LABEL = "Preview (first 2KB):"


def persistence_threshold(tool_name: str | None, config: PipelineConfig) -> float:
    """Characters above which a tool's result is persisted (``getPersistenceThreshold``)."""
    name = tool_name or ""
    declared_map = config.declared_max_result_size_chars
    declared = declared_map.get(name, config.default_declared_max_result_size_chars)
    if declared is None:
        return math.inf  # Read declares Infinity: never persisted
    override = config.per_tool_threshold_overrides.get(name)
    if override is not None and override > 0:
        return override
    return min(declared, config.default_max_result_size_chars)


def generate_preview(content: str, max_chars: int = 2000) -> tuple[str, bool]:
    """First ``max_chars`` characters, cut back to the last newline if it lies past half."""
    if js_len(content) <= max_chars:
        return content, False
    head = js_slice(content, max_chars)
    cut = head.rfind("\n")
    if cut > max_chars * 0.5:
        return head[:cut], True
    return head, True


def persisted_path(tool_use_id: str, *, is_list: bool, session_dir: str) -> str:
    suffix = ".json" if is_list else ".txt"
    return f"{session_dir.rstrip('/')}/tool-results/{tool_use_id}{suffix}"


def build_wrapper(content: str, path: str, preview_chars: int = 2000) -> str:
    """The exact ``<persisted-output>`` message Claude Code puts in place of a large result."""
    preview, has_more = generate_preview(content, preview_chars)
    return (
        f"{PERSISTED_OPEN}\n"
        f"Output too large ({format_file_size(js_len(content))}). Full output saved to: {path}\n\n"
        f"{PREVIEW_LABEL}\n"
        f"{preview}" + ("\n...\n" if has_more else "\n") + PERSISTED_CLOSE
    )


_SIZE_RE = re.compile(r"Output too large \((\d+(?:\.\d+)?) ?(bytes|KB|MB|GB)\)")
_UNITS = {"bytes": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}


def recorded_size(wrapper: str) -> int:
    """The original size a recorded wrapper states (``formatFileSize`` read back), or 0."""
    match = _SIZE_RE.search(wrapper[:300])
    if not match:
        return 0
    return int(float(match.group(1).strip()) * _UNITS[match.group(2)])


def result_size(text: str) -> int:
    return js_len(text)


class ToolResultPersistence:
    """What-if: persist new tool results above their tool's threshold (recorded: as written)."""

    name = "persistence"
    modeled = False

    def recorded_triggers(self, session: Session) -> frozenset[str]:
        """Recorded mode: never acts (the transcript holds what was persisted)."""
        return frozenset()

    def apply(self, ctx: StepContext) -> None:
        if ctx.mode != "whatif":
            return
        view = ctx.view
        session_dir = ctx.state.setdefault("session_dir", "~/.claude/projects/<project>/<session>")
        start, end = ctx.new_range
        for i in range(start, end):
            if not view.in_view(i):
                continue
            msg = view.messages[i]
            if msg.kind != "tool_result":
                continue
            for j, block in enumerate(msg.blocks):
                if block.type != "tool_result" or block.media:
                    continue
                text, current = view.block_state(i, j)
                if current is not None:
                    continue
                # Empty results keep what the transcript holds: versions that write the
                # "(X completed with no output)" marker have it in the record already.
                threshold = persistence_threshold(block.tool_name, ctx.config)
                size = result_size(text)
                if block.text.startswith(PERSISTED_OPEN):
                    # the raw output kept in the transcript can be shorter than what Claude Code
                    # measured (stderr, formatting): its own size, in the wrapper, decides
                    size = max(size, recorded_size(block.text))
                if text.startswith(PERSISTED_OPEN) or size <= threshold:
                    continue
                if block.text.startswith(PERSISTED_OPEN):
                    # Claude Code persisted this one too: its recorded wrapper is byte-exact
                    # (path and preview), which keeps the view identical to the recording.
                    wrapper = block.text
                else:
                    tool_use_id = block.tool_use_id or f"result-{i}-{j}"
                    path = persisted_path(
                        tool_use_id, is_list=block.is_list, session_dir=session_dir
                    )
                    wrapper = build_wrapper(text, path, ctx.config.preview_size_bytes)
                view.set_override(
                    i,
                    j,
                    view.make_override(
                        "persisted",
                        self.name,
                        wrapper,
                        ctx.k,
                        detail={
                            "original_chars": size,
                            "threshold": threshold,
                            "tool": block.tool_name,
                        },
                    ),
                )
                ctx.event(
                    self.name,
                    "persisted",
                    tool=block.tool_name,
                    tool_use_id=block.tool_use_id,
                    original_chars=size,
                    threshold=threshold,
                )
