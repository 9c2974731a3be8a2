"""Share benchmark: making a share link of a session, redaction included, against the
recorded replay of the same session (issue #11: share <= 2 x replay).

Both sides run in this one process, alternating, the median of ``--runs`` runs each:

* replay: what the worker does for a recorded run: ``load_session`` + ``replay`` (the
  resolved "auto" config of the session, mode recorded) + ``to_json``;
* share: what ``contextlab.sharing.services.create_share`` does with the run's result and
  the session's messages: build the snapshot (result + ``expand_messages(messages_json)``),
  ``redact_tree`` it, serialize it and scan the outgoing bytes again (``check_outgoing``:
  ``redaction.scan_outgoing``, on the bytes as a reader decodes them).
  The two database writes (link row, snapshot row) are left out: they do not depend on
  redaction and the web benchmark (bench_web.py) measures the database.

    python bench/bench_share.py                 # the largest corpus file, 3 runs
    python bench/bench_share.py FILE.jsonl --runs 5

Results are printed and written to bench/out/share.json.
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
CORPUS = Path(os.environ.get("CONTEXTLAB_CORPUS") or ROOT.parent / "shared" / "corpus")
OUT_FILE = BENCH_DIR / "out" / "share.json"
TARGET = 2.0  # share / replay
HTML_MAX_BYTES = 10_000_000  # the HTML export of the largest session

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextlab.settings")
os.environ.setdefault("SECRET_KEY", "bench-only-" + "x" * 40)
import django  # noqa: E402  (after the path set-up)

django.setup()

from contextlab import engine, redaction  # noqa: E402
from contextlab.sharing import export  # noqa: E402


def replay(path: Path) -> tuple[float, dict[str, Any], Any]:
    started = time.perf_counter()
    session = engine.load_session(str(path))
    config, preset = engine.resolve_request_config(
        "auto",
        {},
        version=session.version or None,
        max_recorded_prompt=session.max_recorded_prompt or None,
    )
    data = engine.replay(session, config, mode="recorded", preset_name=preset).to_json()
    return time.perf_counter() - started, data, session


def _source(data: dict[str, Any], session: Any) -> dict[str, Any]:
    return {
        "transcript": {"name": getattr(session, "name", ""), "request_count": 0},
        "run": {"label": "recorded"},
        "result": data,
        "messages": engine.expand_messages(engine.messages_json(session)),
    }


def html_export(data: dict[str, Any], session: Any) -> tuple[float, int]:
    started = time.perf_counter()
    html, _ = export.render_html(_source(data, session))
    return time.perf_counter() - started, len(html.encode())


def share(data: dict[str, Any], session: Any) -> tuple[float, int, int]:
    started = time.perf_counter()
    source = _source(data, session)
    redacted = redaction.redact_tree(source)
    payload = json.dumps(redacted.tree, ensure_ascii=False)
    remaining = redaction.scan_outgoing(payload)
    elapsed = time.perf_counter() - started
    return elapsed, len(redacted.findings), len(remaining)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    files = args.files or [max(CORPUS.rglob("*.jsonl"), key=lambda p: p.stat().st_size)]
    results = []
    for path in files:
        replay_times, share_times = [], []
        findings = remaining = 0
        for _ in range(args.runs):
            seconds, data, session = replay(path)
            replay_times.append(seconds)
            seconds, findings, remaining = share(data, session)
            share_times.append(seconds)
        row = {
            "file": path.name,
            "mb": round(path.stat().st_size / 1e6, 2),
            "replay_s": round(statistics.median(replay_times), 3),
            "share_s": round(statistics.median(share_times), 3),
            "findings": findings,
            "remaining_after_redaction": remaining,
        }
        row["ratio"] = round(row["share_s"] / row["replay_s"], 3)
        export_s, export_bytes = html_export(data, session)
        row["html_export_s"] = round(export_s, 3)
        row["html_export_mb"] = round(export_bytes / 1e6, 2)
        row["ok"] = row["ratio"] <= TARGET and remaining == 0 and export_bytes < HTML_MAX_BYTES
        results.append(row)
        print(
            f"{row['file']} ({row['mb']} MB): replay {row['replay_s']} s, share "
            f"{row['share_s']} s = {row['ratio']} x (target <= {TARGET}); "
            f"{findings} findings, {remaining} left after redaction; HTML export "
            f"{row['html_export_mb']} MB in {row['html_export_s']} s (target < 10 MB)"
        )
    OUT_FILE.parent.mkdir(parents=True, exist_ok=True)
    OUT_FILE.write_text(json.dumps({"runs": args.runs, "results": results}, indent=2))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
