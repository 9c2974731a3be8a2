"""LLM-summary benchmark: a what-if run whose summaries come from a backend with 200 ms latency.

Target (issue 4): the run takes at most (summaries × 200 ms) / workers + the same replay without
summaries (extractive) + 20 %, and re-running the same what-if run makes zero summary calls.
"Summaries" counts the backend's calls: a summary reused from the transcript costs no call.

Real parts: Celery workers (pool=solo) on Redis, a scratch PostgreSQL database
(``contextlab_bench``), the official Anthropic SDK talking over HTTP to the stub server from the
test suite (``tests/llm_stub.py``) on loopback, answering every call after 200 ms.

    python bench/bench_summaries.py [--workers 2] [--rounds 3] [--concurrent 2] [--preset NAME]

Prints the figures and writes bench/out/summaries.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH_DIR))

from bench_sweep import LARGEST, setup_django, start_workers, wait_done  # noqa: E402

LATENCY = 0.2
SUMMARY = (
    "<analysis>notes</analysis><summary>1. Primary Request and Intent: continue the task</summary>"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--concurrent", type=int, default=1, help="what-if runs started together (2 = an A/B pair)"
    )
    parser.add_argument("--preset", default="claude-code-2.1.20")
    parser.add_argument("--file", default=str(LARGEST))
    args = parser.parse_args()

    from tests.llm_stub import LLMStub, Reply

    stub = LLMStub(
        default=Reply("ok", text=SUMMARY, input_tokens=40_000, output_tokens=900, delay=LATENCY)
    ).start()
    os.environ.update(
        ANTHROPIC_BASE_URL=stub.url,
        ANTHROPIC_API_KEY="sk-ant-bench-not-a-key",
        NO_PROXY="127.0.0.1,localhost",
    )
    tmp = Path(tempfile.mkdtemp(prefix="contextlab-bench-summaries-"))
    setup_django(tmp)
    from django.contrib.auth.models import User

    from contextlab.runs import services as run_services
    from contextlab.runs.models import Run, RunResult
    from contextlab.summaries.models import SummaryEntry
    from contextlab.transcripts import services as transcript_services

    SummaryEntry.objects.all().delete()  # a scratch database: every round must pay its calls
    workers = start_workers(tmp, args.workers)
    out: dict[str, object] = {
        "file": Path(args.file).name,
        "workers": args.workers,
        "concurrent_runs": args.concurrent,
        "latency_s": LATENCY,
    }
    try:
        owner, _ = User.objects.get_or_create(username="bench-summaries")
        owner.transcripts.all().delete()  # scratch data from an earlier invocation
        rows = []
        for round_ in range(args.rounds):
            # new bytes each round: the upload is deduplicated by sha256 and summaries are cached
            data = Path(args.file).read_bytes() + b"\n" * (round_ + 1)
            copy = tmp / f"session-{round_}.jsonl"
            copy.write_bytes(data)
            with copy.open("rb") as fh:
                transcript, _ = transcript_services.create_transcript(
                    owner=owner, name=copy.name, content=fh
                )
            wait_done([transcript.runs.get().pk])  # the recorded run (also warms the session cache)
            # configs no run has had yet, and compaction points (so summary inputs) of their own;
            # --concurrent K starts K of them at once (an A/B pair is 2), the case where more
            # workers help: one run's summaries form a chain (each compaction's input holds the
            # summary before it), so they can only be fetched one after another
            configs = [
                {"autocompact_pct_override": 75 - 3 * round_ - 11 * k}
                for k in range(args.concurrent)
            ]

            def run(
                summarizer: str, transcript: Any = transcript, configs: list[Any] = configs
            ) -> tuple[float, list[Run]]:
                start = time.perf_counter()
                ids = [
                    run_services.start_run(
                        owner=owner,
                        transcript=transcript,
                        mode="whatif",
                        preset=args.preset,
                        overrides=overrides,
                        summarizer=summarizer,
                        summary_model="claude-sonnet-4-6" if summarizer != "extractive" else "",
                    ).pk
                    for overrides in configs
                ]
                end = wait_done(ids)
                return end - start, list(Run.objects.filter(pk__in=ids))

            base_s, _ = run("extractive")
            calls_before = len(stub.requests)
            llm_s, llm_runs = run("anthropic")
            calls = len(stub.requests) - calls_before
            summaries = [
                s
                for r in llm_runs
                for s in RunResult.objects.get(run=r).data["views"]["synthetic"]
                if s["kind"] == "summary"
            ]
            again_s, _ = run("anthropic")
            recalls = len(stub.requests) - calls_before - calls
            # the summaries the backend wrote: one reusing the transcript's own costs no call
            target = calls * LATENCY / args.workers + base_s
            rows.append(
                {
                    "summaries": len(summaries),
                    "calls": calls,
                    "replay_without_summaries_s": round(base_s, 3),
                    "with_llm_s": round(llm_s, 3),
                    "target_s": round(target * 1.2, 3),
                    "ratio_to_target_without_margin": round(llm_s / target, 3),
                    "rerun_s": round(again_s, 3),
                    "rerun_calls": recalls,
                }
            )
            print(rows[-1], flush=True)
        out["rounds"] = rows
        median_ratio = statistics.median(r["ratio_to_target_without_margin"] for r in rows)
        out["median_ratio"] = median_ratio
        print(
            f"median: with LLM / (summaries×{LATENCY}s/{args.workers} + replay) = {median_ratio:.3f} "
            f"(target ≤ 1.2); re-run summary calls: {[r['rerun_calls'] for r in rows]} (target 0)"
        )
    finally:
        for proc in workers:
            proc.terminate()
        for proc in workers:
            proc.wait(timeout=30)
        stub.stop()
    (BENCH_DIR / "out").mkdir(exist_ok=True)
    (BENCH_DIR / "out" / "summaries.json").write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
