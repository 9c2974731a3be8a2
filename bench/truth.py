"""Every #9 target on the corpus, twice: whole corpus and leave-one-source-out.

    python bench/truth.py                 # table of all targets (corpus incl. recent/)
    python bench/truth.py --json OUT.json # the same figures as JSON
    python bench/truth.py --files         # plus one line per file
    python bench/truth.py --extra DIR     # the corpus plus the transcripts under DIR
    python bench/truth.py --extra DIR --only-extra   # those transcripts alone

Figures (each on the whole corpus, ``$CONTEXTLAB_CORPUS`` or ``../shared/corpus`` with its
subfolders):

* tokens — recorded mode, per-thread (per model) 2-parameter fit of ``raw_tokens`` against the
  recorded prompt minus ``unrecorded_tokens`` (``evaluation.fidelity``): pooled median and p90
  of |relative error|, and the worst session's p90;
* compactions — ``whatif --preset auto`` against every recorded automatic compaction: predicted
  on the same request or a neighbour with the decision count within 2 % of ``preTokens``;
  extras are simulated compactions with no recorded compaction (of any trigger) next to them;
* identity — per session, whatif ``auto`` and recorded agree on every thread's compaction
  requests and their session costs are within 1 %;
* cost — recorded-mode session cost (subagents and compaction calls included) against the cost
  of the recorded usage: median and worst |relative error|; the same price-free with tokens
  weighted as Claude prices them (cache read 0.1, 5m write 1.25, 1h write 2, output 5);
* cache misses — recall and precision of requests whose recorded cache read is under half the
  prompt (``evaluation.cache_accuracy``, on the cache model's own estimate).

Beside the targets: the cost with the cache model alone (``cache_recorded_server_misses`` off:
no server-side miss taken from the recording), and the token count as the pages show it (the
replay's own calibration, against the recorded prompt, with no refit).

Leave-one-source-out: every config constant fitted on the corpus (``FITTED`` and
``FITTED_BY_COST`` below, scored on the token p90 and the price-free cost; each is a
``PipelineConfig`` field with its candidates) and every constant of the forecast's output
model (``FITTED_FORECAST``, ``forecast_session`` keywords scored on the forecast's price-free
cost) is chosen on all repositories but one, by its score there, and the held-out repository
is scored with that choice; pooled over all repositories. The content-kind token ratios (``measures/data/token_kinds.toml``) are fitted
by ``bench/fit_token_kinds.py``, which also writes them fitted without each source (the file
name's owner, before the first ``__``): a held-out repository is counted with those.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import fidelity_doc
from contextlab.engine.config.resolve import resolve_config
from contextlab.engine.input.session import Session
from contextlab.engine.input.sources.registry import load_session
from contextlab.engine.measures.content_kinds import KindRatios, held_out_ratios
from contextlab.engine.measures.tokens import TiktokenCounter, percentile
from contextlab.engine.replay.driver import replay
from contextlab.engine.replay.forecast import (
    RESPONSE_OVERHEAD_TOKENS,
    SIGNATURE_RATE_MAX,
    forecast_session,
)
from contextlab.engine.replay.result import ReplayResult
from contextlab.engine.results import RequestRow
from contextlab.engine.results.evaluation import cache_accuracy, fidelity
from contextlab.engine.results.usage_fidelity import (
    UsageFidelity,
    forecast_fidelity,
    usage_fidelity,
    weighted_estimate,
    weighted_recorded,
)

#: Config constants tuned on the corpus: field → candidate values (the preset's value first).
#: Leave-one-source-out picks one per held-out repository from the others.
FITTED: dict[str, tuple[Any, ...]] = {
    "anchor_margin_tokens": (0, 2_000, 4_000),
    "anchor_margin_share": (0.01, 0.005, 0.02),
}
#: Cache-model constants tuned on the corpus the same way, scored on the price-free cost of the
#: estimate (mean |weighted error| per session) instead of the token p90 they cannot move.
FITTED_BY_COST: dict[str, tuple[Any, ...]] = {
    "cache_system_survival_seconds": (3_600, 0, 1_800, 7_200, 86_400),
}
#: Forecast output-model constants (``forecast_session`` keywords; the engine's default
#: first), scored on the forecast's price-free cost of the later requests (mean |error| per
#: session), which they move and the other figures cannot feel.
FITTED_FORECAST: dict[str, tuple[Any, ...]] = {
    "response_overhead": (RESPONSE_OVERHEAD_TOKENS, 0, 25, 50, 100, 150),
    "signature_rate_max": (SIGNATURE_RATE_MAX, 0.35, 0.5, 1.0),
}
#: the share of each thread's requests a forecast reads (``--usage-until``)
FORECAST_SHARE = 0.2
COMPACTION_TOLERANCE = 0.02
IDENTITY_COST_TOLERANCE = 0.01


def corpus_root() -> Path:
    return Path(os.environ.get("CONTEXTLAB_CORPUS") or "../shared/corpus")


def source_of(path: Path) -> str:
    """The repository a corpus file came from: ``owner__repo__…`` → ``owner/repo``."""
    parts = path.name.split("__")
    return f"{parts[0]}/{parts[1]}" if len(parts) > 2 else path.stem


def resolve(session: Session, overrides: Mapping[str, Any]) -> Any:
    kwargs: dict[str, Any] = {
        "version": session.version,
        "max_recorded_prompt": session.max_recorded_prompt,
    }
    return resolve_config(
        "auto",
        dict(overrides) or None,
        recorded_auto_compactions=session.recorded_auto_compactions,
        **kwargs,
    )


@dataclass
class FileFigures:
    name: str
    source: str
    errors: list[float] = field(default_factory=list)
    session_p90: float | None = None
    #: |model_tokens − recorded| / recorded per request: the calibrated count the pages show
    shown_errors: list[float] = field(default_factory=list)
    cost_error: float | None = None
    weighted_error: float | None = None
    claude_code_cost: float | None = None
    misses: tuple[int, int, int] = (0, 0, 0)
    compactions: list[dict[str, Any]] = field(default_factory=list)
    extras: int = 0
    identity: bool = True
    identity_reason: str = ""
    anchors: int = 0
    requests: int = 0
    #: Claude Code version of the session and its main model (``docs/fidelity.md`` groups)
    version: str | None = None
    model: str = ""
    #: (Σ estimated cache read − Σ recorded) / Σ recorded over the session
    read_error: float | None = None
    #: forecast (``usage_until`` = FORECAST_SHARE): |model_tokens − recorded| / recorded of
    #: every request it did not read, and the price-free cost of those requests
    forecast_errors: list[float] = field(default_factory=list)
    forecast_cost: float | None = None
    forecast_read: float | None = None


def _all_rows(result: ReplayResult) -> list[RequestRow]:
    return [r for tr in result.threads for r in tr.requests]


def _session_costs(result: ReplayResult) -> tuple[float, float]:
    summary: Mapping[str, Any] = result.result_json()["summary"]
    if "estimate" in summary:
        # the replay's estimate against the recording (``session_cost_usd`` is recorded first)
        return (
            float(summary["estimate"]["session_cost_usd"]),
            float(summary["recorded_session_cost_usd"]),
        )
    rows = _all_rows(result)
    return (
        sum(r["cost_estimate_usd"] for r in rows),
        sum(r["recorded_cost_usd"] or 0.0 for r in rows),
    )


def _weighted(rows: Sequence[RequestRow]) -> tuple[float, float]:
    ours = recorded = 0.0
    for r in rows:
        rec = r["recorded"]
        if rec is not None:
            ours += weighted_estimate(r, rec["output"])
            recorded += weighted_recorded(rec)
    return ours, recorded


def _compacted(rows: Sequence[RequestRow]) -> dict[int, dict[str, Any]]:
    return {
        r["thread_request"]: {"decision_tokens": r["decision_tokens"], **e}
        for r in rows
        for e in r["events"]
        if e["step"] == "autocompact" and e["action"] == "compacted"
    }


def main_model(session: Session) -> str:
    """The model most of the main conversation's responses came from, short (``opus-4-6``)."""
    models = Counter(m.model for m in session.main.messages if m.role == "assistant" and m.model)
    if not models:
        return "unknown"
    name = models.most_common(1)[0][0].removeprefix("claude-")
    parts = name.split("-")
    return (
        "-".join(parts[:-1])
        if len(parts) > 2 and parts[-1].isdigit() and len(parts[-1]) == 8
        else name
    )


def forecast_figures(
    session: Session,
    recorded: ReplayResult,
    overrides: Mapping[str, Any],
    counter: TiktokenCounter,
    constants: Mapping[str, Any],
) -> UsageFidelity:
    """``forecast_fidelity`` of a ``FORECAST_SHARE`` forecast of ``session`` against its
    recorded replay."""
    # the forecast knows only the first share of the session, its config's inference too
    early = forecast_session(session, FORECAST_SHARE, counter, **constants)
    fc_config, fc_preset = resolve(early, overrides)
    predicted = replay(early, fc_config, mode="recorded", preset_name=fc_preset, counter=counter)
    return forecast_fidelity(predicted, recorded)


def forecast_costs(paths: Sequence[Path]) -> dict[tuple[str, Any], dict[str, float | None]]:
    """(constant, candidate) → file name → the forecast's session cost error, for every
    ``FITTED_FORECAST`` candidate (the others at the engine's default)."""
    grid: dict[tuple[str, Any], dict[str, float | None]] = {
        (name, value): {} for name, candidates in FITTED_FORECAST.items() for value in candidates
    }
    for path in paths:
        session = load_session(str(path))
        config, preset = resolve(session, {})
        counter = TiktokenCounter()
        recorded = replay(session, config, mode="recorded", preset_name=preset, counter=counter)
        for name, value in grid:
            fc = forecast_figures(session, recorded, {}, counter, {name: value})
            grid[(name, value)][path.name] = fc["session_cost"]
    return grid


def evaluate(
    path: Path,
    overrides: Mapping[str, Any],
    *,
    forecast: bool = False,
    kind_ratios: KindRatios | None = None,
    forecast_constants: Mapping[str, Any] | None = None,
) -> FileFigures:
    """The figures of one file; ``kind_ratios``: the content-kind ratios to count with (the
    fitted table's by default; leave-one-source-out passes those fitted without the file's
    source); ``forecast_constants``: ``forecast_session`` keywords (``FITTED_FORECAST``)."""
    session = load_session(str(path))
    config, preset = resolve(session, overrides)
    counter = TiktokenCounter(kind_ratios)
    recorded = replay(session, config, mode="recorded", preset_name=preset, counter=counter)
    whatif = replay(session, config, mode="whatif", preset_name=preset, counter=counter)
    figs = FileFigures(path.name, source_of(path))
    figs.version = session.version
    figs.model = main_model(session)
    figs.read_error = usage_fidelity(recorded)["session_read"]
    if forecast:
        fc = forecast_figures(session, recorded, overrides, counter, forecast_constants or {})
        figs.forecast_errors = sorted(abs(r["prompt"]) for r in fc["requests"])
        figs.forecast_cost = fc["session_cost"]
        figs.forecast_read = fc["session_read"]
    fid = fidelity(recorded)
    figs.errors = fid["errors"]
    figs.session_p90 = percentile(fid["errors"], 0.9) if fid["errors"] else None
    figs.shown_errors = sorted(
        abs(r["model_tokens"] - r["recorded_total"]) / r["recorded_total"]
        for r in _all_rows(recorded)
        if r["recorded_total"]
    )
    ours, theirs = _session_costs(recorded)
    figs.cost_error = (ours - theirs) / theirs if theirs else None
    w_ours, w_theirs = _weighted(_all_rows(recorded))
    figs.weighted_error = (w_ours - w_theirs) / w_theirs if w_theirs else None
    summary: Mapping[str, Any] = recorded.result_json()["summary"]
    figs.claude_code_cost = summary.get("claude_code_cost")
    cache = cache_accuracy(recorded)
    figs.misses = cache["counts"]
    threads = recorded.result_json()["session"]["threads"]
    figs.anchors = sum(len(t.get("anchors") or []) for t in threads)
    figs.requests = sum(t["requests"] for t in threads)
    wi_by_thread = {tr.thread.id: tr for tr in whatif.threads}
    differing: list[str] = []
    for rec_tr in recorded.threads:
        if rec_tr.thread.compaction_fork:
            continue
        wi_tr = wi_by_thread.get(rec_tr.thread.id)
        rec_c = _compacted(rec_tr.requests)
        wi_c = _compacted(wi_tr.requests) if wi_tr else {}
        if sorted(rec_c) != sorted(wi_c):
            differing.append(f"{rec_tr.thread.id}: recorded {sorted(rec_c)} whatif {sorted(wi_c)}")
        matched: set[int] = set()
        for k, e in rec_c.items():
            if e.get("trigger") != "auto":
                continue
            j = next((j for j in (k, k - 1, k + 1) if j in wi_c and j not in matched), None)
            pre = int(e.get("pre_tokens") or 0)
            count = wi_c[j]["decision_tokens"] if j is not None else None
            rel = abs(count - pre) / pre if count is not None and pre else None
            if j is not None:
                matched.add(j)
            figs.compactions.append(
                {
                    "file": path.name,
                    "thread": rec_tr.thread.id,
                    "request": k,
                    "pre_tokens": pre,
                    "offset": None if j is None else j - k,
                    "decision_tokens": count,
                    "rel_error": rel,
                    "ok": rel is not None and rel <= COMPACTION_TOLERANCE,
                }
            )
        near_recorded = {j for k in rec_c for j in (k - 1, k, k + 1)}
        figs.extras += sum(
            1
            for j, e in wi_c.items()
            if j not in matched and j not in near_recorded and e.get("trigger") != "manual"
        )
    wi_cost, _ = _session_costs(whatif)
    rec_cost, _ = _session_costs(recorded)
    cost_ok = abs(wi_cost - rec_cost) <= IDENTITY_COST_TOLERANCE * max(rec_cost, 1e-9)
    if not cost_ok:
        differing.append(f"cost whatif {wi_cost:.4f} recorded {rec_cost:.4f}")
    figs.identity = not differing
    figs.identity_reason = "; ".join(differing)
    return figs


def aggregate(files: Sequence[FileFigures]) -> dict[str, Any]:
    errors = sorted(e for f in files for e in f.errors)
    p90s = [f.session_p90 for f in files if f.session_p90 is not None]
    costs = [abs(f.cost_error) for f in files if f.cost_error is not None]
    weighted = [abs(f.weighted_error) for f in files if f.weighted_error is not None]
    rec_miss = sum(f.misses[0] for f in files)
    pred_miss = sum(f.misses[1] for f in files)
    both = sum(f.misses[2] for f in files)
    comps = [c for f in files for c in f.compactions]
    shown = sorted(e for f in files for e in f.shown_errors)
    forecast = sorted(e for f in files for e in f.forecast_errors)
    fc_costs = [abs(f.forecast_cost) for f in files if f.forecast_cost is not None]
    reads = [abs(f.read_error) for f in files if f.read_error is not None]
    shown_p90s = [percentile(f.shown_errors, 0.9) for f in files if f.shown_errors]
    return {
        "shown_median": statistics.median(shown) if shown else None,
        "shown_p90": percentile(shown, 0.9) if shown else None,
        "shown_worst_session_p90": max(shown_p90s) if shown_p90s else None,
        "files": len(files),
        "requests": len(errors),
        "tokens_median": statistics.median(errors) if errors else None,
        "tokens_p90": percentile(errors, 0.9) if errors else None,
        "worst_session_p90": max(p90s) if p90s else None,
        "worst_session": max(files, key=lambda f: f.session_p90 or 0).name if files else None,
        "auto_compactions": len(comps),
        "auto_predicted": sum(1 for c in comps if c["ok"]),
        "extra_compactions": sum(f.extras for f in files),
        "identity": sum(1 for f in files if f.identity),
        "cost_median": statistics.median(costs) if costs else None,
        "cost_worst": max(costs) if costs else None,
        "weighted_median": statistics.median(weighted) if weighted else None,
        "weighted_worst": max(weighted) if weighted else None,
        "miss_recall": both / rec_miss if rec_miss else None,
        "miss_precision": both / pred_miss if pred_miss else None,
        "read_median": statistics.median(reads) if reads else None,
        "read_worst": max(reads) if reads else None,
        "forecast_requests": len(forecast),
        "forecast_median": statistics.median(forecast) if forecast else None,
        "forecast_p90": percentile(forecast, 0.9) if forecast else None,
        "forecast_cost_median": statistics.median(fc_costs) if fc_costs else None,
        "forecast_cost_worst": max(fc_costs) if fc_costs else None,
        "forecast_worst_session": max(
            (f for f in files if f.forecast_cost is not None),
            key=lambda f: abs(f.forecast_cost or 0),
        ).name
        if fc_costs
        else None,
        "anchors": sum(f.anchors for f in files),
        "anchored_share_worst": max(
            (f.anchors / f.requests for f in files if f.requests >= 20), default=None
        ),
    }


def leave_one_source_out(paths: Sequence[Path]) -> tuple[list[FileFigures], dict[str, Any]]:
    """Per held-out repository, the candidate of every fitted constant that scores best (token
    p90) on the other repositories, then that repository scored with it."""
    by_source: dict[str, list[Path]] = {}
    for p in paths:
        by_source.setdefault(source_of(p), []).append(p)
    fitted = {**FITTED, **FITTED_BY_COST}
    if not fitted:
        return [], {}
    forecast_grid = forecast_costs(paths)
    grid: dict[tuple[str, Any], dict[str, FileFigures]] = {}
    for name, candidates in fitted.items():
        for value in candidates:
            grid[(name, value)] = {p.name: evaluate(p, {name: value}) for p in paths}
    chosen: dict[str, dict[str, Any]] = {}
    scored: list[FileFigures] = []
    for source, held in by_source.items():
        choice: dict[str, Any] = {}
        for name, candidates in fitted.items():

            def score(value: Any, name: str = name, source: str = source) -> float:
                others = [
                    f
                    for fname, f in grid[(name, value)].items()
                    if source_of(Path(fname)) != source
                ]
                if name in FITTED_BY_COST:
                    costs = [abs(f.weighted_error) for f in others if f.weighted_error is not None]
                    return statistics.fmean(costs) if costs else 0.0
                errs = sorted(e for f in others for e in f.errors)
                return percentile(errs, 0.9) if errs else 0.0

            choice[name] = min(candidates, key=score)
        constants: dict[str, Any] = {}
        for name, candidates in FITTED_FORECAST.items():

            def forecast_score(value: Any, name: str = name, source: str = source) -> float:
                costs = [
                    abs(cost)
                    for fname, cost in forecast_grid[(name, value)].items()
                    if source_of(Path(fname)) != source and cost is not None
                ]
                return statistics.fmean(costs) if costs else 0.0

            constants[name] = min(candidates, key=forecast_score)
        # the content-kind ratios fitted without the source's owner (``fit_token_kinds``)
        ratios = held_out_ratios(source.split("/", 1)[0])
        chosen[source] = {**choice, **constants, "kind_ratios": ratios.source}
        scored.extend(
            evaluate(p, choice, forecast=True, kind_ratios=ratios, forecast_constants=constants)
            for p in held
        )
    return scored, chosen


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f} %"


TARGETS: list[tuple[str, str, str]] = [
    ("tokens_median", "tokens median (≤ 1 %)", "pct"),
    ("tokens_p90", "tokens p90 (≤ 4 %)", "pct"),
    ("worst_session_p90", "worst session p90 (≤ 10 %)", "pct"),
    ("auto_predicted", "auto compactions predicted (all)", "count_of:auto_compactions"),
    ("extra_compactions", "extra compactions (0)", "int"),
    ("identity", "identity sessions (all)", "count_of:files"),
    ("cost_median", "cost median (≤ 2 %)", "pct"),
    ("cost_worst", "cost worst (≤ 5 %)", "pct"),
    ("weighted_median", "weighted tokens median (≤ 2 %)", "pct"),
    ("weighted_worst", "weighted tokens worst (≤ 5 %)", "pct"),
    ("miss_recall", "cache-miss recall (≥ 85 %)", "pct"),
    ("miss_precision", "cache-miss precision (≥ 85 %)", "pct"),
    ("forecast_median", "forecast 0.2 tokens median (≤ 2.5 %)", "pct"),
    ("forecast_p90", "forecast 0.2 tokens p90 (≤ 8 %)", "pct"),
    ("forecast_cost_median", "forecast 0.2 weighted median (≤ 5 %)", "pct"),
    ("forecast_cost_worst", "forecast 0.2 weighted worst (≤ 15 %)", "pct"),
    ("anchors", "anchors (few)", "int"),
    ("anchored_share_worst", "anchors/requests, worst (≥ 20 req)", "pct"),
]
#: not targets: the token count as the pages show it (the replay's own calibration, no refit)
SHOWN: list[tuple[str, str, str]] = [
    ("shown_median", "shown tokens median", "pct"),
    ("shown_p90", "shown tokens p90", "pct"),
    ("shown_worst_session_p90", "shown tokens, worst session p90", "pct"),
    ("read_median", "session cache reads, median", "pct"),
    ("read_worst", "session cache reads, worst", "pct"),
]


def _cell(figs: Mapping[str, Any], key: str, kind: str) -> str:
    if not figs:
        return "-"
    if kind == "pct":
        return _pct(figs.get(key))
    if kind.startswith("count_of:"):
        return f"{figs.get(key)} of {figs.get(kind.split(':', 1)[1])}"
    return str(figs.get(key))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--files", action="store_true", help="one line per file")
    parser.add_argument(
        "--fidelity-doc",
        metavar="PATH",
        help="write the figures per Claude Code version band and model to PATH (docs/fidelity.md)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="leave out the figures beside the targets (estimate alone, cache model alone)",
    )
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="DIR",
        help="also measure the transcripts under DIR (gathered files; name them owner__repo__… "
        "so leave-one-source-out knows their source); repeatable",
    )
    parser.add_argument(
        "--only-extra",
        action="store_true",
        help="measure the --extra folders alone, without the corpus",
    )
    args = parser.parse_args(argv)
    root = corpus_root()
    paths = [] if args.only_extra else sorted(root.rglob("*.jsonl"))
    for folder in args.extra:
        paths.extend(sorted(Path(folder).rglob("*.jsonl")))
    if not paths:
        print(f"no transcripts under {root}", file=sys.stderr)
        return 2
    whole = [evaluate(p, {}, forecast=True) for p in paths]
    whole_figs = aggregate(whole)
    # the compactions again with the replay's own estimate only (no recorded preTokens or
    # recorded counts in what-if): how well the estimator alone predicts them
    alone = (
        {}
        if args.quick
        else aggregate([evaluate(p, {"whatif_recorded_counts": False}) for p in paths])
    )
    # the cost with the cache model's estimate alone: no server-side miss taken from the
    # recording (what the simulator predicts by itself)
    model_only = (
        {}
        if args.quick
        else aggregate([evaluate(p, {"cache_recorded_server_misses": False}) for p in paths])
    )
    loso_files, chosen = leave_one_source_out(paths)
    loso_figs = aggregate(loso_files) if loso_files else whole_figs
    print(f"{'target':40} {'whole corpus':>16} {'leave-one-out':>16}")
    for key, label, kind in TARGETS:
        print(f"{label:40} {_cell(whole_figs, key, kind):>16} {_cell(loso_figs, key, kind):>16}")
    for key, label, kind in TARGETS[3:6] if alone else ():
        print(f"{label + ', estimate alone':40} {_cell(alone, key, kind):>16}")
    for key, label, kind in TARGETS[6:10] if model_only else ():
        print(f"{label + ', cache model alone':40} {_cell(model_only, key, kind):>16}")
    for key, label, kind in SHOWN:
        print(f"{label:40} {_cell(whole_figs, key, kind):>16} {_cell(loso_figs, key, kind):>16}")
    print(f"worst session: {whole_figs['worst_session']}")
    if chosen:
        for source, choice in chosen.items():
            print(f"  fitted without {source}: {choice}")
    else:
        print("no constant is fitted on the corpus: leave-one-source-out equals the whole corpus")
    for f in whole:
        for c in f.compactions:
            if not c["ok"]:
                print(
                    f"  compaction missed: {c['file'][:50]} req {c['request']} pre {c['pre_tokens']:,} "
                    f"offset {c['offset']} decision {c['decision_tokens']} ({_pct(c['rel_error'])})"
                )
        if f.extras:
            print(f"  extra compactions: {f.name[:60]} {f.extras}")
        if not f.identity:
            print(f"  identity: {f.name[:60]}: {f.identity_reason[:200]}")
    if args.files:
        print(
            f"\n{'file':64} {'n':>5} {'p90':>8} {'cost':>8} {'weighted':>9} {'cc cost':>9} "
            f"{'reads':>8} {'fc p90':>8} {'fc cost':>8}"
        )
        for f in whole:
            cc = "-" if f.claude_code_cost is None else f"{f.claude_code_cost:.3f}"
            fc90 = percentile(f.forecast_errors, 0.9) if f.forecast_errors else None
            print(
                f"{f.name[:64]:64} {len(f.errors):>5} {_pct(f.session_p90):>8} "
                f"{_pct(f.cost_error):>8} {_pct(f.weighted_error):>9} {cc:>9} "
                f"{_pct(f.read_error):>8} {_pct(fc90):>8} {_pct(f.forecast_cost):>8}"
            )
    if args.fidelity_doc:
        Path(args.fidelity_doc).write_text(
            fidelity_doc.render(
                whole,
                loso_files or whole,
                whole_figs,
                {"chosen": chosen},
                f"{root.resolve().parent.name}/{root.resolve().name}",
                FORECAST_SHARE,
            )
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "whole": whole_figs,
                    "leave_one_source_out": loso_figs,
                    "estimate_alone": alone,
                    "cache_model_alone": model_only,
                    "chosen": chosen,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
