"""Every request where the cache model and the recording disagree on a cache miss, classified.

    python bench/miss_audit.py             # the corpus ($CONTEXTLAB_CORPUS)
    python bench/miss_audit.py FILE ...    # these transcripts

A miss is what ``evaluation.cache_accuracy`` counts: a recorded cache read under half the
prompt (recorded), or the cache model's own read (``cache_estimate`` plus the server-side miss
taken from the recording) under half of the replayed prompt (predicted). One line per request
that is one and not the other ("missed": recorded, not predicted; "extra": the other way), with
what could explain it:

* ``gap`` — seconds since the thread's previous request; ``mgap`` since the previous request of
  the same model in any thread (the cache is keyed per model);
* ``ttl`` — the write TTL the previous request and this one recorded (5m / 1h);
* ``switch`` (model switch), ``day`` (the UTC date changed: the system prompt carries the date),
  ``turn`` (a user prompt starts the turn), ``seg`` (restart segment);
* ``level`` — where the recorded read stopped: ``warm`` at what the thread's first request read
  (the shared system prompt), ``recurring`` at a read the thread breaks to again elsewhere (a
  system-prompt breakpoint), ``-`` anywhere else;
* prompt size, recorded read and write, the previous request's read / prompt, the estimate.

Classes, the first that fits: ``first_request``, ``model_switch``, ``after_compaction`` (the
thread's previous request compacted or a restart segment began), ``ttl_gap`` (past the recorded
TTL), ``server_side`` (a missed miss the model called a hit — nothing changed before it — within
the recorded TTL, the read falling to a system-prompt level or to nothing), ``borderline`` (an
extra whose recorded read is within 5 % of the prompt of the half line), else ``other``. The
summary counts them, and, as evidence for ``server_side``, how often requests sent 5–60 minutes
after one that wrote with a 1-hour TTL read the whole prefix back.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.truth import corpus_root, resolve
from contextlab.engine.input.sources.registry import load_session
from contextlab.engine.input.timestamps import epoch_seconds
from contextlab.engine.measures.prompt_cache import TTL_SECONDS
from contextlab.engine.measures.tokens import TiktokenCounter
from contextlab.engine.replay.driver import replay
from contextlab.engine.results import RecordedUsage, RequestRow
from contextlab.engine.results.evaluation import MISS_SHARE

#: two reads within this many tokens stop at the same breakpoint (calibration noise)
SAME_LEVEL_TOKENS = 50
#: an extra is borderline when the recorded read is this close to the half line (share)
BORDERLINE_SHARE = 0.05


@dataclass
class Disagreement:
    file: str
    thread: str
    request: int
    kind: str
    gap: float | None
    model_gap: float | None
    ttl: str
    switch: bool
    day: bool
    turn: bool
    segment: int
    prompt: int
    read: int
    write: int
    previous_read: int
    previous_prompt: int
    estimate: int
    reason: str
    model: str
    level: str
    cls: str = ""


def write_ttl(rec: RecordedUsage | None) -> str:
    """The TTL a recorded request wrote with ("·": it wrote nothing, "-": no usage)."""
    if rec is None:
        return "-"
    if rec["cache_write_1h"]:
        return "1h"
    return "5m" if rec["cache_write"] else "·"


def _compacted(row: RequestRow) -> bool:
    return any(e["step"] == "autocompact" and e["action"] == "compacted" for e in row["events"])


def classify(d: Disagreement, row: RequestRow, prev: RequestRow | None) -> str:
    if prev is None:
        return "first_request"
    if d.switch:
        return "model_switch"
    if prev["segment"] != row["segment"] or _compacted(prev) or _compacted(row):
        return "after_compaction"
    ttl = write_ttl(prev["recorded"])
    if d.gap is not None and ttl in TTL_SECONDS and d.gap > TTL_SECONDS[ttl]:
        return "ttl_gap"
    if d.kind == "missed" and d.reason in ("hit", "server_miss") and (d.level != "-" or not d.read):
        return "server_side"
    if d.kind == "extra" and abs(d.read / d.prompt - MISS_SHARE) <= BORDERLINE_SHARE:
        return "borderline"
    return "other"


def _level(read: int, first: int | None, breaks: list[int]) -> str:
    def same(a: int, b: int) -> bool:
        return abs(a - b) <= SAME_LEVEL_TOKENS

    if first is not None and read and same(read, first):
        return "warm"
    return "recurring" if read and sum(same(read, b) for b in breaks) >= 2 else "-"


def audit(path: Path, survival: Counter[str]) -> list[Disagreement]:
    """The disagreements of one file; ``survival`` counts, over requests sent 5–60 minutes
    after one that wrote with a 1-hour TTL, those that read the whole prefix back ("kept") or
    not ("dropped")."""
    session = load_session(str(path))
    config, preset = resolve(session, {})
    result = replay(session, config, mode="recorded", preset_name=preset, counter=TiktokenCounter())
    rows = sorted(
        ((tr.thread.id, r) for tr in result.threads for r in tr.requests),
        key=lambda item: item[1]["timestamp"],
    )
    # per thread: the first recorded read, and every read that broke off (≥ 2,000 tokens down)
    first: dict[str, int] = {}
    breaks: dict[str, list[int]] = {}
    last_read: dict[str, int] = {}
    for thread, r in rows:
        if r["recorded"] is None:
            continue
        read = r["recorded"]["cache_read"]
        first.setdefault(thread, read)
        if last_read.get(thread, 0) - read >= config.cache_break_min_miss_tokens:
            breaks.setdefault(thread, []).append(read)
        last_read[thread] = read
    out: list[Disagreement] = []
    last_by_model: dict[str, float] = {}
    prev_in_thread: dict[str, RequestRow] = {}
    for thread, r in rows:
        now = epoch_seconds(r["timestamp"])
        prev = prev_in_thread.get(thread)
        rec, total, model = r["recorded"], r["recorded_total"], r["model"] or ""
        gap = _between(epoch_seconds(prev["timestamp"]) if prev is not None else None, now)
        prec = prev["recorded"] if prev is not None else None
        if (
            rec
            and prev is not None
            and prec
            and gap is not None
            and TTL_SECONDS["5m"] < gap <= TTL_SECONDS["1h"]
            and write_ttl(prec) == "1h"
        ):
            kept = rec["cache_read"] >= (prev["recorded_total"] or 0) - 3
            survival["kept" if kept else "dropped"] += 1
        if rec and total:
            est = r["cache_estimate"]
            estimate = est["read"] + int(est.get("server_miss_tokens") or 0)
            actual = rec["cache_read"] < MISS_SHARE * total
            predicted = estimate < MISS_SHARE * max(1, r["model_tokens"])
            if actual != predicted:
                d = Disagreement(
                    file=path.name,
                    thread=thread,
                    request=r["thread_request"],
                    kind="missed" if actual else "extra",
                    gap=gap,
                    model_gap=_between(last_by_model.get(model), now),
                    ttl=f"{write_ttl(prec)}→{write_ttl(rec)}",
                    switch=prev is not None and prev["model"] != r["model"],
                    day=prev is not None and prev["timestamp"][:10] != r["timestamp"][:10],
                    turn=r["turn_start"],
                    segment=r["segment"],
                    prompt=total,
                    read=rec["cache_read"],
                    write=rec["cache_write"],
                    previous_read=prec["cache_read"] if prec else 0,
                    previous_prompt=(prev["recorded_total"] or 0) if prev else 0,
                    estimate=estimate,
                    reason=str(est["reason"]),
                    model=model,
                    level=_level(rec["cache_read"], first.get(thread), breaks.get(thread, [])),
                )
                d.cls = classify(d, r, prev)
                out.append(d)
        prev_in_thread[thread] = r
        if model and now is not None:
            last_by_model[model] = now
    return out


def _between(earlier: float | None, later: float | None) -> float | None:
    return later - earlier if earlier is not None and later is not None else None


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}s"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="transcripts (default: the corpus)")
    args = parser.parse_args(argv)
    paths = [Path(f) for f in args.files] or sorted(corpus_root().rglob("*.jsonl"))
    classes: Counter[tuple[str, str]] = Counter()
    server_side: Counter[str] = Counter()
    survival: Counter[str] = Counter()
    for path in paths:
        for d in audit(path, survival):
            classes[(d.kind, d.cls)] += 1
            if d.cls == "server_side":
                server_side[f"level {d.level}"] += 1
                server_side["at a turn start" if d.turn else "inside a tool loop"] += 1
                server_side["within 60 s" if (d.gap or 0) <= 60 else "after 60 s"] += 1
            flags = " ".join(
                name for name, on in (("switch", d.switch), ("day", d.day), ("turn", d.turn)) if on
            )
            print(
                f"{d.kind:6} {d.file[:40]:40} {d.thread[:12]:12} #{d.request:<4} "
                f"gap {_secs(d.gap):>6} mgap {_secs(d.model_gap):>6} {d.ttl:6} {flags:11} "
                f"seg {d.segment} prompt {d.prompt:>7,} read {d.read:>7,} write {d.write:>7,} "
                f"prev {d.previous_read:>7,}/{d.previous_prompt:>7,} est {d.estimate:>7,} "
                f"{d.reason:14} {d.model[-16:]:16} {d.level:9} {d.cls}"
            )
    print()
    for (kind, cls), n in sorted(classes.items()):
        print(f"{kind:6} {cls:20} {n}")
    if server_side:
        print("server_side: " + ", ".join(f"{k} {n}" for k, n in sorted(server_side.items())))
    print(
        "requests 5-60 min after a 1-hour write: "
        f"{survival['kept']} read the whole prefix back, {survival['dropped']} did not"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
