"""A maintained pattern database: Kingfisher's rule catalogue (MongoDB; the Betterleaks and
Google Veles rules, a few hundred providers), through its Python SDK, offline.

Its patterns are compiled into one Vectorscan (Hyperscan) database and run over the whole text
at once, so it adds little time; it also decodes Base64 and looks for secrets inside. Only
``Scanner.scan`` is used: never its validation or revocation, which would call providers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from contextlab import engine

#: the compiled catalogue is cached under the engine's cache folder (3 s to load, 9 s to build)
CACHE_SUBDIR = "kingfisher-rules"


@dataclass(frozen=True)
class Hit:
    start: int
    end: int
    category: str


def _cache_dir() -> str | None:
    path = os.path.join(engine.disk_cache.user_cache_dir(), CACHE_SUBDIR)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        return None
    return path


@lru_cache(maxsize=1)
def _rules() -> Any:
    """The whole catalogue ("low" confidence included: a share errs on the side of hiding)."""
    from kingfisher_sdk import Rules

    cache_dir = _cache_dir()
    return Rules(confidence="low", cache=cache_dir is not None, cache_dir=cache_dir)


@lru_cache(maxsize=1)
def _scanner() -> Any:
    from kingfisher_sdk import Scanner

    return Scanner(_rules(), base64=True)


def _slug(rule_id: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", rule_id.split(".", 1)[-1].lower()).strip("-")


@lru_cache(maxsize=1)
def categories() -> tuple[str, ...]:
    """Every category a catalogue finding can have."""
    return tuple(sorted({_slug(rule["id"]) for rule in _rules().metadata()}))


def hits(text: str) -> Iterator[Hit]:
    """Every catalogue finding in ``text``, with character offsets."""
    data = text.encode("utf-8", errors="surrogatepass")
    findings = _scanner().scan(data)
    if not findings:
        return
    ascii_only = len(data) == len(text)
    spans: list[tuple[int, int, str]] = []
    for finding in findings:
        location = finding.location
        start, end = int(location["start_offset"]), int(location["end_offset"])
        secret = finding.secret
        # the secret itself where it lies within the match (the match may include its name)
        if secret and not finding.is_base64_encoded:
            inner = data.find(secret.encode("utf-8", errors="surrogatepass"), start, end + 1)
            if inner != -1:
                start, end = inner, inner + len(secret.encode("utf-8", errors="surrogatepass"))
        spans.append((start, end, _slug(finding.rule_id)))
    if ascii_only:
        for start, end, category in spans:
            yield Hit(start, end, category)
        return
    # byte offsets to character offsets, decoding each stretch once
    marks = sorted({offset for start, end, _ in spans for offset in (start, end)})
    chars: dict[int, int] = {}
    position = characters = 0
    for mark in marks:
        characters += len(data[position:mark].decode("utf-8", errors="ignore"))
        chars[mark] = characters
        position = mark
    for start, end, category in spans:
        yield Hit(chars[start], chars[end], category)
