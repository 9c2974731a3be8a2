"""Instructions of one Codex/Claude Code replay (or of ``codex_truth``'s parse floor) in a warm
process, for before/after comparisons that wall time on a shared machine cannot make.

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect='ffi_call*' \\
        .venv/bin/python bench/callgrind_replay.py FILE [--floor] [--times N]

A first replay (or floor) warms the process (imports, the encoder, the memoized parses); the
measured ones run inside a ctypes callback, so ``--toggle-collect='ffi_call*'`` counts them
alone ("Collected" in valgrind's summary): load + recorded replay + ``to_json``, or
``parse_floor``. The script puts its own checkout first on ``sys.path``.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from codex_truth import parse_floor  # noqa: E402

from contextlab.engine.config.resolve import resolve_session_config  # noqa: E402
from contextlab.engine.input.sources.registry import load_session  # noqa: E402
from contextlab.engine.measures.tokens import TiktokenCounter  # noqa: E402
from contextlab.engine.replay.driver import replay  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--floor", action="store_true", help="the parse floor, not the replay")
    parser.add_argument("--times", type=int, default=1, help="measured runs (default 1)")
    args = parser.parse_args()
    counter = TiktokenCounter()

    def once() -> None:
        if args.floor:
            parse_floor(args.file, counter)
            return
        session = load_session(args.file)
        config, preset = resolve_session_config(session)
        replay(session, config, mode="recorded", preset_name=preset).to_json()

    once()

    def measured() -> int:
        for _ in range(args.times):
            once()
        return 0

    callback = ctypes.CFUNCTYPE(ctypes.c_int)(measured)
    callback()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
