"""Content kinds: the classifier, the fitted ratios and the counter that applies them."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest

from contextlab.engine.measures import content_kinds
from contextlab.engine.measures.content_kinds import (
    KIND_LABELS,
    KINDS,
    PLAIN,
    SAMPLE_CHARS,
    KindRatios,
    classify,
    fitted_ratios,
    held_out_ratios,
    sample,
)
from contextlab.engine.measures.tokenized import _ReportingCounter
from contextlab.engine.measures.tokens import COUNT_CHUNK_CHARS, TiktokenCounter

DATA = Path(content_kinds.__file__).parent / "data" / "token_kinds.toml"

PROSE = (
    "I can see the structure now. The function on line 778 captures the state locally, and "
    "the next one creates the commit. I'll remove the commit creation and keep the state."
)
CODE = "\n".join(
    f"{n:>6}→{line}"
    for n, line in enumerate(
        ["package session", "", "import (", '\t"context"', '\t"fmt"', ")", "", "func f() {}"],
        start=1,
    )
)
DIFF = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a = 1\n+a = 2\n b = 3\n"
TOOL_CALL = 'Read{"file_path":"/Users/someone/project/src/main.go","offset":200,"limit":100}'
JSON_DOC = '{\n  "name": "contextlab",\n  "version": "1.0.0",\n  "private": true\n}'
LISTING = (
    "total 456\n"
    "drwxr-xr-x@ 30 user  staff     960 Aug 13 19:34 .\n"
    "drwxr-xr-x  42 user  staff    1344 Aug 13 12:55 ..\n"
    "-rw-r--r--@  1 user  staff    2048 Aug 13 17:01 README.md\n"
)
JAPANESE = (
    "ワイルドカードパターンで含むパスも正しくマッチしました。テストのハンドラーを修正します。"
)
KOREAN = "18/18 UUID 전부 현재 DB에 존재. 기존 누락 없음 — 설계 변경 불필요. 이제 구현합니다."
BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg"
    * 4
)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (PROSE, "prose"),
        (CODE, "code"),
        (DIFF, "code"),
        (TOOL_CALL, "json"),
        (JSON_DOC, "json"),
        (LISTING, "output"),
        (JAPANESE, "cjk"),
        (KOREAN, "cjk"),
        (BASE64, "encoded"),
        ("", "prose"),
        ("ok", "prose"),
    ],
)
def test_each_kind_is_recognised(text, kind):
    assert classify(text) == kind


def test_a_long_path_is_not_encoded_data():
    path = "/Users/someone/Projects/a-long-project-name/src/some_package/subpackage/module.py"
    assert classify(f"The file {path} has been updated successfully.") != "encoded"


def test_a_long_text_is_classified_on_a_bounded_sample():
    text = PROSE * 1000 + CODE * 1000
    part = sample(text)
    assert len(part) <= SAMPLE_CHARS + 1
    assert part.startswith(PROSE[:100])
    assert classify(text) == classify(part)


def test_every_kind_has_words_for_the_pages():
    assert set(KINDS) < set(KIND_LABELS)
    assert all(KIND_LABELS[k] and "_" not in KIND_LABELS[k] for k in KIND_LABELS)


def test_the_fitted_table_has_a_positive_ratio_per_kind_and_per_held_out_source():
    table = tomllib.loads(DATA.read_text(encoding="utf-8"))
    assert set(table["ratios"]) == set(KINDS)
    tables = [table["ratios"], *table.get("held_out", {}).values()]
    for ratios in tables:
        assert all(0.3 < ratios[k] < 3 for k in KINDS), ratios
    fitted = fitted_ratios()
    assert all(math.isclose(fitted.of(k), table["ratios"][k]) for k in KINDS)
    for source, ratios in table.get("held_out", {}).items():
        assert held_out_ratios(source).of("code") == ratios["code"]
    assert held_out_ratios("no such source") is fitted


def test_the_table_says_how_it_was_fitted():
    text = DATA.read_text(encoding="utf-8")
    assert "bench/fit_token_kinds.py" in text


def test_a_kind_ratio_scales_the_count_of_its_texts_only():
    ratios = KindRatios({"code": 2.0, "prose": 1.0})
    plain = TiktokenCounter(PLAIN)
    counter = TiktokenCounter(ratios)
    assert counter.count(CODE) == round(2.0 * plain.count(CODE))
    assert counter.count(PROSE) == plain.count(PROSE)
    assert counter.count("") == 0
    # a kind the table does not list counts plain
    assert counter.count(LISTING) == plain.count(LISTING)


def test_a_long_text_counts_the_same_with_progress_reports():
    text = (CODE + "\n") * (2 * COUNT_CHUNK_CHARS // len(CODE))
    counter = TiktokenCounter(KindRatios({"code": 1.5}))
    heard: list[int] = []
    reporting = _ReportingCounter(counter, len(text), lambda done, total: heard.append(done))
    assert reporting.count(text) == counter.count(text)
    assert len(heard) >= 2  # counted piece by piece, each heard


def test_the_counter_keeps_its_ratios_when_pickled():
    import pickle

    counter = TiktokenCounter(KindRatios({"code": 2.0}, "test"))
    again = pickle.loads(pickle.dumps(counter))
    assert again.kind_ratios.source == "test"
    assert again.count(CODE) == counter.count(CODE)
    # the fitted table too (a replay's checkpoint pickles the counter it counts with)
    fitted = pickle.loads(pickle.dumps(TiktokenCounter()))
    assert fitted.kind_ratios == fitted_ratios()
    assert fitted.count(CODE) == TiktokenCounter().count(CODE)
