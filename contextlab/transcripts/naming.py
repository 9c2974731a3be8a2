"""One name for a session on every page, picker, share page and export.

The session's title (the one a person gave, else Claude Code's own), else its first prompt;
Claude Code's markup stripped (a title or prompt may be a ``<teammate-message …>`` wrapper), on
one line, shortened. The file name is only a detail: real transcripts are named ``<uuid>.jsonl``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: longest display name, characters (the rest is cut with an ellipsis)
NAME_CHARS = 80
#: longest first prompt kept on the row (cut to NAME_CHARS when shown)
PROMPT_CHARS = 200

#: Claude Code's own wrappers (``<teammate-message …>``, ``<command-name>``,
#: ``<system-reminder>``): a name with a hyphen or underscore, which no HTML tag has, so text
#: a person typed (``Ship it <b>now</b>``) stays as typed, and is escaped where shown
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*[-_][\w:-]*(?:\s[^<>]*)?/?>")
#: line breaks and tabs, with the spaces around them (a name is one line; spaces a person
#: typed inside a line are kept)
_BREAK = re.compile(r"\s*[\r\n\t\f\v]+\s*")


def plain(text: str, limit: int = NAME_CHARS) -> str:
    """``text`` without markup tags, on one line, cut to ``limit`` characters."""
    flat = _BREAK.sub(" ", _TAG.sub(" ", text or "")).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def display_name(title: str, first_prompt: str, file_name: str) -> str:
    """The title, else the first prompt, else the file name (see the module docstring)."""
    return plain(title) or plain(first_prompt) or file_name


def first_prompt(prompts: Iterable[str]) -> str:
    """The first of a session's typed prompts that says anything once its markup is gone."""
    for text in prompts:
        found = plain(text, PROMPT_CHARS)
        if found:
            return found
    return ""
