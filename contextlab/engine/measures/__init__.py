"""Measures: how big a prompt is, what the cache holds, what it costs, and what a model allows.

``tokens`` counts a prompt both ways (Claude Code's own estimate, which its thresholds compare,
and calibrated tiktoken for display), ``anchors`` ties the display count to the recorded
usage where the transcript cannot show what was sent, ``prompt_cache`` models the API's
prompt cache, ``cost`` prices a request, and ``model_limits`` holds each model's window, output
reserve and cache minimum (``data/``).
"""
