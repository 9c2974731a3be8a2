"""A Celery worker whose replays crawl (0.3 s per request), so a test can kill it mid-run.

Test-only: production code has no such hook; this wraps ``engine.replay`` before the worker
starts, then hands over to Celery's own command line.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from celery.__main__ import main

from contextlab import engine

_real_replay = engine.replay


def _slow_replay(session: Any, config: Any, **kwargs: Any) -> Any:
    progress = kwargs.pop("progress")

    def crawl(done: int, total: int) -> None:
        time.sleep(0.3)
        progress(done, total)

    return _real_replay(session, config, progress=crawl, **kwargs)


engine.replay = _slow_replay  # type: ignore[assignment]

if __name__ == "__main__":
    sys.argv[0] = "celery"
    sys.exit(main())
