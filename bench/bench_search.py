"""Search benchmark: a workspace of 100 sessions, searched through the API and the search
page, against a trivial page (the login form) served in the same run, alternating.

The sessions are made from the corpus (every transcript, subfolders included; the committed
demo and fixture sessions without it): each file is replayed once by the real worker code
(``jobs.replay.execute_run``, which indexes it), and the copies that fill the workspace to
``--sessions`` are uploads of the same file with different bytes (so each is a session of its
own), given that replay's stored messages and result and indexed by ``search.services``, as
the worker would. The database is a fresh test database (created and dropped here):
PostgreSQL by default (production's full-text index), ``--database sqlite`` for FTS5 (``make
run``). Pages are served by Django's test client in this process.

The queries: a phrase of a late prompt of one session, a rare word, a common word (``the``),
two words, a path, a word narrowed to one tool, a word found nowhere. Each figure is the
median (p50) and 95th percentile of ``--runs`` timed requests; the trivial page is timed
between them. Target (issue #21): every search ≤ 0.5 s.

    python bench/bench_search.py [--sessions 100] [--runs 30] [--database postgres|sqlite]

Results are printed and written to bench/out/search-<database>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH_DIR))
CORPUS = Path(os.environ.get("CONTEXTLAB_CORPUS") or ROOT.parent / "shared" / "corpus")
TARGET_S = 0.5

from bench_django import setup_django, test_database  # noqa: E402


def sources() -> list[Path]:
    """The transcripts the workspace is made of (main sessions, not subagents' files)."""
    if CORPUS.is_dir():
        files = sorted(p for p in CORPUS.rglob("*.jsonl") if "_subagents_" not in p.name)
    else:
        files = sorted((ROOT / "contextlab" / "demo").glob("*.jsonl")) + sorted(
            (ROOT / "tests" / "fixtures").glob("*.jsonl")
        )
    return [p for p in files if p.stat().st_size > 2_000]


def build_workspace(count: int) -> tuple[Any, Any, dict[str, Any]]:
    """(user, workspace, facts): ``count`` indexed sessions in the user's personal workspace."""
    from django.contrib.auth.models import User

    from contextlab.jobs import replay as runner
    from contextlab.runs.models import Run, RunResult
    from contextlab.search import services as search
    from contextlab.search.models import Entry
    from contextlab.transcripts import services as transcripts
    from contextlab.transcripts.models import TranscriptMessages, TranscriptMessagesPart

    user = User.objects.create_user(username="bench", password="pw-bench-123")
    files = sources()
    first: dict[Path, Any] = {}
    #: (seconds, bytes) of each copy's indexing (what the worker adds after a replay)
    indexing: list[tuple[float, int]] = []
    started = time.perf_counter()
    for k in range(count):
        path = files[k % len(files)]
        # blank lines ahead: bytes of its own, and no earlier copy is its start (a "grown" file)
        data = b"\n" * (k // len(files)) + path.read_bytes()
        session, _ = transcripts.create_transcript(owner=user, name=path.name, content=[data])
        run = session.runs.get()
        if path not in first:
            runner.execute_run(run.pk)
            run.refresh_from_db()
            if run.status != Run.Status.DONE:
                print(f"  {path.name}: {run.status} {run.error[:80]}")
                continue
            first[path] = session
            continue
        origin = first[path]
        stored = TranscriptMessages.objects.create(transcript=session, data=origin.messages.data)
        # the messages' parts too (``TranscriptMessages.pieces``): without them a copy had no rows
        TranscriptMessagesPart.objects.bulk_create(
            TranscriptMessagesPart(messages=stored, seq=part.seq, data=part.data)
            for part in origin.messages.parts.all()
        )
        origin_run = origin.runs.get()
        RunResult.objects.create(run=run, data=origin_run.result.read())
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.DONE, summary=origin_run.summary, finished_at=origin_run.finished_at
        )
        tick = time.perf_counter()
        search.index_session(session)
        indexing.append((time.perf_counter() - tick, len(data)))
    elapsed = time.perf_counter() - started
    workspace = session.workspace
    facts = {
        "sessions": workspace.transcripts.count(),
        "distinct_files": len(first),
        "index_rows": Entry.objects.count(),
        "indexed_chars": sum(len(b) for b in Entry.objects.values_list("body", flat=True)),
        "build_s": round(elapsed, 1),
        "index_s_max": round(max((t for t, _ in indexing), default=0), 2),
        "index_s_per_mb": round(
            sum(t for t, _ in indexing) / max(1e-9, sum(b for _, b in indexing) / 1e6), 3
        ),
    }
    return user, workspace, facts


def late_phrase(workspace: Any) -> str:
    """Three consecutive words of the last typed prompt of the workspace's longest session."""
    from contextlab.runs.services import session_messages

    longest = max(workspace.transcripts.all(), key=lambda t: t.size)
    phrase = ""
    for row in session_messages(longest).get("main") or []:
        if row["kind"] != "prompt":
            continue
        for block in row["blocks"]:
            tokens = str(block.get("text") or "").split()
            for i in range(len(tokens) - 2):
                if all(w.isalpha() and len(w) > 2 for w in tokens[i : i + 3]):
                    phrase = " ".join(tokens[i : i + 3])
    return phrase or "run the tests"


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from django.test import Client

    from contextlab.search.models import Entry

    user, workspace, facts = build_workspace(args.sessions)
    print(
        f"workspace: {facts['sessions']} sessions from {facts['distinct_files']} files, "
        f"{facts['index_rows']:,} index rows, {facts['indexed_chars'] / 1e6:.1f} M characters "
        f"(built in {facts['build_s']} s; indexing a session took at most "
        f"{facts['index_s_max']} s, {facts['index_s_per_mb']} s per MB of transcript)"
    )
    client = Client()
    client.force_login(user)
    anonymous = Client()
    tool = (
        Entry.objects.exclude(tool="").values_list("tool", flat=True).order_by("tool").first()
        or "Bash"
    )
    phrase = late_phrase(workspace)
    ws = workspace.pk
    queries = {
        "late prompt phrase": {"q": f'"{phrase}"'},
        "rare word": {"q": "idempotent"},
        "common word (the)": {"q": "the"},
        "two words": {"q": "error test"},
        "a path": {"q": "src/main"},
        f"word, tool {tool}": {"q": "file", "tool": tool},
        "found nowhere": {"q": "zzyzxquux"},
    }

    def timed(get: Any) -> float:
        started = time.perf_counter()
        response = get()
        elapsed = time.perf_counter() - started
        assert response.status_code == 200, response.content[:300]
        return elapsed

    results = []
    for label, params in queries.items():
        api, page, trivial = [], [], []
        query = {**params, "workspace_id": ws}
        hits = len(client.get("/api/search", query).json()["hits"])  # warm once
        for _ in range(args.runs):
            api.append(timed(lambda q=query: client.get("/api/search", q)))
            trivial.append(timed(lambda: anonymous.get("/accounts/login/")))
            page.append(
                timed(
                    lambda p=params: client.get(
                        "/search/", {**p, "workspace": ws}, HTTP_HX_REQUEST="true"
                    )
                )
            )

        def pct(values: list[float], q: float) -> float:
            return round(statistics.quantiles(values, n=100)[int(q) - 1] * 1000, 1)

        row = {
            "query": label,
            "params": params,
            "hits": hits,
            "api_p50_ms": round(statistics.median(api) * 1000, 1),
            "api_p95_ms": pct(api, 95),
            "page_p50_ms": round(statistics.median(page) * 1000, 1),
            "page_p95_ms": pct(page, 95),
            "trivial_p50_ms": round(statistics.median(trivial) * 1000, 1),
        }
        row["api_ratio"] = round(row["api_p50_ms"] / row["trivial_p50_ms"], 2)
        results.append(row)
        print(
            f"{label:<24} {hits:>3} hits  API p50 {row['api_p50_ms']:7.1f} ms p95 "
            f"{row['api_p95_ms']:7.1f} ms | page p50 {row['page_p50_ms']:7.1f} ms p95 "
            f"{row['page_p95_ms']:7.1f} ms | trivial {row['trivial_p50_ms']:5.1f} ms "
            f"(API {row['api_ratio']}×)"
        )
    worst = max(max(r["api_p95_ms"], r["page_p95_ms"]) for r in results)
    print(f"worst p95: {worst:.1f} ms (target ≤ {TARGET_S * 1000:.0f} ms)")
    return {**facts, "runs": args.runs, "results": results, "worst_p95_ms": worst}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--database", choices=("postgres", "sqlite"), default="postgres")
    args = parser.parse_args()
    setup_django(args.database, name="bench_search")
    import django.test.client as test_client

    with test_database("bench_search"):
        # the test client copies every template's context for assertions: a server does not
        test_client.store_rendered_templates = lambda *a, **k: None
        out = measure(args)
    path = BENCH_DIR / "out" / f"search-{args.database}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"database": args.database, **out}, indent=2))


if __name__ == "__main__":
    main()
