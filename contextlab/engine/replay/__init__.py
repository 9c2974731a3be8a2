"""Replay: a session request by request through the pipeline; the engine's main entry point.

``driver`` replays a session (``replay``, ``resume``): pass 1 (``calibration``) measures every
thread's recorded view and fits its display calibration, then each thread is replayed in the
requested mode (``thread``), one request at a time: the pipeline steps change the view, then
``decision`` counts it as Claude Code would, ``cache_estimate`` models the prompt cache over
``cache_blocks``, and the request's row is priced. ``recording`` is what a thread's transcript
holds that the replay sets aside or puts back, ``state`` what a thread's parts share,
``checkpoints`` how a replay waiting for a summary is kept and resumed, and ``result`` what a
replay returns.
"""
