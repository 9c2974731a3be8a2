"""A live session's results, version by version, through the warm path: for an identity check
of live updates between two trees (run it in each, compare the printed digests).

Grows each session append by append in ONE process, as a long-lived web and worker take them:
the web's read on from its kept read (``engine.load_growing``), the worker's read on from its
own (``load_session_cached`` with the earlier version's digest) and ``engine.continue_live``
from the state the last append wrote (read back from its file). Cuts: the user turns before
each of the last ``--appends`` requests, and as many cuts at arbitrary line ends between them
(a response cut while it is written: the next append goes on from the state before it).
Prints, per version, the digest of its result JSON (``json.dumps(..., sort_keys=True)``) and of
the state's bytes; ``--out`` writes them as JSON.

    python bench/live_identity.py [--session PATH]... [--appends 13] [--out FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

from bench_live import DEFAULTS, cut_before_last_requests, first_replay, web_read  # noqa: E402

from contextlab import engine  # noqa: E402


def cuts_of(data: bytes, appends: int) -> list[int]:
    """The versions' ends: each of the last ``appends`` requests' user turn, and a line end
    half way to the next (at least the first version and the whole file)."""
    turns = sorted({cut_before_last_requests(data, t) for t in range(appends + 1, 0, -1)})
    ends = [turns[0]]
    for a, b in zip(turns, [*turns[1:], len(data)], strict=True):
        middle = data.rfind(b"\n", a, a + (b - a) // 2) + 1
        ends += [e for e in (middle, b) if ends[-1] < e]
    return ends


def grow(source: Path, appends: int, folder: Path) -> list[dict[str, str]]:
    data = source.read_bytes()
    cache, state = folder / "cache", folder / "state.pickle"
    versions: list[dict[str, str]] = []
    earlier_sha: str | None = None
    for k, end in enumerate(cuts_of(data, appends)):
        path = folder / f"v{k}" / source.name
        path.parent.mkdir(parents=True)
        path.write_bytes(data[:end])
        sha = engine.file_sha256(str(path))
        web_read(path, cache, sha, earlier_sha)
        if earlier_sha is None:
            first_replay(path, cache, sha, state)
            session = engine.load_session_cached(str(path), cache_dir=str(cache), sha256=sha)
            config, preset = engine.resolve_session_config(session)
            result = engine.replay_live(session, config, preset_name=preset)[0]
        else:
            session = engine.load_session_cached(
                str(path), cache_dir=str(cache), sha256=sha, seed_sha256=earlier_sha
            )
            result, after = engine.continue_live(state.read_bytes(), session)
            state.write_bytes(after)
        text = json.dumps(result.to_json(), sort_keys=True)
        session.close()
        versions.append(
            {
                "bytes": str(end),
                "result": hashlib.sha256(text.encode()).hexdigest()[:16],
                "state": hashlib.sha256(state.read_bytes()).hexdigest()[:16],
            }
        )
        earlier_sha = sha
    return versions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", type=Path, action="append", default=None)
    parser.add_argument("--appends", type=int, default=13)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    found: dict[str, list[dict[str, str]]] = {}
    for source in args.session or [p for p in DEFAULTS if p.exists()]:
        with tempfile.TemporaryDirectory() as tmp:
            found[source.name] = grow(source, args.appends, Path(tmp))
        for n, version in enumerate(found[source.name]):
            print(source.name[:40], n, version["bytes"], version["result"], version["state"])
    if args.out is not None:
        args.out.write_text(json.dumps(found, indent=1) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("CONTEXTLAB_CORPUS", str(BENCH_DIR.parent.parent / "shared" / "corpus"))
    main()
