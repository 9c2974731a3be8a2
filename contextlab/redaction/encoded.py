"""Secrets hidden in Base64: a Kubernetes Secret's ``data:``, a Docker ``auth``, an HTTP Basic
credential, an ``.npmrc`` ``_password``. A run of Base64 that decodes to text holding a secret
(or to ``user:password``) is itself a secret."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

CATEGORY = "base64-secret"
#: padded or not; shorter runs decode to too little to judge (12 bytes: "user:password" is
#: longer), longer ones are data (images)
CANDIDATE = re.compile(r"[A-Za-z0-9+/_-]{16,1024}={0,2}")
#: decoded "user:password" (a Basic or Docker credential)
USER_PASSWORD = re.compile(r"[A-Za-z][\w.@+-]{0,127}:[^\s]{6,256}")
_DIGIT = re.compile(r"\d")
_PRINTABLE = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}


@dataclass(frozen=True)
class Hit:
    start: int
    end: int
    category: str


def _decode(run: str) -> str | None:
    padded = run + "=" * (-len(run) % 4)
    try:
        if "-" in run or "_" in run:
            raw = base64.urlsafe_b64decode(padded)
        else:
            raw = base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) < 6 or any(byte not in _PRINTABLE for byte in raw):
        return None
    return raw.decode("ascii")


def hits(text: str, secret_in: Callable[[str], bool]) -> Iterator[Hit]:
    """Base64 runs whose decoded text holds a secret (``secret_in(decoded)``) or is
    ``user:password``; a run that is a word or an identifier never decodes to printable text
    of this length, so the check costs little."""
    for match in CANDIDATE.finditer(text):
        run = match.group(0)
        core = run.rstrip("=")
        # Base64 of text has mixed case and, almost always, a digit or padding; names, words,
        # hex digests and numbers are skipped before decoding
        if core.islower() or core.isupper() or not (run[-1] == "=" or _DIGIT.search(core)):
            continue
        if len(core) % 4 == 1:
            continue  # not Base64
        decoded = _decode(core)
        if decoded is None:
            continue
        if USER_PASSWORD.fullmatch(decoded) or secret_in(decoded):
            yield Hit(match.start(), match.end(), CATEGORY)
