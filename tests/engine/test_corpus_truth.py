"""#9 checks over every corpus file, ``recent/`` included: anchors, segments and session costs.

Skipped without the corpus (``needs_corpus``); the same phenomena are unit-tested on small
synthetic transcripts in ``test_anchors.py``.
"""

from __future__ import annotations

import statistics
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from contextlab import engine
from contextlab.engine.measures.tokens import percentile
from tests.conftest import CORPUS, corpus_files, needs_corpus

pytestmark = [needs_corpus, pytest.mark.slow]

FILES = corpus_files()
#: The four 2.1.42–2.1.227 sessions added 2026-12-06 (``recent2/``): targets they miss are
#: asserted without them and again with them as strict xfails giving the figure.
BEFORE_RECENT2 = [p for p in FILES if p.relative_to(CORPUS).parts[0] != "recent2"]


@cache
def recorded(path: Path) -> dict[str, Any]:
    session = engine.load_session(str(path))
    config, preset = engine.resolve_config(
        "auto",
        version=session.version,
        max_recorded_prompt=session.max_recorded_prompt,
        recorded_auto_compactions=session.recorded_auto_compactions,
    )
    return engine.replay(session, config, mode="recorded", preset_name=preset).to_json()


def _name(path: Path) -> str:
    return path.relative_to(CORPUS).as_posix()[:60]


@pytest.mark.parametrize("path", FILES, ids=_name)
def test_anchors_stay_few_and_consistent(path):
    result = recorded(path)
    rows = [*result["requests"], *(r for s in result["subagents"] for r in s["requests"])]
    by_thread: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_thread.setdefault(row["thread"], []).append(row)
    for info in result["session"]["threads"]:
        thread_rows = sorted(by_thread.get(info["id"], []), key=lambda r: r["thread_request"])
        anchors = info["anchors"]
        # a model that needs an anchor per request does not work: at most 1 in 20, and 2
        assert len(anchors) <= max(2, len(thread_rows) // 20), (info["id"], anchors)
        assert all(a["kind"] in ("earlier_history", "segment", "unrecorded") for a in anchors)
        assert sum(a["kind"] == "earlier_history" for a in anchors) <= 1
        segments = [r["segment"] for r in thread_rows]
        assert segments == sorted(segments)
        assert info["segments"] == (max(segments) + 1 if segments else 1)
        assert all(r["unrecorded_tokens"] >= 0 for r in thread_rows)
        anchored = {a["request"] for a in anchors}
        for row in thread_rows:
            events = {e["action"] for e in row["events"] if e["step"] == "anchor"}
            assert bool(events) == (row["thread_request"] in anchored)


@pytest.mark.parametrize("path", FILES, ids=_name)
def test_session_costs_add_up(path):
    summary = recorded(path)["summary"]
    assert summary["session_cost_usd"] == pytest.approx(
        summary["cost_usd"] + summary["subagent_cost_usd"] + summary["compaction_cost_usd"],
        abs=1e-5,
    )
    assert summary["recorded_session_cost_usd"] == pytest.approx(
        summary["recorded_cost_usd"]
        + summary["recorded_subagent_cost_usd"]
        + summary["recorded_compaction_cost_usd"],
        abs=1e-5,
    )


def session_cost_errors(files: list[Path] = FILES) -> list[float]:
    errors = []
    for path in files:
        summary = recorded(path)["summary"]
        if summary["recorded_session_cost_usd"]:
            # the replay's estimate (``session_cost_usd`` is the recorded usage where recorded)
            ours = summary["estimate"]["session_cost_usd"]
            theirs = summary["recorded_session_cost_usd"]
            errors.append(abs(ours - theirs) / theirs)
    return errors


def test_recorded_mode_cost_is_within_2_percent_of_the_recorded_usage_median():
    errors = session_cost_errors()
    assert len(errors) == len(FILES)
    assert statistics.median(errors) <= 0.02


def test_no_session_cost_is_beyond_5_percent_of_the_recorded_usage():
    assert max(session_cost_errors(BEFORE_RECENT2)) <= 0.05


def test_no_session_cost_is_beyond_5_percent_of_the_recorded_usage_with_recent2():
    assert max(session_cost_errors()) <= 0.05


def _rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [*result["requests"], *(r for s in result["subagents"] for r in s["requests"])]


def check_server_side_misses_stay_few(files: list[Path]) -> None:
    total = found = 0
    for path in files:
        rows = [r for r in _rows(recorded(path)) if r["recorded"]]
        misses = [r for r in rows if r["cache_estimate"]["reason"] == "server_miss"]
        assert len(misses) <= max(3, len(rows) // 40), (path.name, len(misses), len(rows))
        for r in misses:
            # capped at what the recording read, and the model's own estimate kept beside it
            assert r["cache_estimate"]["read"] == min(
                r["recorded"]["cache_read"], r["model_tokens"]
            )
            assert r["cache_estimate"]["server_miss_tokens"] > 0
        total += len(rows)
        found += len(misses)
    assert found <= total / 50, (found, total)


def test_server_side_misses_stay_few():
    """Misses taken from the recording are events the transcript cannot explain, not a
    correction per request: at most 1 in 40 of a session's recorded requests (and 3), and
    1 in 50 over the corpus."""
    check_server_side_misses_stay_few(BEFORE_RECENT2)


def test_server_side_misses_stay_few_with_recent2():
    # recent2/repiq__24 took 6 misses from the recording in 215 requests until its resumes
    # (SessionStart:resume hook records) were read as restarts (issue #20)
    check_server_side_misses_stay_few(FILES)


@cache
def model_alone(path: Path) -> dict[str, Any]:
    session = engine.load_session(str(path))
    config, preset = engine.resolve_config(
        "auto",
        {"cache_recorded_server_misses": False},
        version=session.version,
        max_recorded_prompt=session.max_recorded_prompt,
        recorded_auto_compactions=session.recorded_auto_compactions,
    )
    return engine.replay(session, config, mode="recorded", preset_name=preset).to_json()


def test_the_cache_model_alone_differs_only_where_a_server_side_miss_was_taken():
    for path in FILES[:8]:
        with_misses = {(r["thread"], r["thread_request"]): r for r in _rows(recorded(path))}
        for r in _rows(model_alone(path)):
            other = with_misses[(r["thread"], r["thread_request"])]
            assert r["cache_estimate"]["server_miss_tokens"] == 0
            if other["cache_estimate"]["reason"] == "server_miss":
                assert r["cache_estimate"]["reason"] == "hit"
                assert (
                    r["cache_estimate"]["read"]
                    == other["cache_estimate"]["read"]
                    + other["cache_estimate"]["server_miss_tokens"]
                )


def recorded_facts_figures(files: list[Path] = FILES) -> dict[str, int]:
    """Over every recorded request of ``files``: how many show a ``cache`` other than the
    recorded usage, a ``cost_usd`` other than that usage priced, and a miss where the
    recording read at least half of the prompt from the cache (all must be 0)."""
    pricing = engine.load_pricing()
    out = {"recorded": 0, "cache_differs": 0, "cost_differs": 0, "miss_at_half_read": 0}
    for path in files:
        for r in _rows(recorded(path)):
            rec = r["recorded"]
            if not rec or not r["recorded_total"]:
                continue
            out["recorded"] += 1
            cache = r["cache"]
            w1h = rec["cache_write_1h"] or 0
            shown = (cache["read"], cache["write_5m"], cache["write_1h"], cache["uncached"])
            out["cache_differs"] += cache["source"] != "recorded" or shown != (
                rec["cache_read"],
                rec["cache_write"] - w1h,
                w1h,
                rec["input"],
            )
            price, _, _ = pricing.price_for(r["model"])
            paid = r["iteration_cost_usd"] + price.cost(
                uncached=rec["input"],
                cache_read=rec["cache_read"],
                cache_write_5m=rec["cache_write"] - w1h,
                cache_write_1h=w1h,
                output=rec["output"],
            )
            out["cost_differs"] += abs(r["cost_usd"] - paid) > 2e-6
            half_read = rec["cache_read"] >= 0.5 * r["recorded_total"]
            out["miss_at_half_read"] += half_read and (not cache["hit"] or cache["reason"] != "hit")
    return out


def test_recorded_mode_shows_the_recorded_usage_on_every_recorded_request():
    """Issue #20 item 1: every request with recorded usage, whole corpus: ``cache`` is that
    usage, ``cost_usd`` prices exactly it, and no request where the recording read at least
    half of the prompt from the cache is shown as a miss."""
    figures = recorded_facts_figures()
    assert figures["recorded"] > 1000
    assert figures == {**figures, "cache_differs": 0, "cost_differs": 0, "miss_at_half_read": 0}


@pytest.mark.parametrize("path", FILES, ids=_name)
def test_the_estimate_is_kept_beside_the_recording(path):
    for r in _rows(recorded(path)):
        est = r["cache_estimate"]
        assert est["source"] == "estimate"
        assert est["read"] + est["write"] + est["uncached"] == r["model_tokens"]
        if r["cache"]["source"] == "estimate":
            assert r["cache"] == est
            assert r["cost_usd"] == r["cost_estimate_usd"]


# ---------------------------------------------------------------- forecast (issue #20 item 4)

FORECAST_SHARE = 0.2


@cache
def forecast(path: Path) -> dict[str, Any]:
    """``forecast_fidelity`` of a ``--usage-until 0.2`` replay against a replay reading all."""
    session = engine.load_session(str(path))
    config, preset = engine.resolve_config(
        "auto",
        version=session.version,
        max_recorded_prompt=session.max_recorded_prompt,
        recorded_auto_compactions=session.recorded_auto_compactions,
    )
    full = engine.replay(session, config, mode="recorded", preset_name=preset)
    early = engine.forecast_session(session, FORECAST_SHARE, engine.TiktokenCounter())
    config, preset = engine.resolve_config(
        "auto",
        version=early.version,
        max_recorded_prompt=early.max_recorded_prompt,
        recorded_auto_compactions=early.recorded_auto_compactions,
    )
    predicted = engine.replay(early, config, mode="recorded", preset_name=preset)
    figures = dict(engine.forecast_fidelity(predicted, full))
    figures["unread_recorded"] = [
        r for tr in predicted.threads for r in tr.requests if r["recorded"] is not None
    ]
    figures["threads"] = {tr.thread.id: len(tr.requests) for tr in predicted.threads}
    return figures


@pytest.mark.parametrize("path", FILES, ids=_name)
def test_a_forecast_reads_the_first_fifth_of_each_thread_only(path):
    figures = forecast(path)
    read: dict[str, int] = {}
    for row in figures["unread_recorded"]:
        read[row["thread"]] = read.get(row["thread"], 0) + 1
    for thread, count in read.items():
        assert count <= -(-figures["threads"][thread] * FORECAST_SHARE // 1), thread


def forecast_prompt_errors() -> list[float]:
    return sorted(abs(r["prompt"]) for path in FILES for r in forecast(path)["requests"])


def forecast_costs() -> list[float]:
    return [
        abs(forecast(path)["session_cost"])
        for path in FILES
        if forecast(path)["session_cost"] is not None
    ]


def test_forecast_prompt_tokens_median_within_2_5_percent():
    # 1.79 % since a later response's thinking is sent back at the size the read responses
    # show (signature rate, or text × growth factor after snapshots); 3.76 % before
    assert statistics.median(forecast_prompt_errors()) <= 0.025


@pytest.mark.xfail(
    strict=True,
    reason="forecast --usage-until 0.2: prompt tokens p90 18.87 % (target 8 %; issue #20); worst "
    "sessions recent2/yutakobayashidev__repiq__9f 28.3 % (a restart that rebuilt a system "
    "prompt 21k smaller), recent/FSM1__cipher-box 26.0 % (24k of hook output after each "
    "compaction)",
)
def test_forecast_prompt_tokens_p90_within_8_percent():
    assert percentile(forecast_prompt_errors(), 0.9) <= 0.08


def test_forecast_price_free_cost_median_within_5_percent():
    # 3.49 % since a later output is estimated by one session-wide model (overhead, visible
    # ratio, thinking signature: replay.forecast._OutputModel); 6.69 % before
    assert statistics.median(forecast_costs()) <= 0.05


@pytest.mark.xfail(
    strict=True,
    reason="forecast --usage-until 0.2: price-free cost of the later requests, worst session "
    "20.9 % (recent2/theogbrand__napoli-matcha: two later server-side cache misses, 28 % of "
    "its later cost, unknown to the forecast; then d-kimuson 5c07 17.8 %, 15 later requests "
    "whose recorded output is a streaming snapshot in an unpredictable share; target 15 %; "
    "issue #20)",
)
def test_forecast_price_free_cost_within_15_percent_on_every_session():
    assert max(forecast_costs()) <= 0.15
