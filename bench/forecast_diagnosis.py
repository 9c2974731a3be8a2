"""Where a forecast (``--usage-until``) strays, per session and per request.

    python bench/forecast_diagnosis.py                 # one line per session
    python bench/forecast_diagnosis.py --requests 20   # plus the 20 worst requests of each
    python bench/forecast_diagnosis.py --share 0.2 FILE…
    python bench/forecast_diagnosis.py --set post_compact_unrecorded_prior_tokens=0

Per session, over the requests the forecast did not read (``recorded`` null there): the
median and p90 of the prompt error (``model_tokens`` against the recorded prompt), its signed
median (a calibration that drifts shows a sign), and the price-free cost error
(``usage_fidelity.WEIGHTS``) split into what each part contributes, as a share of the
recorded cost of those requests:

* ``prompt`` — the estimated prompt size against the recorded one, at the recorded hit rate
  (what a perfect cache split would still get wrong);
* ``split`` — the cache model's split of the estimated prompt against that (reads against
  writes and uncached input, 1h against 5m);
* ``output`` — the estimated output against the recorded output (5× weight).

The three add up to the session's cost error. Per request (``--requests``): the same parts and
what the request holds (turn start, after a compaction, thinking blocks, thread kind), so a
stray can be put on a cause.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.truth import FORECAST_SHARE, corpus_root, resolve
from contextlab.engine.input.sources.registry import load_session
from contextlab.engine.measures.tokens import TiktokenCounter, percentile
from contextlab.engine.replay.driver import replay
from contextlab.engine.replay.forecast import ESTIMATED_OUTPUT, forecast_session
from contextlab.engine.results import RecordedUsage, RequestRow
from contextlab.engine.results.usage_fidelity import WEIGHTS, weighted_estimate, weighted_recorded


@dataclass
class RequestStray:
    thread: str
    kind: str
    request: int
    prompt: float
    #: weighted cost parts, in price-free tokens (estimate − recording)
    prompt_part: float
    split_part: float
    output_part: float
    recorded_cost: float
    estimated_output: int
    recorded_output: int
    tags: str


@dataclass
class SessionStray:
    name: str
    requests: list[RequestStray] = field(default_factory=list)

    def cost(self) -> float:
        total = sum(r.recorded_cost for r in self.requests)
        return sum(r.prompt_part + r.split_part + r.output_part for r in self.requests) / total

    def part(self, name: str) -> float:
        total = sum(r.recorded_cost for r in self.requests)
        return float(sum(getattr(r, name) for r in self.requests)) / total


def _at_recorded_rate(rec: RecordedUsage, prompt: int) -> float:
    """The recorded prompt's price-free cost, scaled to ``prompt`` tokens at its split."""
    total = rec["input"] + rec["cache_read"] + rec["cache_write"]
    prompt_cost = weighted_recorded(rec) - rec["output"] * WEIGHTS["output"]
    return prompt_cost * prompt / total if total else 0.0


def _tags(row: RequestRow, msg: Any, kind: str) -> str:
    tags = [kind]
    if row["turn_start"]:
        tags.append("turn")
    if any(e["step"] == "autocompact" for e in row["events"]):
        tags.append("compact")
    thinking = sum(1 for b in msg.blocks if b.type == "thinking")
    if thinking:
        tags.append(f"think{thinking}")
    uses = sum(1 for b in msg.blocks if b.type == "tool_use")
    if uses:
        tags.append(f"use{uses}")
    return ",".join(tags)


def diagnose(path: Path, share: float, overrides: Mapping[str, Any]) -> SessionStray:
    session = load_session(str(path))
    config, preset = resolve(session, overrides)
    counter = TiktokenCounter()
    full = replay(session, config, mode="recorded", preset_name=preset, counter=counter)
    early = forecast_session(session, share, counter)
    fc_config, fc_preset = resolve(early, overrides)
    predicted = replay(early, fc_config, mode="recorded", preset_name=fc_preset, counter=counter)
    recorded = {
        (r["thread"], r["thread_request"]): r["recorded"]
        for tr in full.threads
        for r in tr.requests
    }
    kinds = {t.id: t.kind for t in early.threads}
    messages = {t.id: t.messages for t in early.threads}
    out = SessionStray(path.name)
    for tr in predicted.threads:
        for row in tr.requests:
            rec = recorded.get((row["thread"], row["thread_request"]))
            if row["recorded"] is not None or rec is None:
                continue
            total = rec["input"] + rec["cache_read"] + rec["cache_write"]
            if total <= 0:
                continue
            msg = messages[row["thread"]][row["message"]]
            output = int(msg.metadata.get(ESTIMATED_OUTPUT, 0))
            rec_prompt_cost = weighted_recorded(rec) - rec["output"] * WEIGHTS["output"]
            scaled = _at_recorded_rate(rec, row["model_tokens"])
            est_prompt_cost = weighted_estimate(row, 0)
            out.requests.append(
                RequestStray(
                    thread=row["thread"],
                    kind=kinds[row["thread"]],
                    request=row["thread_request"],
                    prompt=(row["model_tokens"] - total) / total,
                    prompt_part=scaled - rec_prompt_cost,
                    split_part=est_prompt_cost - scaled,
                    output_part=(output - rec["output"]) * WEIGHTS["output"],
                    recorded_cost=weighted_recorded(rec),
                    estimated_output=output,
                    recorded_output=rec["output"],
                    tags=_tags(row, msg, kinds[row["thread"]]),
                )
            )
    return out


def _pct(value: float) -> str:
    return f"{100 * value:+7.2f}%"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--share", type=float, default=FORECAST_SHARE)
    parser.add_argument("--requests", type=int, default=0, help="worst N requests per session")
    parser.add_argument(
        "--sort",
        choices=("prompt", "cost"),
        default="prompt",
        help="worst requests by prompt error or by their share of the session's cost error",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a config field for both replays (an integer or a number); repeatable",
    )
    args = parser.parse_args(argv)
    overrides = {
        k: float(v) if "." in v else int(v) for k, v in (a.split("=", 1) for a in args.set)
    }
    paths = args.files or sorted(corpus_root().rglob("*.jsonl"))
    print(
        f"{'file':52} {'n':>4} {'med':>7} {'p90':>7} {'signed':>8} {'cost':>8} "
        f"{'prompt':>8} {'split':>8} {'output':>8}"
    )
    everything: list[float] = []
    costs: list[float] = []
    for path in paths:
        stray = diagnose(path, args.share, overrides)
        if not stray.requests:
            print(f"{path.name[:52]:52} (nothing forecast)")
            continue
        errors = sorted(abs(r.prompt) for r in stray.requests)
        everything.extend(errors)
        costs.append(abs(stray.cost()))
        signed = statistics.median(r.prompt for r in stray.requests)
        print(
            f"{path.name[:52]:52} {len(errors):>4} {_pct(statistics.median(errors))} "
            f"{_pct(percentile(errors, 0.9))} {_pct(signed):>8} {_pct(stray.cost()):>8} "
            f"{_pct(stray.part('prompt_part')):>8} {_pct(stray.part('split_part')):>8} "
            f"{_pct(stray.part('output_part')):>8}"
        )
        total = sum(r.recorded_cost for r in stray.requests)
        by_cost = args.sort == "cost"
        worst = sorted(
            stray.requests,
            key=lambda r: (
                -abs(r.prompt_part + r.split_part + r.output_part if by_cost else r.prompt)
            ),
        )[: args.requests]
        for r in worst:
            print(
                f"    {r.thread[:12]:12} #{r.request:<4} prompt {_pct(r.prompt)} "
                f"cost parts {_pct(r.prompt_part / total)} {_pct(r.split_part / total)} "
                f"{_pct(r.output_part / total)} out {r.estimated_output:>6}/{r.recorded_output:<6} "
                f"{r.tags}"
            )
    everything.sort()
    if everything:
        print(
            f"pooled: {len(everything)} requests, median {_pct(statistics.median(everything))}, "
            f"p90 {_pct(percentile(everything, 0.9))}; session cost median "
            f"{_pct(statistics.median(costs))}, worst {_pct(max(costs))}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
