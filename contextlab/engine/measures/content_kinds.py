"""Content kinds: what a text is (prose, code, JSON, tool output, CJK text, encoded data), and
how many of Claude's tokens one cl100k token of it stands for.

The display count is tiktoken cl100k, calibrated per thread against the recorded prompt
(``tokens.Calibration``). One ratio per thread cannot follow a session whose content moves
between kinds: Claude's tokenizer and cl100k disagree more on some (JSON escapes, Korean) than
on others (English prose). So every counted text is classified once, cheaply, and its cl100k
count scaled by its kind's ratio (``data/token_kinds.toml``, fitted on the corpus by
``bench/fit_token_kinds.py``); the per-thread calibration stays on top and takes up the level.

The classifier reads a sample of at most ``SAMPLE_CHARS`` characters (the start and the
middle of a long text) with a few regular expressions: its cost does not grow with the text.
"""

from __future__ import annotations

import re
import string
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from types import MappingProxyType

#: kind → words a user reads (the request page, the glossary)
KIND_LABELS: Mapping[str, str] = MappingProxyType(
    {
        "prose": "prose",
        "code": "code",
        "json": "JSON",
        "output": "tool output and logs",
        "cjk": "Chinese, Japanese or Korean text",
        "encoded": "encoded data (base64)",
        "image": "images",
    }
)
#: images and documents: counted at a flat estimate, not classified nor fitted
IMAGE_KIND = "image"
#: the kinds a text is classified as, each with a fitted ratio
KINDS: tuple[str, ...] = tuple(k for k in KIND_LABELS if k != IMAGE_KIND)
#: the longest stretch of a text the classifier reads (half from the start, half mid-text)
SAMPLE_CHARS = 1200
#: below this many non-space characters a text is too short to tell: prose
MIN_SIGNAL_CHARS = 24
#: ASCII texts shorter than this are prose without a look (a few tokens whatever their kind;
#: a short CJK text is not: a character is a token or more)
MIN_TEXT_CHARS = 64

DIGITS = string.digits
_CJK = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]"
)
_ENCODED_RUN = re.compile(r"[A-Za-z0-9+/]{64,}={0,2}")
#: a tool call as the transcript writes it (``Name{"…``) or a JSON document
_JSON_START = re.compile(r'\s*(?:[A-Za-z_][\w.:-]*)?[{\[]\s*["{\[\]}]')
_JSON_KEY = re.compile(r'"[^"\n]{1,60}"\s*:')
#: a line of ``Read`` output (``   12→``) or of a diff
_CODE_LINE = re.compile(r"^(?:\s*\d+→|[+-](?![+-]{2})|@@ )", re.MULTILINE)
_DIFF_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", re.MULTILINE)
_CODE_SYMBOL = re.compile(r"[{}()\[\];=<>&|]")
_CODE_WORD = re.compile(
    r"\b(?:def|return|import|func|function|const|let|var|class|if|else|for|while|end|fn|"
    r"pub|struct|impl|package|from|self|this|async|await|defmodule|do)\b"
)
_NON_ASCII_LETTERS = re.compile(r"[^\W\d_A-Za-z]")
_SENTENCE_WORD = re.compile(r"(?<![/\\.\w-])[A-Za-z][a-z]{1,14}[,.;:!?]?(?= )")
_DROP_ASCII_LETTERS = str.maketrans("", "", string.ascii_letters)


def _count(text: str, chars: str) -> int:
    """How many characters of ``text`` are among ``chars`` (one C-level scan per char)."""
    return sum(map(text.count, chars))


def sample(text: str) -> str:
    """At most ``SAMPLE_CHARS`` of ``text``: all of it, or its start and its middle."""
    if len(text) <= SAMPLE_CHARS:
        return text
    half = SAMPLE_CHARS // 2
    middle = len(text) // 2
    return text[:half] + "\n" + text[middle : middle + half]


def classify(text: str) -> str:
    """The content kind of ``text`` (one of ``KINDS``)."""
    if len(text) < MIN_TEXT_CHARS and text.isascii():
        return "prose"
    return _classify_sample(sample(text))


# a replay counts the same texts again (thinking, restored outputs): their kind is remembered,
# by the sample it is read from (remembering whole texts kept thousands of them alive, a
# second copy of each where a block holds its text compact)
@lru_cache(maxsize=8192)
def _classify_sample(part: str) -> str:
    ascii_only = part.isascii()
    signal = len(part) - _count(part, " \n\t\r")
    if signal < MIN_SIGNAL_CHARS:
        return "prose"
    if not ascii_only and len(_CJK.findall(part)) >= 0.15 * signal:
        return "cjk"
    # a run of base64 holds digits and few slashes (a long path is words between slashes)
    encoded = sum(
        len(m)
        for m in _ENCODED_RUN.findall(part)
        if m.count("/") * 24 < len(m) and _count(m, DIGITS) * 40 > len(m)
    )
    if encoded >= 0.5 * signal:
        return "encoded"
    if _JSON_START.match(part) and _JSON_KEY.search(part):
        return "json"
    lines = part.count("\n") + 1
    if (len(_CODE_LINE.findall(part)) >= 0.5 * lines and lines >= 3) or _DIFF_HUNK.search(part):
        return "code"
    symbols = _count(part, "{}()[];=<>&|")
    digits = _count(part, DIGITS)
    # the sentence words (the dearest scan) are counted only where a test below reads them
    words = -1
    if symbols >= 0.04 * signal:
        words = len(_SENTENCE_WORD.findall(part))
        if words < 0.12 * signal and len(_CODE_WORD.findall(part)) >= 2:
            return "code"
    # prose: mostly words in sentences; tool output: paths, numbers, columns, few sentences
    if digits < 0.1 * signal:
        if words < 0:
            words = len(_SENTENCE_WORD.findall(part))
        if words * 6 >= 0.45 * signal:
            return "prose"
    letters = len(part) - len(part.translate(_DROP_ASCII_LETTERS))
    if not ascii_only:
        letters += len(_NON_ASCII_LETTERS.findall(part))
    if letters < 0.6 * signal or digits >= 0.1 * signal or lines >= 4:
        return "output"
    return "prose"


@dataclass(frozen=True, slots=True)
class KindRatios:
    """Claude tokens per cl100k token, per content kind (1.0 for a kind not listed)."""

    ratios: Mapping[str, float]
    #: where the ratios came from, for the result JSON and the docs
    source: str = "default"

    def of(self, kind: str) -> float:
        return self.ratios.get(kind, 1.0)

    def scale(self, text: str, tokens: int) -> int:
        """``tokens`` cl100k tokens of ``text``, in this table's units."""
        if not tokens or not self.ratios:
            return tokens
        ratio = self.ratios.get(classify(text), 1.0)
        return tokens if ratio == 1.0 else max(1, round(tokens * ratio))


#: every kind at 1.0: plain cl100k counts
PLAIN = KindRatios({}, "plain")


@lru_cache(maxsize=1)
def fitted_table() -> dict[str, object]:
    """``data/token_kinds.toml`` as read (the ratios and how they were fitted)."""
    data = resources.files("contextlab.engine.measures").joinpath("data/token_kinds.toml")
    return tomllib.loads(data.read_text(encoding="utf-8"))


def _ratios(section: object, source: str) -> KindRatios:
    if not isinstance(section, dict):
        raise ValueError(f"token_kinds.toml: [{source}] is not a table")
    # a plain dict: a replay's checkpoint pickles the counter, and a mapping proxy does not pickle
    ratios = {str(k): float(v) for k, v in section.items() if k in KIND_LABELS}
    return KindRatios(ratios, source)


@lru_cache(maxsize=1)
def fitted_ratios() -> KindRatios:
    """The ratios fitted on the whole corpus: what every replay counts with."""
    return _ratios(fitted_table().get("ratios"), "ratios")


def held_out_ratios(source: str) -> KindRatios:
    """The ratios fitted on every corpus source but ``source`` (leave-one-source-out; the
    whole corpus's when ``source`` was not in it)."""
    held = fitted_table().get("held_out")
    if isinstance(held, dict) and source in held:
        return _ratios(held[source], f"held_out.{source}")
    return fitted_ratios()
