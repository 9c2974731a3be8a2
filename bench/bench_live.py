"""Live-session update cost: what one append costs the server against a replay of the appended
requests alone, and against a replay of the whole session, in the same run, at several sizes.

A session is cut before its last ``--tail`` requests (at a line end); the update is what
ContextLab does for the append that brings them (``transcripts.live.append`` then the worker's
recorded replay): the web reads the grown file on from where the last append's read stopped
(``engine.load_growing``: only the appended lines are parsed) for the session's columns and
leaves its parse for the worker (``keep_parsed``); the worker counts the tokens of the blocks
the earlier version's cached copy does not hold (``seed_sha256``) and goes on from the last
replay's state over the appended requests only (``engine.continue_live``: the calibration
frozen as fitted before them, the result provisional), and writes the state for the next
append. Beside it, in the same run, the update as it was before: every request replayed again
("update, whole replay").
"Warm": the same update in a web process and a worker process that took the append before it
(and the session's first replay), as a long-lived web and worker do, against the appended lines
alone replayed in a process whose tokenizer has started.
"Appended alone" replays a file of only the appended lines, parsed and tokenized the same way;
"whole" is a fresh upload's replay of the grown file. Each figure is the median of ``--runs``.
Sessions: ``--session PATH`` (repeatable; default two corpus sessions) and synthetic ones of
``--synthetic-mb`` MB (``gen_synthetic.py``, seed 1; default 1 4 16).

    python bench/bench_live.py [--session PATH]... [--synthetic-mb 1 4 16] [--tail 1] [--runs 3]

``--cpu-appends N`` instead takes the last N requests of each session one append at a time in
ONE process (the web's read on, then the worker's update, both warm) and prints the median
process time of each part: the CPU a warm update costs, steadier than wall time on shared
cores (``--profile FILE``: a cProfile of the worker's parts but the first).

Results are printed and written to bench/out/live.json. Target (issue #25): update ≤ 2× the
appended requests alone, whatever the session's size.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))
OUT_FILE = BENCH_DIR / "out" / "live.json"
CORPUS = Path(os.environ.get("CONTEXTLAB_CORPUS") or ROOT.parent / "shared" / "corpus")
DEFAULTS = [
    CORPUS / "marot__spotter__8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
    CORPUS / "entireio__cli__25_730c662552_0_full.jsonl",
]

from contextlab import engine  # noqa: E402
from contextlab.engine.input import disk_cache, session_cache  # noqa: E402
from contextlab.engine.measures.tokens import TiktokenCounter  # noqa: E402


def cut_before_last_requests(data: bytes, tail: int) -> int:
    """The byte offset of the line holding the first of the last ``tail`` assistant messages
    (by message id): the session as it stood before they were written."""
    lines = data.splitlines(keepends=True)
    seen: list[str] = []
    starts: dict[str, int] = {}
    offset = 0
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            record = {}
        message = record.get("message") if isinstance(record, dict) else None
        new = (
            isinstance(message, dict)
            and message.get("role") == "assistant"
            and message.get("id")
            and message["id"] not in starts
        )
        if new and isinstance(message, dict):
            starts[message["id"]] = offset
            seen.append(message["id"])
        offset += len(line)
    first_new = seen[-tail]
    # back to the user turn before it: the append brings the prompt and its answer
    cut = starts[first_new]
    before = data.rfind(b'"type":"user"', 0, cut)
    return data.rfind(b"\n", 0, before) + 1 if before > 0 else cut


def replay_file(path: Path, cache: Path) -> tuple[float, int]:
    """Seconds to parse, tokenize and replay ``path`` (recorded, auto preset), and requests."""
    start = time.perf_counter()
    session = engine.load_session_cached(str(path), cache_dir=str(cache), name=path.name)
    try:
        config, preset = engine.resolve_session_config(session)
        result = engine.replay(session, config, mode="recorded", preset_name=preset)
    finally:
        session.close()
    return time.perf_counter() - start, len(result.to_json()["requests"])


#: whether the web hands its parse over to the worker (``keep_parsed``): it did before branch
#: livedelta, where the worker reads a version on from its own read instead
WEB_HANDS_OVER = not hasattr(session_cache, "_read_version")


def web_read(path: Path, cache: Path, sha256: str, earlier_sha: str | None) -> float:
    """The append's read of the grown file (the session's columns), on from the last append's
    read (before branch livedelta, its parse left for the worker, ``keep_parsed``), as
    ``transcripts.live`` does."""
    start = time.perf_counter()
    session, resumed = engine.load_growing(
        path, path.name, cache_dir=cache, sha256=sha256, earlier_sha256=earlier_sha
    )
    if earlier_sha and not resumed:
        raise SystemExit(f"{path.name}: the append was read whole (no state of its earlier read)")
    if WEB_HANDS_OVER:
        engine.keep_parsed(path, session, cache_dir=str(cache), sha256=sha256)
    session.close()
    return time.perf_counter() - start


def save_state(state: Path, data: bytes) -> None:
    """The replay state written as a worker stores it on a local disk (``lifecycle
    .save_live_state``, ``blobs.write_bytes``: ``disk_cache.write_parts_atomic``, a new file
    put in the old one's place, the run's owner line left out), not rewritten in place: the
    write's cost is part of the update's and depends on how it is written (bench/README.md)."""
    if not disk_cache.write_bytes_atomic(state, data):
        raise SystemExit(f"{state}: the state could not be written")


def first_replay(path: Path, cache: Path, sha256: str, state: Path) -> None:
    """The session's first replay, as a worker does it once the upload is stored: cached
    whole, its replay state kept."""
    session = engine.load_session_cached(str(path), cache_dir=str(cache), sha256=sha256)
    try:
        config, preset = engine.resolve_session_config(session)
        save_state(state, engine.replay_live(session, config, preset_name=preset)[1])
    finally:
        session.close()


def web_read_whole(path: Path, cache: Path, sha256: str) -> float:
    """The append's read as it was before ``load_growing``: the grown file parsed whole (the
    baseline the read-on is measured against, in the same run)."""
    start = time.perf_counter()
    session = engine.load_session(str(path), name=path.name)
    engine.keep_parsed(path, session, cache_dir=str(cache), sha256=sha256)
    session.close()
    return time.perf_counter() - start


def prepare_earlier(path: Path, cache: Path, sha256: str, state: Path) -> None:
    """The session before the append: the last append's read left its state, and its replay
    left its tokenized copy cached and its replay state in ``state``."""
    engine.load_growing(path, path.name, cache_dir=cache, sha256=sha256)[0].close()
    first_replay(path, cache, sha256, state)


def continue_update(
    path: Path, cache: Path, sha256: str, earlier_sha: str, state: Path
) -> tuple[float, int]:
    """The worker's update of a live session: the web's parse, the earlier version's counts,
    the last replay's state gone on over the appended requests, the new state written."""
    start = time.perf_counter()
    session = engine.load_session_cached(
        str(path), cache_dir=str(cache), sha256=sha256, seed_sha256=earlier_sha
    )
    try:
        result, after = engine.continue_live(state.read_bytes(), session)
        save_state(state, after)
    finally:
        session.close()
    return time.perf_counter() - start, len(result.to_json()["requests"])


def replay_update(path: Path, cache: Path, sha256: str, earlier_sha: str) -> tuple[float, int]:
    """The worker's update as it was before: the grown file replayed whole (the web's parse,
    the earlier version's counts)."""
    start = time.perf_counter()
    session = engine.load_session_cached(
        str(path), cache_dir=str(cache), sha256=sha256, seed_sha256=earlier_sha
    )
    try:
        config, preset = engine.resolve_session_config(session)
        result = engine.replay(session, config, mode="recorded", preset_name=preset)
    finally:
        session.close()
    return time.perf_counter() - start, len(result.to_json()["requests"])


def _cold(task: Callable[..., Any], *args: Any) -> Any:
    """``task(*args)`` in a forked process: no token counts or parses cached in memory from an
    earlier measurement (each figure is what a fresh worker pays)."""
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        return pool.apply(task, args)


def measure(source: Path, tail: int, runs: int) -> dict[str, Any]:
    data = source.read_bytes()
    cut = cut_before_last_requests(data, tail)
    # the append before the timed one (for the warm figures: the processes that did it)
    before = cut_before_last_requests(data, tail + 1)
    times: dict[str, list[float]] = {
        "web_read": [],
        "web_read_whole": [],
        "update": [],
        "worker": [],
        "update_whole_replay": [],
        "worker_whole_replay": [],
        "appended_alone": [],
        "whole": [],
        "warm_web": [],
        "warm_worker": [],
        "warm_update": [],
        "warm_alone": [],
    }
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        grown = folder / "grown.jsonl"
        grown.write_bytes(data)
        # the earlier version is the same file, shorter (the state names the file it read)
        earlier = folder / "earlier" / "grown.jsonl"
        earlier.parent.mkdir()
        earlier.write_bytes(data[:cut])
        alone = folder / "appended.jsonl"
        alone.write_bytes(data[cut:])
        sha, earlier_sha = engine.file_sha256(str(grown)), engine.file_sha256(str(earlier))
        for n in range(runs):
            # fresh cache folders: an append makes a new file, which the cache has not seen
            cache = folder / f"u{n}"
            state = folder / f"state{n}.pickle"
            _cold(prepare_earlier, earlier, cache, earlier_sha, state)
            web = _cold(web_read, grown, cache, sha, earlier_sha)
            worker, counts["update"] = _cold(continue_update, grown, cache, sha, earlier_sha, state)
            times["web_read"].append(web)
            times["web_read_whole"].append(_cold(web_read_whole, grown, folder / f"x{n}", sha))
            times["update"].append(web + worker)
            times["worker"].append(worker)
            # the update as before, on a copy of the same cache (the web's parse is the same)
            again = folder / f"r{n}"
            _cold(prepare_earlier, earlier, again, earlier_sha, state)
            web = _cold(web_read, grown, again, sha, earlier_sha)
            worker, counts["update_whole_replay"] = _cold(
                replay_update, grown, again, sha, earlier_sha
            )
            times["update_whole_replay"].append(web + worker)
            times["worker_whole_replay"].append(worker)
            seconds, counts["appended_alone"] = _cold(replay_file, alone, folder / f"a{n}")
            times["appended_alone"].append(seconds)
            seconds, counts["whole"] = _cold(replay_file, grown, folder / f"w{n}")
            times["whole"].append(seconds)
        for n in range(runs):
            web, worker = _warm(folder, data, cut, before, n)
            times["warm_web"].append(web)
            times["warm_worker"].append(worker)
            times["warm_update"].append(web + worker)
            times["warm_alone"].append(_warm_alone(folder / "appended.jsonl", folder / f"wa{n}"))
    median = {k: statistics.median(v) for k, v in times.items()}
    return {
        "session": source.name,
        "bytes": len(data),
        "appended_bytes": len(data) - cut,
        "requests": counts,
        "seconds": median,
        "update_vs_appended_alone": median["update"] / median["appended_alone"],
        "warm_update_vs_appended_alone": median["warm_update"] / median["appended_alone"],
        "warm_update_vs_warm_alone": median["warm_update"] / median["warm_alone"],
        "update_vs_whole": median["update"] / median["whole"],
        "update_whole_replay_vs_appended_alone": median["update_whole_replay"]
        / median["appended_alone"],
        "update_if_read_whole_vs_appended_alone": (
            median["update"] - median["web_read"] + median["web_read_whole"]
        )
        / median["appended_alone"],
        "target_update_vs_appended_alone": 2.0,
    }


def _warm(folder: Path, data: bytes, cut: int, before: int, n: int) -> tuple[float, float]:
    """The update as a web process and a worker process that handled the append before it
    (and the session's first replay) do it: each keeps what it read in memory (before branch
    livedelta, only the worker's last session). Seconds of the web's read and the worker's."""
    versions = []
    for k, end in enumerate((before, cut, len(data))):
        path = folder / f"warm{n}" / f"v{k}" / "grown.jsonl"  # each version a file, as stored
        path.parent.mkdir(parents=True)
        path.write_bytes(data[:end])
        versions.append((path, engine.file_sha256(str(path))))
    cache, state = folder / f"warm{n}" / "cache", folder / f"warm{n}" / "state.pickle"
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as web, context.Pool(1) as worker:
        (first, first_sha), (earlier, earlier_sha), (grown, sha) = versions
        web.apply(web_read, (first, cache, first_sha, None))
        worker.apply(first_replay, (first, cache, first_sha, state))
        web.apply(web_read, (earlier, cache, earlier_sha, first_sha))
        worker.apply(continue_update, (earlier, cache, earlier_sha, first_sha, state))
        seconds_web = web.apply(web_read, (grown, cache, sha, earlier_sha))
        seconds_worker, _ = worker.apply(continue_update, (grown, cache, sha, earlier_sha, state))
    return seconds_web, seconds_worker


def _warm_alone(alone: Path, cache: Path) -> float:
    """``replay_file`` of the appended lines alone in a process whose tokenizer has started
    (as the warm worker's has; no text of the session counted)."""
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        pool.apply(_start_tokenizer)
        return float(pool.apply(replay_file, (alone, cache))[0])


def _start_tokenizer() -> None:
    TiktokenCounter().count("the tokenizer's start")


def warm_cpu(source: Path, appends: int, profile: Path | None = None) -> dict[str, Any]:
    """CPU of a warm update (``--cpu-appends``): one process takes the session's last
    ``appends`` requests one append at a time, the web's read on then the worker's update
    (both warm: the process read and replayed the version before), and the median process
    time of each part. Steadier than wall time on shared cores. ``profile``: a cProfile of
    the worker's parts written there."""
    data = source.read_bytes()
    cuts = [cut_before_last_requests(data, tail) for tail in range(appends, 0, -1)]
    cuts.append(len(data))
    web: list[float] = []
    worker: list[float] = []
    worker_read: list[float] = []
    profiler = None
    if profile is not None:
        import cProfile

        profiler = cProfile.Profile()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cache, state = folder / "cache", folder / "state.pickle"
        shas: list[str] = []
        for k, end in enumerate(cuts):
            path = folder / f"v{k}" / "grown.jsonl"
            path.parent.mkdir()
            path.write_bytes(data[:end])
            shas.append(engine.file_sha256(str(path)))
            if k == 0:
                web_read(path, cache, shas[0], None)
                first_replay(path, cache, shas[0], state)
                continue
            start = time.process_time()
            web_read(path, cache, shas[k], shas[k - 1])
            middle = time.process_time()
            # the worker's part as ``continue_update`` times it (its result's JSON left out)
            if profiler is not None and k > 1:  # the first append read the state file
                profiler.enable()
            session = engine.load_session_cached(
                str(path), cache_dir=str(cache), sha256=shas[k], seed_sha256=shas[k - 1]
            )
            read = time.process_time()
            try:
                after = engine.continue_live(state.read_bytes(), session)[1]
                save_state(state, after)
            finally:
                session.close()
            if profiler is not None:
                profiler.disable()
            end = time.process_time()
            web.append(middle - start)
            worker.append(end - middle)
            worker_read.append(read - middle)
    if profiler is not None and profile is not None:
        profiler.dump_stats(str(profile))
    # the first append's worker is warm too (it took the first replay), but its read of the
    # first version went through the state file: the median leaves such outliers out
    return {
        "session": source.name,
        "appends": appends,
        "cpu_web": statistics.median(web),
        "cpu_worker": statistics.median(worker),
        "cpu_worker_read": statistics.median(worker_read),
        "cpu_worker_each": worker,
    }


def synthetic(megabytes: float, folder: Path) -> Path:
    """A synthetic session of about ``megabytes`` MB (``gen_synthetic``, seed 1)."""
    sys.path.insert(0, str(BENCH_DIR))
    from gen_synthetic import generate

    path = folder / f"synthetic-{megabytes:g}mb.jsonl"
    if not path.exists():
        generate(path, int(megabytes * 1024**2), seed=1)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", type=Path, action="append", default=None)
    parser.add_argument("--synthetic-mb", type=float, nargs="*", default=[1, 4, 16])
    parser.add_argument("--tail", type=int, default=1, help="requests appended")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--cpu-appends",
        type=int,
        default=0,
        help="instead: CPU of a warm update, one process taking this many appends (warm_cpu)",
    )
    parser.add_argument("--profile", type=Path, default=None, help="with --cpu-appends")
    args = parser.parse_args()
    if args.cpu_appends:
        with tempfile.TemporaryDirectory() as tmp:
            sessions = [p for p in (args.session or []) if p.exists()]
            sessions += [synthetic(mb, Path(tmp)) for mb in args.synthetic_mb]
            for source in sessions:
                cpu = warm_cpu(source, args.cpu_appends, args.profile)
                print(
                    f"{cpu['session']}: {cpu['appends']} warm appends in one process, median CPU:"
                    f" web {cpu['cpu_web'] * 1e3:.1f} ms, worker {cpu['cpu_worker'] * 1e3:.1f} ms"
                    f" (its read {cpu['cpu_worker_read'] * 1e3:.1f} ms)"
                    f" (each: {', '.join(f'{s * 1e3:.1f}' for s in cpu['cpu_worker_each'])})",
                    flush=True,
                )
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        sessions = [p for p in (args.session or DEFAULTS) if p.exists()]
        sessions += [synthetic(mb, Path(tmp)) for mb in args.synthetic_mb]
        for source in sessions:
            out = measure(source, args.tail, args.runs)
            print(
                f"{out['session']}: {out['bytes'] / 1e6:.1f} MB, {out['requests']['whole']} "
                f"requests: update {out['seconds']['update']:.3f} s (web "
                f"{out['seconds']['web_read']:.3f} s; read whole "
                f"{out['seconds']['web_read_whole']:.3f} s), appended alone "
                f"{out['seconds']['appended_alone']:.3f} s, whole {out['seconds']['whole']:.3f} s:"
                f" {out['update_vs_appended_alone']:.2f}x alone (read whole:"
                f" {out['update_if_read_whole_vs_appended_alone']:.2f}x),"
                f" {out['update_vs_whole']:.2f}x whole; whole-replay update"
                f" {out['seconds']['update_whole_replay']:.3f} s; worker"
                f" {out['seconds']['worker']:.3f} s against"
                f" {out['seconds']['worker_whole_replay']:.3f} s"
                f" ({out['update_whole_replay_vs_appended_alone']:.2f}x alone);"
                f" warm processes: update {out['seconds']['warm_update']:.3f} s (web"
                f" {out['seconds']['warm_web']:.3f} s, worker"
                f" {out['seconds']['warm_worker']:.3f} s),"
                f" {out['warm_update_vs_appended_alone']:.2f}x alone; alone in a warm process"
                f" {out['seconds']['warm_alone']:.3f} s:"
                f" {out['warm_update_vs_warm_alone']:.2f}x",
                flush=True,
            )
            results.append(out)
    OUT_FILE.parent.mkdir(exist_ok=True)
    OUT_FILE.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
