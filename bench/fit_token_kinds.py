"""Refit the per-content-kind token ratios (``contextlab/engine/measures/data/token_kinds.toml``).

    python bench/fit_token_kinds.py            # fit, print, write the data file
    python bench/fit_token_kinds.py --dry-run  # fit and print only
    FIT_PRIOR=0.01 python bench/fit_token_kinds.py --dry-run --points /tmp/p.pickle
                                               # another ridge weight, on requests measured once

Writing the file changes the session cache's version (its digest is part of
``session_cache.CACHE_VERSION``): cached sessions are counted again with the new ratios.

Every corpus session (``$CONTEXTLAB_CORPUS`` or ``../shared/corpus``, subfolders included) is
replayed in recorded mode with bare cl100k counts (``content_kinds.PLAIN``); at each request
the model's view is split by content kind (``content_kinds.classify`` of every block's text as
sent: the original, a preview, a placeholder or a summary). Tokens the counter does not make
(thinking sized from the recorded output, images, the anchors' earlier history and restart
segments) are carried as they are.

The fit: one ratio per kind, shared by the whole corpus, with each thread's own two-parameter
line on top (``recorded − unrecorded ≈ a + b · Σ ratio · tokens``, per model where the replay
fits per model), exactly the line ``bench/truth.py`` scores. The loss is the mean of a smooth
absolute relative error (robust to the few requests an anchor misses) plus a ridge penalty
``PRIOR`` on every log ratio, so a kind the corpus holds little of stays near 1. The ratios are
scaled so that the corpus's tokens keep their plain cl100k total (the thread line's level and
its default ratio stay meaningful). Coordinate descent on the log ratios. ``PRIOR`` was
chosen with ``bench/truth.py`` (2026-12-06): 0.002 gave tokens median / p90 / worst session p90
0.84 / 2.95 / 7.11 % on the whole corpus and 0.92 / 3.08 / 8.29 % held out (plain cl100k:
0.87 / 3.18 / 8.37 % both); 0.01 gave 0.86 / 3.01 / 7.18 % and 0.96 / 3.25 / 8.48 % held out;
0.05 moved the ratios within 3 % of 1 and changed nothing.

Leave one source out: the same fit without each source (the file name's prefix before the
first ``__``), written to ``[held_out.<source>]``; ``bench/truth.py`` scores each source's
sessions with the ratios fitted without it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import pickle
import statistics
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contextlab.engine.input.sources.registry import load_session
from contextlab.engine.measures.content_kinds import KINDS, PLAIN, classify
from contextlab.engine.measures.tokens import (
    IMAGE_DISPLAY_TOKENS,
    TiktokenCounter,
    fit_calibration,
)
from contextlab.engine.pipeline.base import WHOLE_MESSAGE, View
from contextlab.engine.replay import thread as thread_module
from contextlab.engine.replay.driver import replay

DATA_FILE = Path(__file__).resolve().parents[1] / "contextlab/engine/measures/data/token_kinds.toml"
#: ridge weight on each log ratio (per request of the corpus's mean loss)
PRIOR = float(os.environ.get("FIT_PRIOR", "0.002"))
#: the smooth absolute error's knee: sqrt(e² + SMOOTH²)
SMOOTH = float(os.environ.get("FIT_SMOOTH", "0.005"))
ROUNDS = 4
FIXED = "fixed"


@dataclass
class Point:
    """One recorded request: its view's plain tokens by kind, the rest, and the target."""

    group: str
    kinds: dict[str, int]
    fixed: int
    target: int


def owner_of(name: str) -> str:
    """The source of a corpus file: its name's prefix before the first ``__``."""
    return name.split("__", 1)[0] if "__" in name else Path(name).stem


def view_by_kind(view: View) -> Counter[str]:
    """The view's tokens by content kind, and under ``FIXED`` what the counter did not make."""
    out: Counter[str] = Counter()
    for item in view.head:
        text = "".join(b.text for b in item.message.blocks)
        out[classify(text)] += item.tok
    for i in view.view_indices():
        msg = view.messages[i]
        if msg.role == "system":
            continue
        whole = view.overrides.get((i, WHOLE_MESSAGE))
        if whole is not None:
            out[classify(whole.text or "")] += whole.tok
            continue
        for j, block in enumerate(msg.blocks):
            ov = view.overrides.get((i, j))
            if ov is not None:
                out[classify(ov.text or "")] += ov.tok
                continue
            tok, _, _ = view.base_block(i, j, block)
            if block.type in ("thinking", "redacted_thinking", "image", "document"):
                out[FIXED] += tok
                continue
            media = block.media * IMAGE_DISPLAY_TOKENS
            text = view.base_text(i, j, block)
            out[FIXED] += media
            out[classify(block.text if text is None else text)] += tok - media
    return out


def measure(path: Path) -> tuple[list[Point], int]:
    """The recorded requests of one session as fit points, and the requests whose kind split
    did not add up to the replay's own raw count (should be 0)."""
    session = load_session(str(path))
    from bench.truth import resolve

    config, preset = resolve(session, {})
    captured: dict[tuple[str, int], tuple[Counter[str], int]] = {}
    original = thread_module.ThreadReplay._finish_request

    def finish(self: Any, req: Any, ctx: Any, at: Any, *, with_results: bool) -> None:
        split = view_by_kind(self.view) if with_results else None
        raw = self.view.raw_tokens()
        original(self, req, ctx, at, with_results=with_results)
        if split is not None:
            captured[(self.thread.id, req.index)] = (split, raw)

    thread_module.ThreadReplay._finish_request = finish  # type: ignore[method-assign]
    try:
        result = replay(
            session, config, mode="recorded", preset_name=preset, counter=TiktokenCounter(PLAIN)
        )
    finally:
        thread_module.ThreadReplay._finish_request = original  # type: ignore[method-assign]
    points: list[Point] = []
    mismatched = 0
    for tr in result.threads:
        per_model = bool(tr.model_calibrations)
        for row in tr.requests:
            if not row["recorded_total"]:
                continue
            split, raw = captured[(tr.thread.id, row["thread_request"])]
            if sum(split.values()) != raw:
                mismatched += 1
            kinds = {k: v for k, v in split.items() if k != FIXED}
            fixed = split[FIXED] + row["raw_tokens"] - raw
            group = f"{path.name}:{tr.thread.id}:{row['model'] if per_model else ''}"
            target = row["recorded_total"] - row.get("unrecorded_tokens", 0)
            points.append(Point(group, kinds, fixed, target))
    return points, mismatched


def errors(points: Sequence[Point], ratios: dict[str, float]) -> list[float]:
    """Signed relative errors of each thread's 2-parameter line under ``ratios``."""
    plain = sum(sum(p.kinds.values()) for p in points)
    weighted = sum(ratios[k] * v for p in points for k, v in p.kinds.items())
    scale = plain / weighted if weighted else 1.0
    groups: dict[str, list[Point]] = {}
    for p in points:
        groups.setdefault(p.group, []).append(p)
    out: list[float] = []
    for members in groups.values():
        xs = [
            round(p.fixed + scale * sum(ratios[k] * v for k, v in p.kinds.items())) for p in members
        ]
        ys = [p.target for p in members]
        line = fit_calibration(xs, ys)
        if line is None:
            continue
        out.extend(
            (line.prefix_tokens + line.ratio * x - y) / y for x, y in zip(xs, ys, strict=True)
        )
    return out


def loss(points: Sequence[Point], ratios: dict[str, float]) -> float:
    errs = errors(points, ratios)
    fit = sum(math.sqrt(e * e + SMOOTH * SMOOTH) for e in errs) / max(1, len(errs))
    return fit + PRIOR * sum(math.log(r) ** 2 for r in ratios.values())


def golden(f: Callable[[float], float], lo: float, hi: float, steps: int = 18) -> float:
    """The minimum of a unimodal ``f`` on [lo, hi] (golden-section search)."""
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(steps):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2


def fit(points: Sequence[Point]) -> dict[str, float]:
    """The ratios minimizing ``loss``, scaled to keep the corpus's plain total."""
    present = {k for p in points for k in p.kinds}
    logs = dict.fromkeys(KINDS, 0.0)
    for _ in range(ROUNDS):
        for kind in KINDS:
            if kind not in present:
                continue

            def at(value: float, kind: str = kind) -> float:
                trial = {k: math.exp(v) for k, v in logs.items()}
                trial[kind] = math.exp(value)
                return loss(points, trial)

            best = golden(at, logs[kind] - 0.6, logs[kind] + 0.6)
            if at(best) < at(logs[kind]):
                logs[kind] = best
    ratios = {k: math.exp(v) for k, v in logs.items()}
    plain = sum(sum(p.kinds.values()) for p in points)
    weighted = sum(ratios[k] * v for p in points for k, v in p.kinds.items())
    scale = plain / weighted if weighted else 1.0
    return {k: round(r * scale, 4) for k, r in ratios.items()}


def summary(points: Sequence[Point], ratios: dict[str, float]) -> str:
    errs = sorted(abs(e) for e in errors(points, ratios))
    if not errs:
        return "no points"
    p90 = errs[min(len(errs) - 1, math.ceil(0.9 * len(errs)) - 1)]
    return f"median {100 * statistics.median(errs):.2f} %, p90 {100 * p90:.2f} %"


def toml_table(name: str, ratios: dict[str, float]) -> str:
    lines = [f"[{name}]"] + [f"{k} = {ratios[k]}" for k in KINDS]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="print, do not write")
    parser.add_argument(
        "--points",
        metavar="PICKLE",
        help="keep the measured requests in this file and reuse them when it exists "
        "(to try fit settings without replaying the corpus again)",
    )
    args = parser.parse_args(argv)
    root = Path(os.environ.get("CONTEXTLAB_CORPUS") or "../shared/corpus")
    paths = sorted(root.rglob("*.jsonl"))
    if not paths:
        print(f"no transcripts under {root}", file=sys.stderr)
        return 2
    by_file: dict[str, list[Point]] = {}
    mismatched = 0
    if args.points and Path(args.points).exists():
        by_file, mismatched = pickle.loads(Path(args.points).read_bytes())
    else:
        for path in paths:
            by_file[path.name], bad = measure(path)
            mismatched += bad
        if args.points:
            Path(args.points).write_bytes(pickle.dumps((by_file, mismatched)))
    points = [p for pts in by_file.values() for p in pts]
    plain = dict.fromkeys(KINDS, 1.0)
    totals: Counter[str] = Counter()
    for p in points:
        totals.update(p.kinds)
    print(
        f"{len(paths)} files, {len(points)} recorded requests; kind split off the raw count "
        f"at {mismatched} requests"
    )
    print(
        "view tokens by kind (summed over requests): "
        + ", ".join(f"{k} {100 * totals[k] / sum(totals.values()):.1f} %" for k in KINDS)
    )
    whole = fit(points)
    print(f"plain cl100k:  {summary(points, plain)}")
    print(f"fitted:        {summary(points, whole)}  {whole}")
    held: dict[str, dict[str, float]] = {}
    for source in sorted({owner_of(name) for name in by_file}):
        train = [p for name, pts in by_file.items() if owner_of(name) != source for p in pts]
        test = [p for name, pts in by_file.items() if owner_of(name) == source for p in pts]
        held[source] = fit(train)
        print(
            f"  without {source:22} on it: plain {summary(test, plain)}; "
            f"held out {summary(test, held[source])}  {held[source]}"
        )
    held_points = [e for name, pts in by_file.items() for e in errors(pts, held[owner_of(name)])]
    errs = sorted(abs(e) for e in held_points)
    p90 = errs[min(len(errs) - 1, math.ceil(0.9 * len(errs)) - 1)]
    print(
        f"leave-one-source-out, pooled: median {100 * statistics.median(errs):.2f} %, "
        f"p90 {100 * p90:.2f} %"
    )
    if args.dry_run:
        return 0
    header = (
        "# Claude tokens per cl100k token, per content kind\n"
        "# (contextlab.engine.measures.content_kinds; the per-thread calibration stays on top).\n"
        f"# Written by bench/fit_token_kinds.py on {dt.datetime.now(dt.UTC).date().isoformat()}: {len(paths)} "
        f"corpus files, {len(points)} recorded requests,\n"
        "# one ratio per kind shared by the corpus, each thread's 2-parameter line on top,\n"
        f"# loss: mean sqrt(e^2 + {SMOOTH}^2) of the relative error + {PRIOR} * sum(log ratio^2);\n"
        "# scaled so the corpus's plain cl100k total is kept. [held_out.<source>]: the same fit\n"
        "# without that source (file-name prefix before the first '__'), for bench/truth.py.\n"
        f"# Share of the corpus's view tokens: "
        + ", ".join(f"{k} {100 * totals[k] / sum(totals.values()):.1f} %" for k in KINDS)
        + "\n"
    )
    body = toml_table("ratios", whole) + "".join(
        "\n" + toml_table(f'held_out."{source}"', ratios) for source, ratios in held.items()
    )
    DATA_FILE.write_text(header + body)
    print(f"wrote {DATA_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
