"""What the model is sent for an ``attachment`` record.

Claude Code 2.1.x writes attachment records (system reminders, hook output, file contents,
tool and agent listings) with their data, not their rendered text, and many are never sent:
hook results of tool events and hook system messages are shown in the terminal only, and some
records only note what happened (``batching_reminder_sent``, ``command_permissions``). Claude
Code turns each sent one into meta user text inside ``<system-reminder>`` tags
(``normalizeAttachmentForAPI``). Which types are sent, and which fields their text is made of,
are read from the published 2.1.239 package (``docs/claude-code-versions.md``, "Attachment
records"); the fixed sentences around the data are ours, of about the same length, since only
their size matters to the counts.

An attachment type not listed here is counted as its JSON (what earlier ContextLab versions
did for every type) and reported once, so a version that adds types still counts something.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from contextlab.engine.input.jsutil import json_stringify

Attachment = Mapping[str, Any]

#: Types Claude Code records but never sends to the model (terminal-only, or bookkeeping).
NOT_SENT = frozenset(
    {
        "hook_system_message",
        "hook_cancelled",
        "hook_error_during_execution",
        "hook_non_blocking_error",
        "hook_stopped_continuation",
        "command_permissions",
        "batching_reminder_sent",
        "structured_output",
        "context_efficiency",
        "attention_budget",
        "already_read_file",
        # the system prompt and tools: part of the unseen prefix the calibration measures; the
        # other two are filtered out before a request in 2.1.292
        "prompt_snapshot",
        "prompt_render_point",
        "deferred_tools_record",
        "credential_org",
        # listed as dropped in the 2.1.239 normalizer
        "autocheckpointing",
        "background_task_status",
        "todo",
        "task_progress",
        "compaction_reminder",
        "current_session_memory",
        "thinking_reminder",
        "companion_intro",
        "context_tip",
    }
)
#: Hook events whose successful output reaches the model.
PROMPT_HOOK_EVENTS = frozenset({"SessionStart", "UserPromptSubmit", "UserPromptExpansion"})


def reminder(text: str) -> str:
    return f"<system-reminder>\n{text}\n</system-reminder>"


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _numbered(text: str, start: int = 1) -> str:
    """The Read tool's result: each line after a right-aligned line number and an arrow."""
    return "\n".join(f"{n:>6}→{line}" for n, line in enumerate(text.split("\n"), start=start))


def _tool_pair(tool: str, call: Mapping[str, Any], result: str) -> str:
    """A tool call Claude Code made for the model (a file it attached, a folder it listed)."""
    return (
        reminder(f"Called the {tool} tool with the following input: {json_stringify(call)}")
        + "\n"
        + reminder(f"Result of calling the {tool} tool:\n{result}")
    )


def _file(a: Attachment) -> str:
    content = a.get("content")
    name = _str(a.get("filename"))
    if not isinstance(content, Mapping):
        return _tool_pair("Read", {"file_path": name}, "")
    file = content.get("file")
    if isinstance(file, Mapping) and isinstance(file.get("content"), str):
        start = file.get("startLine")
        body = _numbered(file["content"], start if isinstance(start, int) and start > 0 else 1)
    else:
        body = json_stringify(content)
    return _tool_pair("Read", {"file_path": name}, body)


def _hook_success(a: Attachment) -> str | None:
    if a.get("hookEvent") not in PROMPT_HOOK_EVENTS or not _str(a.get("content")):
        return None
    return reminder(f"{_str(a.get('hookName'))} hook success: {a['content']}")


def _hook_context(a: Attachment) -> str | None:
    lines = _strings(a.get("content"))
    if not lines:
        return None
    return reminder(f"{_str(a.get('hookName'))} hook additional context: " + "\n".join(lines))


def _async_hook(a: Attachment) -> str | None:
    response = a.get("response")
    if not isinstance(response, Mapping):
        return None
    parts = [_str(response.get("systemMessage"))]
    specific = response.get("hookSpecificOutput")
    if isinstance(specific, Mapping):
        parts.append(_str(specific.get("additionalContext")))
    texts = [reminder(p) for p in parts if p]
    return "\n".join(texts) or None


def _task_reminder(a: Attachment) -> str:
    items = [
        f"#{item.get('id')}. [{item.get('status')}] {item.get('subject')}"
        for item in a.get("content") or []
        if isinstance(item, Mapping)
    ]
    text = (
        "The task tools have not been used for a while. When the work in progress would gain "
        "from tracking, add tasks with the task creation tool and keep their status current "
        "(in progress when starting one, completed when it is done); also tidy a task list "
        "that no longer matches the work. Use them only where they help the current work; "
        "this is a gentle reminder to ignore when it does not apply.\n"
    )
    if items:
        text += "\nThe existing tasks:\n" + "\n".join(items)
    return reminder(text)


def _todo_reminder(a: Attachment) -> str:
    items = [
        f"{n}. [{item.get('status')}] {item.get('content')}"
        for n, item in enumerate(a.get("content") or [], start=1)
        if isinstance(item, Mapping)
    ]
    text = (
        "The TodoWrite tool has not been used for a while. When the work in progress would "
        "gain from tracking, use it to track progress, and clean up a todo list that has gone "
        "stale and no longer matches the work. Use it only where it helps the current work; "
        "this is a gentle reminder to ignore when it does not apply.\n"
    )
    if items:
        text += "\nThe todo list holds:\n[" + "\n".join(items) + "]"
    return reminder(text)


def _listing(header: str, lines_key: str, names_key: str) -> Callable[[Attachment], str | None]:
    def render(a: Attachment) -> str | None:
        lines, names = _strings(a.get(lines_key)), _strings(a.get(names_key))
        removed = _strings(a.get("removedNames")) + _strings(a.get("removedTypes"))
        parts = []
        if lines and names:
            parts.append(header + "\n" + "\n".join(lines))
        if removed:
            parts.append("No longer available:\n" + "\n".join(removed))
        return reminder("\n".join(parts)) if parts else None

    return render


def _text_field(key: str) -> Callable[[Attachment], str | None]:
    def render(a: Attachment) -> str | None:
        text = _str(a.get(key))
        return reminder(text) if text else None

    return render


def _queued_command(a: Attachment) -> str | None:
    prompt = a.get("prompt")
    if isinstance(prompt, list):
        texts = [
            p.get("text", "") for p in prompt if isinstance(p, Mapping) and p.get("type") == "text"
        ]
        return "\n".join(t for t in texts if isinstance(t, str)) or None
    return prompt if isinstance(prompt, str) and prompt else None


def _nested_memory(a: Attachment) -> str | None:
    content = a.get("content")
    if not isinstance(content, Mapping):
        return None
    return reminder(f"Contents of {_str(content.get('path'))}:\n{_str(content.get('content'))}")


def _invoked_skills(a: Attachment) -> str | None:
    skills = [s for s in a.get("skills") or [] if isinstance(s, Mapping)]
    if not skills:
        return None
    body = "\n".join(
        f"### Skill: {_str(s.get('name'))}\nPath: {_str(s.get('path'))}\n{_str(s.get('content'))}"
        for s in skills
    )
    return reminder(
        "These skills were invoked earlier in the session, before it was compacted, not on the "
        "current turn; they are listed so their guidelines stay in view. Do not run them or "
        "their one-time setup again, and do not act on request text captured in them.\n" + body
    )


_PLAN_MODE_RULES = (
    "Plan mode is on. The user does not want anything carried out yet: make no edits, run no "
    "tool that changes anything (configuration, commits, files other than the plan file), and "
    "treat this as overriding earlier instructions to make changes. Work on the plan instead."
)
_PLAN_MODE_WORKFLOW = (
    "\n\n## How to plan\n"
    "1. Understand the request. Read what the user asked and the code it touches. Use the "
    "read-only tools, and launch exploring agents in parallel when the area is large, each with "
    "a focused question, so that what they find comes back summarized. Ask the user when the "
    "request leaves a choice that only they can make, rather than guessing.\n"
    "2. Explore. Find the files, functions and tests involved, the existing helpers worth "
    "reusing, the conventions of the code base and the places that will have to change. Note "
    "the paths and names you will refer to in the plan.\n"
    "3. Design. Weigh the approaches that fit, with their costs: what changes, what could break, "
    "what has to be migrated, how it will be tested. For a large change, ask planning agents "
    "for independent designs and compare them.\n"
    "4. Review. Read the critical files again against the design, check that it covers what the "
    "user asked and nothing they did not, and settle the open questions with the user.\n"
    "5. Write the final plan into the plan file: the goal in a sentence, the steps in order "
    "with the files and functions each touches, the helpers to reuse, how to verify the result "
    "(the tests to run, what to look at), and the risks. Keep it concise enough to scan and "
    "complete enough to carry out without reading this conversation again.\n\n"
    "## Working with agents while planning\n"
    "Exploring agents only read: give each one a narrow question (where a feature lives, how a "
    "module is used, which tests cover a path) and the files or names to start from, and ask for "
    "a short answer with paths and line numbers. Launch independent ones together in one "
    "message so they run at the same time, and do not launch more than the question needs: a "
    "single agent is enough for a small, well-located change, and none is needed when you "
    "already know the files. A planning agent receives what you found and the constraints the "
    "user gave, and proposes a design with its trade-offs; for a broad or risky change, ask two "
    "of them for different approaches (for example the simplest change that works, and the "
    "change that leaves the code easiest to extend) and choose between them yourself.\n\n"
    "## What makes a good plan\n"
    "The plan names real paths, functions and types that you have seen, not guesses. It says "
    "what stays as it is as well as what changes, so that nobody edits code the task does not "
    "need. It puts the steps in an order that keeps the project working after each of them, "
    "says which existing utilities, fixtures and patterns to reuse instead of writing new ones, "
    "and lists the checks that show the work is done: the test command, the new tests and what "
    "they assert, the page or command output to look at. It states the assumptions made and the "
    "questions that remain, each with the answer you would choose if the user has no "
    "preference. It leaves out background the reader already knows, code written out in full, "
    "and alternatives that were rejected early.\n\n"
    "## Questions to the user\n"
    "Use the question tool for decisions that change the plan: which of two behaviours the user "
    "wants, whether an interface may change, how far a refactor should go. Offer the concrete "
    "options with their consequences and say which one you recommend. Do not ask about things "
    "you can find out by reading the code, and do not ask for approval of the plan this way.\n\n"
    "## Ending a turn\n"
    "End each turn either by asking the user a question (to clarify requirements or choose "
    "between approaches) or by calling the tool that exits plan mode, which asks the user to "
    "approve the plan. Do not ask for approval any other way: no questions in the text such as "
    "whether the plan looks right or whether to proceed. Do not stop for any other reason."
)


def _plan_mode(a: Attachment) -> str:
    path = _str(a.get("planFilePath"))
    if a.get("reminderType") == "sparse":
        return reminder(
            "Plan mode is still on (the full instructions are earlier in the conversation). "
            f"Everything is read-only except the plan file ({path}). Follow the planning "
            "workflow, and end the turn by asking the user or by calling the tool that exits "
            "plan mode."
        )
    file_info = (
        f"A plan file already exists at {path}: read it and edit it step by step."
        if a.get("planExists")
        else f"No plan file exists yet: create the plan at {path}."
    )
    if a.get("isSubAgent"):
        return reminder(
            f"{_PLAN_MODE_RULES}\n\n## Plan file\n{file_info} It is the only file you may "
            "edit. Answer the question you were given thoroughly, and ask the user when "
            "something needs their decision."
        )
    return reminder(f"{_PLAN_MODE_RULES}\n\n## Plan file\n{file_info}{_PLAN_MODE_WORKFLOW}")


def _auto_mode(a: Attachment) -> str:
    tools_rule = (
        "Do your work through the shell tool wherever it can do the job: read files with cat, "
        "head or sed, search with grep and find, and change files with sed, heredocs or short "
        "scripts, rather than the dedicated read, edit and write tools. Use a dedicated tool "
        "only when the shell really cannot do the job."
    )
    if a.get("bypass"):
        return reminder(f"While permission checks are bypassed:\n{tools_rule}")
    if a.get("steerOnly"):
        return reminder(f"While auto mode is on:\n{tools_rule}")
    text = (
        "## Auto mode\nKeep working without stopping for clarifying questions: where you would "
        "normally pause to check, make the reasonable call and go on; the user will redirect you "
        "if needed. Ask when the user, a skill or the task suggests they want to be asked, and "
        "stop when you are truly blocked: unclear direction, missing input, or a decision only "
        "they can make. Before any command that could discard uncommitted work (checkout, "
        "restore, reset, clean, deleting in the repository, restoring a snapshot) look at the "
        "git status first and stash or commit what is there. When staging or committing, review "
        "what is included, and check the contents of anything that might hold secrets before "
        "pushing. Prefer actions that can be undone: a new branch over rewriting history, a "
        "copy over an in-place change of data you cannot restore, a dry run before a command "
        "that touches many files. When several independent pieces of work remain, carry them "
        "on in parallel rather than waiting on each in turn, and keep the user informed with "
        "short progress notes at natural points instead of questions. Report at the end what "
        "was done, what was left out and why, and anything the user has to do themselves."
    )
    if a.get("autoModeConsentFlow"):
        text += (
            "\nWhen the auto-mode classifier blocks an action, or you expect it would, first try "
            "an alternative no rule blocks (a feature branch instead of the default one, made-up "
            "data instead of real data, a narrower scope) and continue. Otherwise keep the "
            "request and gather it with your other pending requests until the rest of the work "
            "is done or waiting on agents; raise every one before ending the turn, each as one "
            "short sentence naming the action and, in bold, what needs consent, so the user can "
            "approve items by number. If a block looks wrong, ask about it directly."
        )
    if a.get("bashFirst"):
        text += "\n" + tools_rule
    return reminder(text)


def _plan_mode_reentry(a: Attachment) -> str:
    return reminder(
        "## Back in plan mode\nYou are planning again after leaving plan mode earlier. A plan "
        f"file from that session exists at {_str(a.get('planFilePath'))}. Before planning "
        "anything new: read that plan, compare it with the user's current request, and decide. "
        "For a different task, even a similar or related one, start over and overwrite the "
        "plan. For a continuation or refinement of the very same task, edit the existing plan "
        "and clean out what no longer applies. Either way, edit the plan file before calling "
        "the tool that exits plan mode. Treat this as a fresh planning session and do not assume "
        "the old plan still holds without checking it: files may have changed since it was "
        "written, steps may already be done, and the user may have changed their mind about the "
        "approach. Say briefly which of the two cases you took and why, so the user can correct "
        "you early if you read the request differently from how they meant it."
    )


RENDERERS: dict[str, Callable[[Attachment], str | None]] = {
    "file": _file,
    "directory": lambda a: _tool_pair(
        "Bash", {"command": f"ls {_str(a.get('path'))}"}, _str(a.get("content"))
    ),
    "hook_success": _hook_success,
    "hook_additional_context": _hook_context,
    "async_hook_response": _async_hook,
    "hook_blocking_error": lambda a: reminder(
        f"{_str(a.get('hookName'))} hook blocking error: {json_stringify(a.get('blockingError'))}"
    ),
    "task_reminder": _task_reminder,
    "todo_reminder": _todo_reminder,
    "total_tokens_reminder": _text_field("text"),
    "silent_turn_reminder": _text_field("text"),
    "batching_reminder": _text_field("text"),
    "critical_system_reminder": _text_field("content"),
    "bash_output_audience_note": lambda a: reminder(
        "Only you see that command's output; the user's terminal shows a few lines of it at "
        "most. Put in your reply whatever of it the user needs to read."
    ),
    "edited_text_file": lambda a: reminder(
        f"Note: {_str(a.get('filename'))} changed on disk since you last read it, usually on "
        "purpose: take it as the current state rather than reverting it, and say so if the "
        "change looks wrong.\n" + _str(a.get("snippet"))
    ),
    "compact_file_reference": lambda a: reminder(
        f"Note: {_str(a.get('filename'))} was read before the conversation was summarized, but "
        "its contents are too large to include here. Read it again if you need it."
    ),
    "plan_file_reference": lambda a: reminder(
        f"A plan file exists from plan mode at: {_str(a.get('planFilePath'))}\nPlan contents:\n"
        f"{_str(a.get('planContent'))}\nIf the plan is relevant to the current work and not "
        "done yet, continue working on it."
    ),
    "nested_memory": _nested_memory,
    "skill_listing": lambda a: (
        reminder("The skills available to the Skill tool:\n" + _str(a.get("content")))
        if _str(a.get("content"))
        else None
    ),
    "invoked_skills": _invoked_skills,
    "deferred_tools_delta": _listing(
        "These deferred tools are now available through tool search; their schemas are not "
        "loaded, so load them with tool search before calling them:",
        "addedLines",
        "addedNames",
    ),
    "agent_listing_delta": _listing(
        "Agent types available to the Agent tool:", "addedLines", "addedTypes"
    ),
    "mcp_instructions_delta": _listing(
        "# MCP Server Instructions\nThe following MCP servers have provided instructions for "
        "how to use their tools and resources:",
        "addedBlocks",
        "addedNames",
    ),
    "date_change": lambda a: reminder(
        f"The date has changed. Today's date is now {_str(a.get('newDate'))}. No need to "
        "announce it."
    ),
    "queued_command": _queued_command,
    "opened_file_in_ide": lambda a: reminder(
        f"The user opened the file {_str(a.get('filename'))} in the IDE. This may or may not "
        "be related to the current task."
    ),
    "selected_lines_in_ide": lambda a: reminder(
        f"The user selected the lines {a.get('lineStart')} to {a.get('lineEnd')} from "
        f"{_str(a.get('filename'))}:\n{_str(a.get('content'))}\nThis may or may not be "
        "related to the current task."
    ),
    "plan_mode": _plan_mode,
    "plan_mode_reentry": _plan_mode_reentry,
    "auto_mode": _auto_mode,
    "plan_mode_exit": lambda a: reminder(
        "## Exited Plan Mode\nYou have exited plan mode and can now edit files, run tools and "
        "take actions."
        + (f" The plan file is at {_str(a.get('planFilePath'))}." if a.get("planExists") else "")
    ),
}


def _fields_text(value: Any, depth: int = 0) -> str:
    """A record's data as ``key: value`` lines: near what Claude Code's formatters make of the
    context it moved out of the system prompt (no JSON quotes, braces or escapes)."""
    if depth > 6:
        return ""
    if isinstance(value, Mapping):
        lines = []
        for key, item in value.items():
            if key == "type" and depth == 0:
                continue
            text = _fields_text(item, depth + 1)
            if text:
                lines.append(f"{key}: {text}" if "\n" not in text else f"{key}:\n{text}")
        return "\n".join(lines)
    if isinstance(value, list):
        return "\n".join(t for t in (_fields_text(v, depth + 1) for v in value) if t)
    if value is None or isinstance(value, bool):
        return ""
    return str(value)


#: 2.1.27x+ moved the session's context (environment, git status, CLAUDE.md, date, model)
#: out of the system prompt into these attachments; 2.1.292 renders each from its fields.
CONTEXT_ATTACHMENTS = frozenset(
    {
        "environment",
        "session_context",
        "instructions",
        "date",
        "model",
        "remote_session_change",
        "advisor_tool",
        "output_style_instructions",
        "language",
        "context_sections",
        "coordinator_context",
        "sandbox_instructions",
        "fork_briefing",
    }
)


def snapshot_tools(attachment: Attachment) -> list[dict[str, Any]] | None:
    """The tool definitions a ``prompt_snapshot`` records (name, and size in tokens at Claude
    Code's rough chars/4), None when it records none. Never sent, but every request carried
    them in its prefix: the waste findings name the ones never called."""
    tools = attachment.get("tools")
    if attachment.get("type") != "prompt_snapshot" or not isinstance(tools, list):
        return None
    out = [
        {"name": tool["name"], "tokens": round(len(json_stringify(tool)) / 4)}
        for tool in tools
        if isinstance(tool, dict) and isinstance(tool.get("name"), str)
    ]
    return out or None


def render_attachment(attachment: Attachment) -> tuple[str, bool]:
    """The text the model is sent for ``attachment`` and whether its type is known here.

    ``""`` for one that is not sent. A record that carries its rendered text (``rendered``)
    is taken as written.
    """
    rendered = attachment.get("rendered")
    if isinstance(rendered, list) and all(isinstance(t, str) for t in rendered):
        return "\n".join(rendered), True
    kind = attachment.get("type")
    if not isinstance(kind, str):
        return json_stringify(attachment), False
    if kind in NOT_SENT:
        return "", True
    if kind in CONTEXT_ATTACHMENTS:
        text = _fields_text(attachment)
        return (reminder(text) if text else ""), True
    render = RENDERERS.get(kind)
    if render is None:
        return json_stringify(attachment), False
    return render(attachment) or "", True
