"""The ``contextlab`` command: replay transcripts and measure fidelity from a shell or CI."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import statistics
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from .config.errors import ConfigError
from .config.fields import PipelineConfig
from .config.resolve import resolve_session_config
from .input.model import TranscriptError
from .input.session import Session
from .input.sources.registry import load_session
from .measures.tokens import TiktokenCounter
from .replay.driver import MODES, replay
from .replay.forecast import check_usage_until, forecast_session
from .replay.result import ReplayResult
from .results import compare
from .results.json_stream import write_json
from .summarizing import SUMMARIZER_NAMES, ExtractiveSummarizer, Summarizer

EXIT_OK = 0
EXIT_UNUSABLE = 2
EXIT_USAGE = 64


def _load(path: str, err: TextIO) -> Session | None:
    try:
        session = load_session(path)
    except TranscriptError as exc:
        print(f"error: {path}: {exc}", file=err)
        for problem in exc.problems[:20]:
            print(f"  {problem}", file=err)
        return None
    except OSError as exc:
        print(f"error: {path}: {exc.strerror or exc}", file=err)
        return None
    for problem in session.problems:
        print(f"{problem.severity}: {problem}", file=err)
    return session


def _config(args: argparse.Namespace, session: Session) -> tuple[PipelineConfig, str]:
    if args.config:
        path: str = args.config
        if path.endswith(".json"):
            config = PipelineConfig.from_json(path)
        else:
            config = PipelineConfig.from_toml(path)
        return config, path
    return resolve_session_config(session, args.preset or "auto")


def _fmt(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def print_table(result: ReplayResult, out: TextIO) -> None:
    data = result.result_json()
    session = data["session"]
    cal = session["calibration"]
    print(
        f"{session['name']}  version {session['version']}  mode {session['mode']}  preset {session['preset']}",
        file=out,
    )
    if session["usage_until"] < 1:
        print(
            f"forecast: recorded figures read for the first {session['usage_until']:.0%} of each "
            "thread's requests only; every later request is estimated",
            file=out,
        )
    if cal:
        print(
            f"calibration: prefix {cal['prefix_tokens']:,} + {cal['ratio']} × raw  ({cal['source']}, "
            f"median error {_pct(cal['median_rel_error'])}, p90 {_pct(cal['p90_rel_error'])})",
            file=out,
        )
    header = f"{'#':>5} {'time':19} {'model':24} {'model tok':>10} {'recorded':>10} {'decision':>10} {'read':>9} {'write':>8} {'uncached':>8} {'$':>8}  events"
    print(header, file=out)
    for r in data["requests"]:
        rec = r["recorded_total"]
        events = ", ".join(f"{e['step']}:{e['action']}" for e in r["events"])
        print(
            f"{r['index']:>5} {(r['timestamp'] or '')[:19]:19} {(r['model'] or '')[:24]:24} "
            f"{_fmt(r['model_tokens']):>10} {_fmt(rec):>10} {_fmt(r['decision_tokens']):>10} "
            f"{_fmt(r['cache']['read']):>9} {_fmt(r['cache']['write']):>8} {_fmt(r['cache']['uncached']):>8} "
            f"{r['cost_usd']:>8.4f}  {events}",
            file=out,
        )
    s = data["summary"]
    print(
        f"requests {s['requests']}, compactions {s['compactions']}, peak {s['peak_model_tokens']:,} tokens, "
        f"cache hit {s['cache_hit_rate']:.1%}, cost ${s['cost_usd']:.2f} (recorded usage where "
        f"recorded, else estimated; replay estimate ${s['estimate']['cost_usd']:.2f}; "
        f"{s['recorded_cache_requests']} requests as recorded"
        f"{', the requests read' if session['usage_until'] < 1 else ''})",
        file=out,
    )
    if s["compactions"]:
        print(
            f"compaction calls ${s['compaction_call_cost_usd']:.2f} as Claude Code pays them "
            "(the context as input at its cache state, the summary as output); estimate with "
            f"them ${compare.estimate_with_calls(s):.2f}, what a comparison weighs",
            file=out,
        )
    for sub in data["subagents"]:
        print(f"  {sub['kind']} {sub['thread']}: {len(sub['requests'])} requests", file=out)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2%}"


def cmd_replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        usage_until = check_usage_until(args.usage_until)
    except ValueError as exc:
        print(f"error: --usage-until: {exc}", file=err)
        return EXIT_USAGE
    session = _load(args.file, err)
    if session is None:
        return EXIT_UNUSABLE
    # a forecast reads the later requests' figures nowhere, the config's inference included
    session = forecast_session(session, usage_until, TiktokenCounter())
    try:
        config, preset = _config(args, session)
    except ConfigError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    except OSError as exc:
        print(f"error: cannot read config: {exc}", file=err)
        return EXIT_USAGE
    try:
        summarizer = _summarizer(args)
    except ValueError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    result = replay(session, config, mode=args.mode, preset_name=preset, summarizer=summarizer)
    # a degraded summary must not pass unnoticed in CI logs
    for item in result.log.summaries():
        if item["fallback_reason"]:
            print(
                f"warning: summary {item['id']} (request {item['request']}) fell back to "
                f"{item['backend']}: {item['fallback_reason']}",
                file=err,
            )
    if args.json:
        # request by request (the C encoder on each): never the whole JSON as one string
        write_json(result.to_json(), out, ensure_ascii=False, separators=(",", ":"))
        out.write("\n")
    else:
        print_table(result, out)
    return EXIT_OK


def _summarizer(args: argparse.Namespace) -> Summarizer:
    """The summarizer the flags ask for; LLM ones fall back to the offline summary on failure
    (each such summary is marked with the reason) rather than failing the whole replay."""
    if args.summarizer == "extractive":
        return ExtractiveSummarizer()
    # the LLM modules only when asked for (each imports its SDK on its first call)
    from .summarizing.factory import make_summarizer
    from .summarizing.fallback import FallbackSummarizer

    return FallbackSummarizer(make_summarizer(args.summarizer, args.summary_model))


def cmd_fidelity(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Token fidelity, cache estimate accuracy and compaction prediction over many files."""
    from .results.evaluation import cache_accuracy, compaction_accuracy, fidelity, pooled_errors
    from .results.usage_fidelity import forecast_fidelity, usage_fidelity

    try:
        share = check_usage_until(args.forecast) if args.forecast is not None else None
    except ValueError as exc:
        print(f"error: --forecast: {exc}", file=err)
        return EXIT_USAGE
    sessions: list[dict[str, Any]] = []
    fid_errors: list[float] = []
    cache_diffs: list[float] = []
    miss_counts = [0, 0, 0]
    compactions: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    usable = 0
    for path in args.files:
        session = _load_quiet(path, err) if args.quiet else _load(path, err)
        if session is None:
            continue
        usable += 1
        config, preset = resolve_session_config(session)
        recorded = replay(session, config, mode="recorded", preset_name=preset)
        fid = fidelity(recorded)
        fid_errors.extend(fid["errors"])
        cache = cache_accuracy(recorded)
        cache_diffs.extend(cache["diffs"])
        for n, value in enumerate(cache["counts"]):
            miss_counts[n] += value
        if any(r["events"] for tr in recorded.threads for r in tr.requests):
            whatif = replay(session, config, mode="whatif", preset_name=preset)
            for row in compaction_accuracy(recorded, whatif)["rows"]:
                row["file"] = path
                compactions.append(row)
        rows.extend({**row, "file": path} for row in fid["threads"])
        acting = usage_fidelity(recorded)
        figures: dict[str, Any] = {
            "file": path,
            "prompt_median": acting["prompt_median"],
            "prompt_p90": acting["prompt_p90"],
            "session_read": acting["session_read"],
            "session_cost": acting["session_cost"],
        }
        if share is not None:
            early = forecast_session(session, share, TiktokenCounter())
            # the copy's own facts, the agent and its recorded window among them
            fc_config, fc_preset = resolve_session_config(early)
            predicted = replay(early, fc_config, mode="recorded", preset_name=fc_preset)
            fc = forecast_fidelity(predicted, recorded)
            figures["forecast"] = {
                "preset": fc_preset,
                "context_window": fc_config.context_window,
                "requests": len(fc["requests"]),
                "prompt_errors": sorted(abs(r["prompt"]) for r in fc["requests"]),
                "session_cost": fc["session_cost"],
            }
        sessions.append(figures)
    if usable == 0:
        return EXIT_UNUSABLE
    fid_errors.sort()
    cache_diffs.sort()
    recorded_miss, predicted_miss, found = miss_counts
    pooled = pooled_errors(fid_errors)
    overall = {
        "requests": len(fid_errors),
        "median_rel_error": pooled["median_rel_error"],
        "p90_rel_error": pooled["p90_rel_error"],
        "cache_median_read_error_share": statistics.median(cache_diffs) if cache_diffs else None,
        "cache_recorded_misses": recorded_miss,
        "cache_predicted_misses": predicted_miss,
        "cache_miss_recall": found / recorded_miss if recorded_miss else None,
        "cache_miss_precision": found / predicted_miss if predicted_miss else None,
        "auto_compactions": len(compactions),
        "auto_compactions_predicted_within_3pct": sum(
            1
            for c in compactions
            if c["predicted"] and c["rel_error"] is not None and c["rel_error"] <= 0.03
        ),
    }
    overall.update(_acting_overall(sessions, share))
    if args.json:
        json.dump(
            {"threads": rows, "compactions": compactions, "sessions": sessions, "overall": overall},
            out,
            indent=2,
        )
        out.write("\n")
        return EXIT_OK
    print(
        f"{'file':60} {'thread':14} {'n':>5} {'prefix':>8} {'ratio':>6} {'median':>7} {'p90':>7}",
        file=out,
    )
    for row in rows:
        name = row["file"].rsplit("/", 1)[-1][:60]
        print(
            f"{name:60} {row['thread'][:14]:14} {row['requests']:>5} {row['prefix_tokens']:>8,} "
            f"{row['ratio']:>6.3f} {_pct(row['median_rel_error']):>7} {_pct(row['p90_rel_error']):>7}",
            file=out,
        )
    print(
        f"fidelity: {overall['requests']} requests, median relative error {_pct(overall['median_rel_error'])}, "
        f"p90 {_pct(overall['p90_rel_error'])}",
        file=out,
    )
    print(
        f"cache: median |read − recorded read| {_pct(overall['cache_median_read_error_share'])} of the prompt; "
        f"misses: {recorded_miss} recorded, {predicted_miss} predicted, {found} both "
        f"(recall {_pct(overall['cache_miss_recall'])}, precision {_pct(overall['cache_miss_precision'])})",
        file=out,
    )
    for c in compactions:
        name = c["file"].rsplit("/", 1)[-1][:50]
        status = (
            f"predicted at {c['offset']:+d}, decision {c['decision_tokens']:,} ({_pct(c['rel_error'])})"
            if c["predicted"]
            else "NOT predicted"
        )
        print(
            f"compaction {name} request {c['request']}: preTokens {c['pre_tokens']:,} → {status}",
            file=out,
        )
    print(
        f"compactions: {overall['auto_compactions_predicted_within_3pct']} of {overall['auto_compactions']} "
        "recorded automatic compactions predicted within one request and 3 %",
        file=out,
    )
    print(
        f"as shown: prompt tokens median {_pct(overall['shown_prompt_median'])}; per session, "
        f"cache reads median {_pct(overall['session_read_median'])}, price-free cost median "
        f"{_pct(overall['session_cost_median'])}, worst {_pct(overall['session_cost_worst'])}",
        file=out,
    )
    if share is not None:
        print(
            f"forecast {share:g}: {overall['forecast_requests']} later requests, prompt tokens "
            f"median {_pct(overall['forecast_prompt_median'])}, p90 "
            f"{_pct(overall['forecast_prompt_p90'])}; price-free cost of them per session median "
            f"{_pct(overall['forecast_cost_median'])}, worst {_pct(overall['forecast_cost_worst'])}",
            file=out,
        )
    return EXIT_OK


def _acting_overall(sessions: list[dict[str, Any]], share: float | None) -> dict[str, Any]:
    """Pooled figures of what users act on (and of the forecast, when one ran)."""
    from .measures.tokens import percentile

    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    def absolute(key: str, items: list[dict[str, Any]]) -> list[float]:
        return [abs(s[key]) for s in items if s.get(key) is not None]

    costs = absolute("session_cost", sessions)
    out: dict[str, Any] = {
        "shown_prompt_median": median(absolute("prompt_median", sessions)),
        "session_read_median": median(absolute("session_read", sessions)),
        "session_cost_median": median(costs),
        "session_cost_worst": max(costs, default=None),
    }
    if share is not None:
        forecasts = [s["forecast"] for s in sessions]
        errors = sorted(e for f in forecasts for e in f["prompt_errors"])
        fc_costs = absolute("session_cost", forecasts)
        out.update(
            {
                "forecast_usage_until": share,
                "forecast_requests": len(errors),
                "forecast_prompt_median": median(errors),
                "forecast_prompt_p90": percentile(errors, 0.9) if errors else None,
                "forecast_cost_median": median(fc_costs),
                "forecast_cost_worst": max(fc_costs, default=None),
            }
        )
    return out


def _load_quiet(path: str, err: TextIO) -> Session | None:
    try:
        return load_session(path)
    except (TranscriptError, OSError) as exc:
        print(f"error: {path}: {exc}", file=err)
        return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextlab",
        description="Replay Claude Code's context pipeline on session transcripts.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    rp = sub.add_parser("replay", help="replay one transcript request by request")
    rp.add_argument(
        "file", help=".jsonl, .jsonl.gz, .jsonl.zst, or .zip/.tar.gz of a session folder"
    )
    rp.add_argument("--mode", choices=MODES, default="recorded")
    group = rp.add_mutually_exclusive_group()
    group.add_argument(
        "--preset", help="preset name (default: auto, from the transcript's version)"
    )
    group.add_argument("--config", help="TOML or JSON file of PipelineConfig fields")
    rp.add_argument("--json", action="store_true", help="print the full JSON result")
    rp.add_argument(
        "--usage-until",
        metavar="F",
        default="1",
        help="forecast: read the recorded usage and compaction figures only for the first F "
        "(0 < F <= 1) of each thread's requests, rounded up, and estimate every later request "
        "(default 1: all)",
    )
    rp.add_argument(
        "--summarizer",
        choices=SUMMARIZER_NAMES,
        default="extractive",
        help="who writes what-if summaries: extractive (offline, default), anthropic "
        "(ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL) or openai (any OpenAI-compatible server: "
        "OPENAI_BASE_URL, OPENAI_API_KEY)",
    )
    rp.add_argument(
        "--summary-model",
        metavar="NAME",
        help="model for the summarizer (default: CONTEXTLAB_SUMMARY_MODEL, else the "
        "session's own model for anthropic)",
    )
    fp = sub.add_parser("fidelity", help="how close recorded-mode replay is to the recorded usage")
    fp.add_argument("files", nargs="+")
    fp.add_argument("--json", action="store_true")
    fp.add_argument("--quiet", action="store_true", help="do not list input problems")
    fp.add_argument(
        "--forecast",
        metavar="F",
        help="also replay each file reading its recorded figures for the first F (0 < F <= 1) "
        "of each thread's requests only, and measure the estimates of the later ones",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    code = _main(argv)
    if argv is None and _is_process_entry():
        _exit_now(code)
    return code


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    out, err = sys.stdout, sys.stderr
    try:
        if args.command == "replay":
            return cmd_replay(args, out, err)
        return cmd_fidelity(args, out, err)
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return 130


def _is_process_entry() -> bool:
    """True when ``main`` is the program (the console script or ``python -m``), not a call from
    other Python code, and no other thread is left that a normal exit would wait for."""
    entry = getattr(sys.modules.get("__main__"), "main", None)
    threading = sys.modules.get("threading")  # never imported: no thread was started
    return entry is main and (threading is None or threading.active_count() == 1)


def _exit_now(code: int) -> NoReturn:
    """Exit without the interpreter's teardown.

    Freeing the tokenizer (100k ranks in a dict and in tiktoken's Rust tables), the parsed
    session and every module takes tens of milliseconds, more than a small replay itself. The
    output is flushed and the atexit handlers run first, so nothing is lost.
    """
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe: the output has nowhere to go anyway
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
