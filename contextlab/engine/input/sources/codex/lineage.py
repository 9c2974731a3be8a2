"""Forked and subagent rollouts: which leading part of a rollout is its parent's history, copied.

A rollout Codex starts from another one (``/fork``, a forked thread in the desktop and VS Code
clients, a subagent spawned with its parent's context) names its parent in ``session_meta``
(``forked_from_id``; a subagent's ``source: {"subagent": {"thread_spawn": {"parent_thread_id":
…}}}``) and then writes the parent's rollout items again, token counts included, in one burst at
the moment of the fork. Its cumulative ``total_token_usage`` goes on from the parent's total. Read
as the rollout's own, the copied part counts the parent's calls a second time.

The copied part is the burst: the records after ``session_meta`` written less than
``BURST_GAP_S`` apart (a copy is written in one go; a call of the rollout's own waits for the
model, which takes longer). Where the parent rollout is in the same upload, the copied part is
instead the leading items the two rollouts have in common.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contextlab.engine.input.json_line import decode_json_line
from contextlab.engine.input.loading import TranscriptFile, iter_lines
from contextlab.engine.input.timestamps import epoch_seconds

#: Largest gap, in seconds, between two records of the burst that copies a parent's history.
BURST_GAP_S = 0.3


@dataclass(frozen=True)
class Parent:
    """What a rollout's ``session_meta`` says of the rollout it was started from."""

    #: "fork" (forked_from_id) or "subagent" (source.subagent)
    kind: str
    #: the parent's session id, where the rollout names it
    id: str | None


def parent_of(meta: dict[str, Any]) -> Parent | None:
    """The parent a ``session_meta`` payload names, if any (fields of the wrong type ignored)."""
    for key in ("forked_from_id", "forked_from"):
        value = meta.get(key)
        if isinstance(value, dict):
            value = value.get("id")
        if isinstance(value, str) and value:
            return Parent("fork", value)
    source = meta.get("source")
    subagent = source.get("subagent") if isinstance(source, dict) else None
    if subagent is not None or meta.get("thread_source") == "subagent":
        spawn = subagent.get("thread_spawn") if isinstance(subagent, dict) else None
        parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
        # later versions also name it beside ``thread_source`` (``parent_thread_id``)
        parent = parent if isinstance(parent, str) and parent else meta.get("parent_thread_id")
        return Parent("subagent", parent if isinstance(parent, str) and parent else None)
    return None


class CopiedBurst:
    """Follows a child rollout's records and says whether each is still in the copied burst."""

    def __init__(self, start: str) -> None:
        self.previous = epoch_seconds(start)
        self.open = self.previous is not None

    def copied(self, stamp: str) -> bool:
        """Whether the record written at ``stamp`` belongs to the copied burst (the burst ends
        at the first record written later than ``BURST_GAP_S`` after the one before it, or
        with no readable time)."""
        if not self.open:
            return False
        now = epoch_seconds(stamp)
        if now is None or self.previous is None or now - self.previous > BURST_GAP_S:
            self.open = False
            return False
        self.previous = now
        return True


def item_key(payload: dict[str, Any]) -> str:
    """A response item's identity for comparing two rollouts' leading items: its JSON without
    the fields a copy may write afresh (``id``)."""
    return json.dumps({k: v for k, v in payload.items() if k != "id"}, sort_keys=True)


class ChildRollout:
    """A forked or subagent rollout: its parent, and which of its leading records copy the
    parent's history (the items it shares with the parent rollout, where the upload holds
    that, else the burst written at the fork)."""

    def __init__(self, parent: Parent, start: str, siblings: Sequence[TranscriptFile]) -> None:
        self.parent = parent
        self.burst = CopiedBurst(start)
        self.parent_items = parent_rollout_items(siblings, parent.id)
        self.copying = False
        self.records = 0
        self.items = 0
        #: the copied token counts (the parent's calls)
        self.counts = 0

    def copied(self, kind: str, payload: dict[str, Any], stamp: str) -> bool:
        """Whether this record (after ``session_meta``) is still the parent's history."""
        if self.parent_items is None:
            self.copying = self.burst.copied(stamp)
        elif self.records and not self.copying:
            pass  # the copy ended: nothing after it is the parent's
        elif kind != "response_item":
            self.copying = True
        else:
            at = self.items
            self.copying = (
                at < len(self.parent_items) and item_key(payload) == self.parent_items[at]
            )
            self.items += self.copying
        self.records += self.copying
        return self.copying

    def note(self, carried_input: int) -> str:
        """What the copy was and what is left out because of it, in a sentence."""
        what = "forked from" if self.parent.kind == "fork" else "a subagent of"
        how = (
            "the items it shares with the parent rollout in this upload"
            if self.parent_items is not None
            else "the records written at the fork"
        )
        return (
            f"{what} {self.parent.id or 'a session not named'}: its first {self.records:,} "
            f"record(s) copy the parent's history ({how}); their {self.counts:,} token count(s) "
            f"are the parent's calls and are not counted here, nor the {carried_input:,} input "
            "tokens the cumulative totals carried over"
        )


def parent_rollout_items(
    siblings: Sequence[TranscriptFile], parent_id: str | None
) -> list[str] | None:
    """The response items of the parent rollout, when the upload holds it (a file whose
    ``session_meta`` has the parent's id); None otherwise."""
    if parent_id is None:
        return None
    for sibling in siblings:
        items: list[str] = []
        for number, text, _ in iter_lines(sibling, []):
            try:
                obj, _ = decode_json_line(text)
            except ValueError:
                continue
            payload = obj.get("payload") if isinstance(obj, dict) else None
            if number == 1 and not (
                isinstance(payload, dict)
                and obj.get("type") == "session_meta"
                and payload.get("id") == parent_id
            ):
                break  # not the parent
            if isinstance(payload, dict) and obj.get("type") == "response_item":
                items.append(item_key(payload))
        else:
            return items
    return None
