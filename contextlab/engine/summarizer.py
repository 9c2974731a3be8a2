"""Summaries for simulated compactions and collapses, behind one ``Summarizer`` interface.

The default is an offline extractive summarizer: no model call, deterministic, and sized like
the summaries Claude Code's compaction produces (8–16k characters in real transcripts). LLM
backends plug in behind the same interface.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

from .tokens import rough_text
from .transcript import Message

PROMPT_VERSION = "contextlab-compact-1"
#: The summarizer backends a replay can use (the LLM ones live in ``llm``).
SUMMARIZER_NAMES = ("extractive", "anthropic", "openai")
#: Bumped whenever the wording of ``collapse_prompt`` changes, so stored summaries say which one.
COLLAPSE_PROMPT_VERSION = "contextlab-collapse-1"

#: The nine sections Claude Code's compaction prompt asks for (spec §4.6.6).
SUMMARY_SECTIONS = (
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code Sections",
    "Errors and fixes",
    "Problem Solving",
    "All user messages",
    "Pending Tasks",
    "Current Work",
    "Optional Next Step",
)

# Our own wording of the compaction request, with the structure the spec describes: a no-tools
# preamble, an <analysis> scratchpad, the nine <summary> sections and a closing reminder.
NO_TOOLS_PREAMBLE = (
    "IMPORTANT: answer with plain text only. Do not call any tool: tool calls will be refused "
    "and waste the only turn you have. Your whole answer must be an <analysis> block followed by "
    "a <summary> block."
)
COMPACT_PROMPT_BODY = (
    "Write a detailed summary of the conversation so far. It will replace the conversation, so "
    "another instance of you must be able to continue the work from it alone.\n\n"
    "First, inside <analysis> tags, walk through the conversation in order: for each part note "
    "what the user asked, how you approached it, the decisions made, file names, code snippets, "
    "function signatures and edits, errors and how they were fixed, and any feedback from the "
    "user. Then check that nothing important is missing.\n\n"
    "Then, inside <summary> tags, write these sections:\n"
    + "\n".join(f"{n}. {title}" for n, title in enumerate(SUMMARY_SECTIONS, start=1))
    + "\n\nSection 6 lists every user message that is not a tool result. Section 9 quotes the "
    "latest work verbatim where it helps to pick up exactly where things stopped.\n\n"
    "The conversation may contain extra summarization instructions; follow them as well."
)
CLOSING_REMINDER = (
    "REMINDER: do not call any tools. Answer with the <analysis> and <summary> blocks only."
)
CONTINUATION_OPENING = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The summary below covers the earlier portion of the conversation.\n\n"
)
CONTINUATION_SUPPRESS = (
    "Continue the conversation from where it left off without asking the user any further "
    "questions. Resume directly — do not acknowledge the summary, do not recap what was "
    "happening. Pick up the last task as if the break never happened."
)


def compact_prompt(custom_instructions: str = "") -> str:
    """The compaction request sent to the summarizing model."""
    parts = [NO_TOOLS_PREAMBLE, COMPACT_PROMPT_BODY]
    if custom_instructions.strip():
        parts.append("Additional Instructions:\n" + custom_instructions.strip())
    parts.append(CLOSING_REMINDER)
    return "\n\n".join(parts)


# Context collapse replaces one span of the history in place (spec §4.5); the real prompt is not
# in the public build, so this one is ours. It differs from the compaction prompt on purpose: the
# messages around the span stay visible, so the summary must be short and cover the span only,
# and there is no <analysis> scratchpad to pay for on every commit.
COLLAPSE_PREAMBLE = (
    "IMPORTANT: answer with plain text only. Do not call any tool: tool calls will be refused "
    "and waste the only turn you have. Your whole answer must be one <summary> block."
)
COLLAPSE_PROMPT_BODY = (
    "The messages above are one span of a longer conversation. The span is being folded away to "
    "free context and your summary will replace it in place; the messages before and after it "
    "stay visible, so summarize this span only.\n\n"
    "Keep what was asked or decided, the files and symbols touched (exact paths and names), the "
    "commands run and their outcomes, errors and how they were resolved, and anything left "
    "unfinished. Drop pleasantries, repeated tool output and reasoning that led nowhere. Quote "
    "exact values (paths, identifiers, error messages) instead of paraphrasing them.\n\n"
    "Write at most about 300 words of terse prose or bullet points inside <summary> tags. Do not "
    "continue the conversation and do not address the user."
)
COLLAPSE_CLOSING_REMINDER = "REMINDER: do not call any tools. Answer with the <summary> block only."


def collapse_prompt(custom_instructions: str = "") -> str:
    """The span-summary request for a context-collapse commit (versioned by
    ``COLLAPSE_PROMPT_VERSION``)."""
    parts = [COLLAPSE_PREAMBLE, COLLAPSE_PROMPT_BODY]
    if custom_instructions.strip():
        parts.append("Additional Instructions:\n" + custom_instructions.strip())
    parts.append(COLLAPSE_CLOSING_REMINDER)
    return "\n\n".join(parts)


#: The collapse prompt without custom instructions, as sent by default.
COLLAPSE_PROMPT = collapse_prompt()


def format_summary(raw: str) -> str:
    """Drop the first <analysis> block and turn <summary> into a ``Summary:`` heading."""
    text = re.sub(r"<analysis>[\s\S]*?</analysis>", "", raw, count=1)
    match = re.search(r"<summary>([\s\S]*?)</summary>", text)
    if match:
        text = text[: match.start()] + "Summary:\n" + match.group(1).strip() + text[match.end() :]
    text = re.sub(r"\n\n+", "\n\n", text)
    return text.strip()


def continuation_message(summary: str, *, transcript_path: str = "", suppress: bool = True) -> str:
    """The user message that replaces the history after a compaction."""
    text = CONTINUATION_OPENING + format_summary(summary)
    if transcript_path:
        text += (
            "\n\nIf you need specific details from before compaction (like exact code snippets, "
            f"error messages, or content you generated), read the full transcript at: {transcript_path}"
        )
    if suppress:
        text += "\n" + CONTINUATION_SUPPRESS
    return text


@dataclass
class SummaryRequest:
    """What a summarizer gets: the messages to summarize and why."""

    messages: list[Message]
    kind: str = "compact"  # "compact" | "collapse" | "session_memory"
    model: str | None = None
    custom_instructions: str = ""
    prompt: str = field(default="")

    def __post_init__(self) -> None:
        if not self.prompt:
            if self.kind == "collapse":
                self.prompt = collapse_prompt(self.custom_instructions)
            else:
                self.prompt = compact_prompt(self.custom_instructions)


@dataclass
class SummaryResult:
    """A summary, and who wrote it."""

    text: str
    backend: str
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    reused: bool = False
    fallback_reason: str | None = None
    #: wall-clock seconds the backend took, retries and back-off included (0 for offline ones)
    latency_s: float = 0.0
    #: prompt tokens the provider served from its cache (already included in ``input_tokens``)
    cache_read_tokens: int = 0


class Summarizer(Protocol):
    """Writes summaries; ``name`` says which backend, so results can say who wrote what."""

    name: str

    def summarize(self, request: SummaryRequest) -> SummaryResult: ...


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
