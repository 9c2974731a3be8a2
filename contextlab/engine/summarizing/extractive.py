"""The offline default: a summary picked from the conversation itself, no model call.

Its output is part of every what-if replay's result (``bench/replay_identity.py`` checks it byte
for byte), so any change here changes every extractive result.
"""

from __future__ import annotations

import re

from contextlab.engine.input.model import Message
from contextlab.engine.input.rough import rough_text

from .interface import SummaryRequest, SummaryResult
from .prompts import SUMMARY_SECTIONS


class ExtractiveSummarizer:
    """Offline summarizer: picks sentences from the conversation into the nine sections.

    Deterministic; never calls a model. Its length follows the input (about 6 % of it, between
    2,000 and 16,000 characters), in the range of real compaction summaries.
    """

    name = "extractive"

    def __init__(self, min_chars: int = 2000, max_chars: int = 16000, share: float = 0.06) -> None:
        self.min_chars = min_chars
        self.max_chars = max_chars
        self.share = share

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        messages = request.messages
        input_chars = sum(len(b.text) for m in messages for b in m.blocks)
        budget = int(min(self.max_chars, max(self.min_chars, input_chars * self.share)))
        prompts = [
            _first_line_block(m, 400)
            for m in messages
            if m.role == "user" and m.kind in ("prompt", "command") and not m.is_meta
        ]
        prompts = [p for p in prompts if p]
        files: list[str] = []
        errors: list[str] = []
        for m in messages:
            for b in m.blocks:
                if b.type == "tool_use" and isinstance(b.data, dict):
                    path = (
                        b.data.get("file_path") or b.data.get("path") or b.data.get("notebook_path")
                    )
                    if isinstance(path, str) and path not in files:
                        files.append(path)
                elif b.type == "tool_result" and b.is_error:
                    errors.append(_clip(b.text, 200))
        assistant_texts = [
            _clip(b.text, 600)
            for m in messages
            if m.role == "assistant"
            for b in m.blocks
            if b.type == "text" and b.text.strip()
        ]
        sections = {
            SUMMARY_SECTIONS[0]: prompts[:1] or ["(no user request found)"],
            SUMMARY_SECTIONS[1]: _keywords(assistant_texts, 12),
            SUMMARY_SECTIONS[2]: files[-20:] or ["(no files touched)"],
            SUMMARY_SECTIONS[3]: errors[-8:] or ["(none recorded)"],
            SUMMARY_SECTIONS[4]: assistant_texts[-6:-2] or ["(see current work)"],
            SUMMARY_SECTIONS[5]: prompts or ["(none)"],
            SUMMARY_SECTIONS[6]: prompts[-1:] or ["(none)"],
            SUMMARY_SECTIONS[7]: assistant_texts[-2:] or ["(none)"],
            SUMMARY_SECTIONS[8]: assistant_texts[-1:] or ["(none)"],
        }
        lines = ["<summary>"]
        for n, (title, items) in enumerate(sections.items(), start=1):
            lines.append(f"{n}. {title}:")
            lines.extend(f"   - {item}" for item in items)
            lines.append("")
        lines.append("</summary>")
        text = "\n".join(lines)
        if len(text) > budget:
            text = text[: budget - 12].rsplit("\n", 1)[0] + "\n</summary>"
        return SummaryResult(
            text=text,
            backend=self.name,
            model=None,
            input_tokens=sum(rough_text(b.text) for m in messages for b in m.blocks),
            output_tokens=rough_text(text),
        )


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_line_block(message: Message, limit: int) -> str:
    text = " ".join(b.text for b in message.blocks if b.type == "text")
    return _clip(text, limit)


def _keywords(texts: list[str], count: int) -> list[str]:
    freq: dict[str, int] = {}
    for text in texts:
        for word in re.findall(r"[A-Za-z_][A-Za-z0-9_.]{5,}", text):
            freq[word] = freq.get(word, 0) + 1
    ranked = sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))
    return [w for w, _ in ranked[:count]] or ["(none)"]
