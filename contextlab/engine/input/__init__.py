"""Input: the bytes of an upload read within bounds, and the agent-neutral session model.

``loading`` opens an upload (a ``.jsonl``, a ``.jsonl.gz`` or ``.jsonl.zst``, a session folder
as a zip or tar.gz) and ``lines`` reads its files line by line; ``sources`` turns them into the engine's
``Session`` (``session``: threads of ``model`` messages), one adapter per agent; the caches
keep a parsed session for the next replay.
"""
