"""Record timestamps (ISO 8601, ``Z`` or an offset) as seconds since the epoch."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache


def epoch_seconds(stamp: str) -> float | None:
    """``stamp`` as seconds since the epoch; None when it is empty or not a timestamp."""
    if not stamp:
        return None
    if type(stamp) is str:
        # a replay reads a request's time several times (both passes, the cache model)
        return _parsed(stamp)
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@lru_cache(maxsize=8192)
def _parsed(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
