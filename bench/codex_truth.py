"""Issue 24's figures on Codex rollouts: loads, totals, compactions, fidelity, replay speed.

    python bench/codex_truth.py                      # /work/data/codex/*.jsonl + the fixtures
    python bench/codex_truth.py FILE.jsonl ...       # these rollouts
    python bench/codex_truth.py --json OUT.json
    python bench/codex_truth.py --dense 3800 --synthetic 10  # also the two speed files

Per rollout:

* loads — the adapter reads it (problems counted by code);
* totals — the session's ``side.recorded_totals`` and the sum of its calls' usage against the
  final ``total_token_usage`` read here independently (input, cached, output): exact or not;
* compactions — ``compacted`` records in the file against ``compact_boundary`` messages, and
  each boundary's request in the recorded replay (the first call after it); ``what-if``: of the
  automatic ones (inferred), how many a what-if with the session's own limit puts on the same
  request or the next;
* fidelity — recorded mode, ``evaluation.fidelity`` (per-thread, per-model 2-parameter fit of
  the replayed prompt against the recorded input, as ``bench/truth.py`` does for Claude Code):
  median and p90 of |relative error| (pooled over the rollouts too);
* speed — replay (load + recorded replay) against the parse floor of the same file
  (``json.loads`` of every line and one tiktoken count of the text a model call could see),
  both in this process, median of ``--runs``: the ratio, target ≤ 2. ``--cpu``: CPU time,
  the least of ``--runs`` of each, replay and floor in alternating order.

Fixtures are written by ContextLab (figures invented): their fidelity says nothing about
Codex; they are listed apart ("fixture") from real rollouts ("real").

``--expand-redacted``: some public rollouts are real but sanitized, every text replaced by
``[REDACTED_TEXT len=N sha=H]`` (token counts, order and times kept). Their totals and
compactions are measured as they are; for the fit, each placeholder is replaced by N characters
of filler words (seeded by H), so the sizes are the real ones and the text is not: such rows are
"redacted" and their fit says whether the adapter puts the right items in each call's context,
not how well text is counted.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contextlab.engine.config.resolve import resolve_session_config
from contextlab.engine.input.sources.registry import load_session
from contextlab.engine.measures.tokens import TiktokenCounter, percentile
from contextlab.engine.replay.driver import replay
from contextlab.engine.results.evaluation import fidelity

ROOT = Path(__file__).resolve().parents[1]
REAL = Path("/work/data/codex")
FIXTURES = ROOT / "tests" / "fixtures" / "codex"
LINEAGE = FIXTURES / "lineage"  # forked and subagent rollouts (and a parent)
KEYS = ("input_tokens", "cached_input_tokens", "output_tokens")
#: a sanitized rollout's placeholder for a text of ``len`` characters (encrypted blobs, which
#: the adapter never reads as text, are left as they are)
REDACTED = re.compile(r"\[REDACTED_(?!ENCRYPTED)[A-Z_]+ len=(\d+) sha=([0-9a-f]+)\]")
FILLER_WORDS = [
    "the",
    "value",
    "of",
    "self",
    "return",
    "def",
    "import",
    "class",
    "for",
    "in",
    "if",
    "None",
    "path",
    "file",
    "test",
    "data",
    "line",
    "error",
    "result",
    "config",
    "model",
    "token",
    "request",
    "session",
    "item",
    "output",
    "input",
    "call",
    "name",
    "type",
]


def filler(length: int, seed: str) -> str:
    """``length`` characters of words, spaces and newlines (the same for a seed), escaped for
    a JSON string."""
    rng = random.Random(seed)
    words: list[str] = []
    size = 0
    while size < length:
        words.append(rng.choice(FILLER_WORDS) + ("\n" if rng.random() < 0.08 else " "))
        size += len(words[-1])
    return json.dumps("".join(words)[:length])[1:-1]


def expand_redacted(path: Path, folder: Path) -> Path:
    """A copy of a sanitized rollout with each text placeholder as filler of its length."""
    text = path.read_text(encoding="utf-8")
    if "[REDACTED_" not in text:
        return path
    copy = folder / path.name
    copy.write_text(
        REDACTED.sub(lambda m: filler(int(m.group(1)), m.group(2)), text), encoding="utf-8"
    )
    return copy


def raw_lines(path: Path) -> list[Any]:
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def final_total(records: list[Any]) -> dict[str, int] | None:
    total = None
    for record in records:
        payload = record.get("payload") if isinstance(record, dict) else None
        if isinstance(payload, dict) and payload.get("type") == "token_count":
            info = payload.get("info")
            if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
                total = info["total_token_usage"]
    return total


def parse_floor(path: Path, counter: TiktokenCounter) -> int:
    """json.loads every line, count the model-visible text of each item once."""
    tokens = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        payload = record.get("payload", record) if isinstance(record, dict) else None
        if not isinstance(payload, dict):
            continue
        for key in ("content", "summary", "arguments", "input", "output"):
            value = payload.get(key)
            if isinstance(value, str):
                tokens += counter.count(value)
            elif isinstance(value, list):
                for part in value:
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        tokens += counter.count(part["text"])
    return tokens


def measure(
    path: Path,
    runs: int,
    counter: TiktokenCounter,
    fit_path: Path | None = None,
    cpu: bool = False,
) -> dict[str, Any]:
    records = raw_lines(path)
    session = load_session(path)
    own = [*session.main.messages]
    for fork in session.threads[1:]:  # local compactions' summarising calls
        own += fork.messages[fork.fork_index :]
    calls = [m for m in own if m.role == "assistant" and m.usage]
    final = final_total(records)
    summed = {
        "input_tokens": sum(m.usage.prompt_total for m in calls if m.usage),
        "cached_input_tokens": sum(m.usage.cache_read for m in calls if m.usage),
        "output_tokens": sum(m.usage.output for m in calls if m.usage),
    }
    recorded = session.side.recorded_totals
    # a forked or subagent rollout's cumulative figures carry its parent's usage: its own
    # totals are the final ones less that (and its calls must add up to them)
    carried = session.side.recorded_carried or dict.fromkeys(KEYS, 0)
    totals_exact = final is None or (
        recorded is not None
        and all(recorded[k] + carried[k] == final[k] for k in KEYS)
        and all(summed[k] == recorded[k] for k in KEYS)
    )
    compacted = sum(1 for r in records if isinstance(r, dict) and r.get("type") == "compacted")
    boundaries = [m for m in session.main.messages if m.kind == "compact_boundary"]
    config, preset = resolve_session_config(session)
    result = replay(session, config, mode="recorded", preset_name=preset)
    data = result.to_json()
    placed = whatif_placement(session, config, preset, data["summary"]["compaction_requests"])
    fid = fidelity(result)
    if fit_path is not None and fit_path != path:  # sizes reconstructed from placeholders
        expanded = load_session(fit_path)
        c, p = resolve_session_config(expanded)
        fid = fidelity(replay(expanded, c, mode="recorded", preset_name=p))
    replay_s, floor_s = [], []
    clock = time.process_time if cpu else time.perf_counter
    for run in range(runs):
        # with --cpu the order alternates (what runs second finds the caches the first left)
        for part in ("floor", "replay") if cpu and run % 2 else ("replay", "floor"):
            start = clock()
            if part == "replay":
                again = load_session(fit_path or path)
                c, p = resolve_session_config(again)
                replay(again, c, mode="recorded", preset_name=p).to_json()
                replay_s.append(clock() - start)
            else:
                parse_floor(fit_path or path, counter)
                floor_s.append(clock() - start)
    problems: dict[str, int] = {}
    for problem in session.problems:
        problems[problem.code] = problems.get(problem.code, 0) + 1
    return {
        "file": path.name,
        "kind": "fixture"
        if path.parent in (FIXTURES, LINEAGE)
        else "synthetic"
        if path.name.startswith("synthetic-")
        else "redacted"
        if fit_path is not None and fit_path != path
        else "real",
        "version": session.version,
        "calls": len(calls),
        "problems": problems,
        "totals_exact": totals_exact,
        "final_total": final,
        "compacted_records": compacted,
        "boundaries": len(boundaries),
        "triggers": [b.metadata.get("trigger") for b in boundaries],
        "compaction_requests": data["summary"]["compaction_requests"],
        "whatif_placed": placed,
        "median_rel_error": fid["median_rel_error"],
        "p90_rel_error": fid["p90_rel_error"],
        "errors": fid["errors"],
        # wall time: the medians; --cpu: the least of each (what the run costs without the
        # other processes' interference, which only adds)
        "replay_s": min(replay_s) if cpu else statistics.median(replay_s),
        "floor_s": min(floor_s) if cpu else statistics.median(floor_s),
    }


def whatif_placement(
    session: Any, config: Any, preset: str, recorded_requests: list[int]
) -> tuple[int, int]:
    """(placed, automatic): of the rollout's automatic compactions (inferred), how many a
    what-if with the session's own limit puts on the same request or the next."""
    boundaries = [m for m in session.main.messages if m.kind == "compact_boundary"]
    automatic = [
        request
        for request, boundary in zip(recorded_requests, boundaries, strict=False)
        if boundary.metadata.get("trigger") == "auto"
    ]
    if not automatic:
        return 0, 0
    whatif = replay(session, config, mode="whatif", preset_name=preset).to_json()
    predicted = set(whatif["summary"]["compaction_requests"])
    return sum(1 for r in automatic if r in predicted or r + 1 in predicted), len(automatic)


def synthetic_rollout(path: Path, megabytes: float, seed: int = 1) -> Path:
    """A Codex 0.58-shaped rollout of about ``megabytes`` MB for the speed figure only: turns of
    a prompt, then calls of reasoning + a shell call + its output (1-12 KB of code-like
    text), counts before their items with a repeat after each output, a remote compaction
    every 200,000 tokens of context. Figures follow the text (chars / 4 + a 10,000 prefix)."""

    rng = random.Random(seed)
    words = ["def", "return", "self", "value", "import", "class", "for", "in", "if", "None"]
    out = path.open("w", encoding="utf-8")
    written = 0
    total = dict.fromkeys((*KEYS, "reasoning_output_tokens", "total_tokens"), 0)
    context, call = 10_000, 0

    def emit(kind: str, payload: dict[str, Any]) -> None:
        nonlocal written
        line = (
            json.dumps(
                {
                    "timestamp": f"2025-11-17T10:{call // 60 % 60:02d}:{call % 60:02d}.000Z",
                    "type": kind,
                    "payload": payload,
                }
            )
            + "\n"
        )
        written += len(line)
        out.write(line)

    def count(inp: int, cached: int, output: int) -> None:
        last = {
            "input_tokens": inp,
            "cached_input_tokens": cached,
            "output_tokens": output,
            "reasoning_output_tokens": output // 2,
            "total_tokens": inp + output,
        }
        for k in total:
            total[k] += last[k]
        emit(
            "event_msg",
            {
                "type": "token_count",
                "info": {
                    "total_token_usage": dict(total),
                    "last_token_usage": last,
                    "model_context_window": 258_400,
                },
            },
        )

    def repeat() -> None:
        emit("event_msg", {"type": "token_count", "info": {"total_token_usage": dict(total)}})

    emit("session_meta", {"id": "synthetic", "cli_version": "0.58.0", "cwd": "/w"})
    emit("turn_context", {"model": "gpt-5.1-codex", "cwd": "/w"})
    while written < megabytes * 1_000_000:
        prompt = " ".join(rng.choices(words, k=40))
        emit(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": prompt}],
            },
        )
        context += len(prompt) // 4
        for _ in range(rng.randint(2, 8)):
            call += 1
            count(context, max(0, context - 600), 120)
            emit(
                "response_item",
                {
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": "**Next step**"}],
                    "encrypted_content": "gAAAA",
                },
            )
            emit(
                "response_item",
                {
                    "type": "function_call",
                    "name": "shell",
                    "call_id": f"c{call}",
                    "arguments": json.dumps({"command": ["bash", "-lc", "cat f.py"]}),
                },
            )
            body = "\n".join(
                " ".join(rng.choices(words, k=12)) for _ in range(rng.randint(15, 180))
            )
            emit(
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": f"c{call}",
                    "output": json.dumps({"output": body}),
                },
            )
            context += 120 + len(body) // 4
            repeat()  # the same figures again after the tool ran
            if context > 200_000:
                emit("event_msg", {"type": "context_compacted"})
                emit(
                    "compacted",
                    {
                        "message": "",
                        "replacement_history": [
                            {
                                "type": "message",
                                "role": "user",
                                "content": [{"type": "input_text", "text": prompt}],
                            },
                            {"type": "compaction", "encrypted_content": "gAAAA" + "z" * 8000},
                        ],
                    },
                )
                context = 14_000
                count(0, 0, 0)
    out.close()
    return path


def dense_rollout(path: Path, requests: int) -> Path:
    """bench_pages' Codex twin of its synthetic Claude Code session: ``requests`` small calls
    (prompts of a few words, a short command, 3-30 lines of test output each), no compaction."""
    spec = importlib.util.spec_from_file_location("bench_pages", ROOT / "bench" / "bench_pages.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_synthetic_codex(path, requests)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--synthetic",
        type=float,
        default=0,
        metavar="MB",
        help="also a generated rollout of this size (speed only)",
    )
    parser.add_argument(
        "--dense",
        type=int,
        default=0,
        metavar="REQUESTS",
        help="also bench_pages' Codex twin of this many small calls (speed on a request-dense file)",
    )
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="speed in CPU time, the least of --runs of each (order alternating), not the "
        "median wall time",
    )
    parser.add_argument(
        "--expand-redacted",
        action="store_true",
        help="fit sanitized rollouts on filler of their placeholders' lengths",
    )
    args = parser.parse_args()
    files = args.files or [
        *sorted(REAL.glob("*.jsonl")),
        *sorted((REAL / "redacted").glob("*.jsonl")),  # sanitized: see --expand-redacted
        *sorted(FIXTURES.glob("*.jsonl")),
        *sorted(LINEAGE.glob("*.jsonl")),
    ]
    if args.synthetic:
        folder = Path(tempfile.mkdtemp(prefix="codex-bench-"))
        files.append(
            synthetic_rollout(folder / f"synthetic-{args.synthetic:g}MB.jsonl", args.synthetic)
        )
    if args.dense:
        folder = Path(tempfile.mkdtemp(prefix="codex-bench-"))
        dense = folder / f"synthetic-dense-{args.dense}.jsonl"
        dense_rollout(dense, args.dense)
        files.append(dense)
    counter = TiktokenCounter()
    folder = Path(tempfile.mkdtemp(prefix="codex-expanded-"))
    rows = [
        measure(
            path,
            args.runs,
            counter,
            expand_redacted(path, folder) if args.expand_redacted else None,
            cpu=args.cpu,
        )
        for path in files
    ]
    print(
        f"{'file':58} {'kind':7} {'ver':7} {'calls':>5} {'totals':>6} {'cmp':>7} "
        f"{'what-if':>7} {'med':>6} {'p90':>6} {'replay/floor':>12}  problems"
    )
    for r in rows:
        med = "-" if r["median_rel_error"] is None else f"{r['median_rel_error']:.1%}"
        p90 = "-" if r["p90_rel_error"] is None else f"{r['p90_rel_error']:.1%}"
        ratio = r["replay_s"] / r["floor_s"] if r["floor_s"] else float("nan")
        print(
            f"{r['file'][:58]:58} {r['kind']:7} {r['version']!s:7} {r['calls']:>5} "
            f"{'exact' if r['totals_exact'] else 'OFF':>6} "
            f"{r['boundaries']}/{r['compacted_records']:<5} "
            f"{'{}/{}'.format(*r['whatif_placed']):>7} {med:>6} {p90:>6} {ratio:>12.2f}  "
            + ", ".join(f"{k}×{v}" for k, v in sorted(r["problems"].items()))
        )
    for kind in ("real", "redacted", "fixture", "synthetic"):
        errors = sorted(e for r in rows if r["kind"] == kind for e in r["errors"])
        if errors:
            print(
                f"pooled {kind}: {len(errors)} calls, median {statistics.median(errors):.1%}, "
                f"p90 {percentile(errors, 0.9):.1%}"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
