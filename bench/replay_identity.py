"""Behaviour-unchanged check: `contextlab replay --json` on every corpus file, before and after.

    python bench/replay_identity.py snapshot DIR      # write DIR/<file>.<mode>.json for each file
    python bench/replay_identity.py compare OLD NEW   # exit 1 when any output differs
    python bench/replay_identity.py compare OLD NEW --recorded-facts
        # OLD from before RESULT_VERSION 2: map NEW's moved figures back first (issue #20)

Each file of the corpus (``$CONTEXTLAB_CORPUS``, default ``../shared/corpus``, including
``recent/``) is replayed in ``recorded`` mode and in ``whatif --preset auto``. Fields that
only label the result format (``result_version``) are dropped before comparing, so a
structural change can prove it left every number, event and view as it was.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

MODES: dict[str, list[str]] = {
    "recorded": ["--mode", "recorded"],
    "whatif-auto": ["--mode", "whatif", "--preset", "auto"],
}
# Keys that describe the format of a result rather than the replay.
IGNORED_KEYS = frozenset({"result_version"})


def corpus_files(root: Path) -> list[Path]:
    patterns = ("*.jsonl", "*.jsonl.gz", "*.zip", "*.tar.gz")
    return sorted(p for pattern in patterns for p in root.rglob(pattern))


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in IGNORED_KEYS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def snapshot(out_dir: Path, root: Path) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    files = corpus_files(root)
    if not files:
        print(f"no transcripts under {root}", file=sys.stderr)
        return 2
    for path in files:
        for mode, flags in MODES.items():
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "contextlab.engine.cli",
                    "replay",
                    str(path),
                    "--json",
                    *flags,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            name = f"{path.relative_to(root).as_posix().replace('/', '__')}.{mode}.json"
            (out_dir / name).write_text(
                proc.stdout if proc.returncode == 0 else "", encoding="utf-8"
            )
            print(f"{name}: exit {proc.returncode}, {len(proc.stdout):,} bytes")
    return 0


#: what RESULT_VERSION 2 added (issue #20, recorded facts first)
_NEW_ROW_KEYS = ("cache_estimate", "cache_read_gap", "cache_disagrees", "cost_estimate_usd")
_NEW_CACHE_KEYS = ("write_5m", "write_1h", "hit", "source")
_NEW_SUMMARY_KEYS = (
    "recorded_cache_requests",
    "cache_disagreements",
    "estimate",
    "pricing_notes",
    "long_context_requests",
)
#: summary costs that became recorded first (the estimate of these is not kept apart)
_RECORDED_FIRST = ("subagent_cost_usd", "compaction_cost_usd")


def _estimate_view(result: dict[str, Any]) -> dict[str, Any]:
    """A RESULT_VERSION 2 result as version 1 showed it: ``cache`` and ``cost_usd`` the
    estimate again, the added keys dropped; what checks that only the intended change
    happened (the recorded figures themselves are checked in tests/engine/test_corpus_truth.py)."""
    rows = [*result["requests"], *(r for s in result["subagents"] for r in s["requests"])]
    for row in rows:
        row["cache"] = {k: v for k, v in row["cache_estimate"].items() if k not in _NEW_CACHE_KEYS}
        row["cost_usd"] = row["cost_estimate_usd"]
        for key in _NEW_ROW_KEYS:
            row.pop(key)
    summary = result["summary"]
    estimate = summary["estimate"]
    summary["cost_usd"] = estimate["cost_usd"]
    summary["session_cost_usd"] = estimate["session_cost_usd"]
    for key in ("cache_read_tokens", "cache_write_tokens", "uncached_tokens", "cache_hit_rate"):
        summary[key] = estimate[key]
    for key in (*_NEW_SUMMARY_KEYS, *_RECORDED_FIRST):
        summary.pop(key, None)
    return result


def compare(old_dir: Path, new_dir: Path, *, recorded_facts: bool = False) -> int:
    old_names = {p.name for p in old_dir.glob("*.json")}
    new_names = {p.name for p in new_dir.glob("*.json")}
    differing = sorted(old_names ^ new_names)
    for name in sorted(old_names & new_names):
        old_text = (old_dir / name).read_text(encoding="utf-8")
        new_text = (new_dir / name).read_text(encoding="utf-8")
        if old_text == new_text:
            continue
        if (
            not old_text
            or not new_text
            or _old_view(json.loads(old_text), recorded_facts)
            != _strip(
                _estimate_view(json.loads(new_text)) if recorded_facts else json.loads(new_text)
            )
        ):
            differing.append(name)
    for name in differing:
        print(f"DIFFERS: {name}")
    print(f"{len(old_names & new_names) - len(differing)} identical, {len(differing)} differing")
    return 1 if differing else 0


def _old_view(result: dict[str, Any], recorded_facts: bool) -> Any:
    if recorded_facts:
        for key in _RECORDED_FIRST:
            result["summary"].pop(key, None)
    return _strip(result)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    snap = sub.add_parser("snapshot")
    snap.add_argument("out_dir", type=Path)
    snap.add_argument(
        "--corpus", type=Path, default=Path(os.environ.get("CONTEXTLAB_CORPUS", "../shared/corpus"))
    )
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("old_dir", type=Path)
    cmp_.add_argument("new_dir", type=Path)
    cmp_.add_argument(
        "--recorded-facts",
        action="store_true",
        help="OLD is from before RESULT_VERSION 2: compare NEW's estimate with it",
    )
    args = parser.parse_args()
    if args.command == "snapshot":
        return snapshot(args.out_dir, args.corpus)
    return compare(args.old_dir, args.new_dir, recorded_facts=args.recorded_facts)


if __name__ == "__main__":
    raise SystemExit(main())
