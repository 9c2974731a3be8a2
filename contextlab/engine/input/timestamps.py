"""Record timestamps (ISO 8601, ``Z`` or an offset) as seconds since the epoch."""

from __future__ import annotations

from datetime import datetime


def epoch_seconds(stamp: str) -> float | None:
    """``stamp`` as seconds since the epoch; None when it is empty or not a timestamp."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
