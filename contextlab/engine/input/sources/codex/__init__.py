"""The OpenAI Codex CLI adapter (CLI, VS Code and desktop clients write the same rollouts).

Codex writes one rollout per session, ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``.
Since 0.45 (about) every line is ``{timestamp, type, payload}`` with types ``session_meta``,
``turn_context``, ``response_item``, ``event_msg`` and ``compacted``; older versions wrote a
first line with ``id``/``instructions`` and then the bare response items. ``items`` reads both
into one stream of items, ``calls`` cuts it into model calls (one per de-duplicated
``token_count`` event) and ``adapter`` builds the engine's ``Session``.
"""
