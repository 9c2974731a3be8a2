"""The words sent to a summarizing model and the shape of what comes back.

Everything here is part of a stored summary's identity: ``PROMPT_VERSION`` is in every cache key
(``stored.summary_key``) and the prompt text is hashed into it, so a change to any wording below
orphans every stored summary. Change it only together with the version.
"""

from __future__ import annotations

import re

#: In every stored summary's key: bump it when the compaction wording changes.
PROMPT_VERSION = "contextlab-compact-1"
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


# A Codex session's what-if compaction: our own wording of what Codex's compaction asks for (a
# hand-off note for the model that carries on), not its text. Codex's summaries are shorter and
# looser than Claude Code's nine sections; this asks for the same four things Codex's does.
CODEX_COMPACT_BODY = (
    "Your context is nearly full. Write a hand-off note for the model that will carry on this "
    "task from your note alone; the conversation above will be replaced by it.\n\n"
    "Cover, briefly and concretely: where the work stands and the key decisions taken; the "
    "context, constraints and preferences of the user that still apply; what remains to be "
    "done, as clear next steps; and the exact data the next model needs to continue (file "
    "paths, identifiers, commands, error messages, examples), quoted rather than paraphrased.\n\n"
    "Answer with the note only, inside <summary> tags."
)


def codex_compact_prompt(custom_instructions: str = "") -> str:
    """The compaction request of a what-if compaction in a Codex session."""
    parts = [CODEX_COMPACT_BODY]
    if custom_instructions.strip():
        parts.append("Additional Instructions:\n" + custom_instructions.strip())
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
