"""What Codex's history holds after it rewrote it: the prompts a local compaction kept where the
rollout does not say, and where a rollback (``thread_rolled_back``) cut the conversation.

A rollback (``/undo`` of a turn in the clients, an app's "edit and resend": an ``event_msg`` of
type ``thread_rolled_back`` with ``num_turns``) removes the last ``num_turns`` user turns from
the history Codex sends: everything from the ``num_turns``-th newest user prompt on (all the
turns when there are fewer, keeping what came before the first prompt). The rollout keeps the
removed items before the event; the calls made in them happened, and were paid for.
"""

from __future__ import annotations

from contextlab.engine.input.model import Block, Message
from contextlab.engine.input.session import Thread

from .items import Item

#: A local compaction keeps the newest user prompts up to about this many characters
#: (Codex keeps about 20,000 tokens of them; modelled where no ``replacement_history`` says).
KEPT_PROMPT_CHARS = 80_000


def modeled_kept(messages: list[Message], boundary: int) -> list[Item]:
    """A local compaction without ``replacement_history``: the newest user prompts since the
    previous compaction, up to ``KEPT_PROMPT_CHARS`` (modelled on what Codex keeps)."""
    kept: list[Item] = []
    size = 0
    for message in reversed(messages[:boundary]):
        if message.kind == "compact_boundary":
            break
        if message.kind != "prompt":
            continue
        text = "\n".join(b.text for b in message.blocks)
        if size + len(text) > KEPT_PROMPT_CHARS:
            break
        size += len(text)
        kept.append(Item("user", [Block("text", text)]))
    kept.reverse()
    return kept


def rollback_cut(messages: list[Message], num_turns: object) -> int | None:
    """The index in ``messages`` where a rollback of ``num_turns`` user turns cuts the history:
    the ``num_turns``-th newest prompt since the last compaction (whose kept prompts are
    prompts too, as in Codex's history), or the first of them when there are fewer; None when
    there is nothing to cut (no prompt, or a count that is no positive whole number)."""
    if not isinstance(num_turns, int) or isinstance(num_turns, bool) or num_turns <= 0:
        return None
    start = 0
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].kind == "compact_boundary":
            start = index + 1
            break
    prompts = [i for i in range(start, len(messages)) if messages[i].kind == "prompt"]
    if not prompts:
        return None
    return prompts[-num_turns] if num_turns < len(prompts) else prompts[0]


def rolled_back_branch(
    messages: list[Message], num_turns: object, branch_id: str, file: str
) -> tuple[Thread | None, str]:
    """A rollback applied to the main thread's ``messages`` (cut in place): the branch that
    holds the turns it removed (the main thread up to the cut, then them), and the sentence
    reporting it; no branch when there is nothing to cut."""
    cut = rollback_cut(messages, num_turns)
    if cut is None:
        return None, (
            f"a rollback of {num_turns!r} turn(s) with no prompt to cut at since the last "
            "compaction: ignored"
        )
    branch = Thread(id=branch_id, kind="branch", messages=[*messages], file=file, fork_index=cut)
    removed = len(messages) - cut
    del messages[cut:]
    return branch, (
        f"{num_turns} user turn(s) rolled back: their {removed} item(s) were sent to no later "
        "call (a branch of their own here; their calls are counted)"
    )
