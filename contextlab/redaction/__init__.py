"""Find and redact secrets and personal data in texts before they leave the server.

Defence in depth, several independent detectors whose findings are merged:

* ``keywords``: a secret named by its context, in any case and any syntax: assignments in YAML,
  JSON, env files, tfvars, code, connection strings, query strings and XML; command-line flags
  (``mysql -p``, ``curl -u``, ``sshpass -p``, ``docker login -p``, ``--password``); HTTP
  ``Authorization`` headers and cookies; ``.netrc`` and ``.pgpass`` lines;
* ``catalog``: a maintained pattern database (Kingfisher's few hundred provider rules, with its
  own Base64 decoding), run over the whole text at once;
* ``patterns``: detect-secrets' regex plugins, its keyword detector and its Base64 entropy
  detector (on bounded windows), our own rules for the tokens coding agents meet most, a
  high-entropy rule, e-mail addresses and home folders;
* ``encoded``: Base64 runs whose decoded text is a secret (a Kubernetes Secret, a Docker
  ``auth``, a Basic credential).

A finding carries its category, where it is (the caller's location label) and a masked hint,
never the value. ``redact`` replaces each dropped category's spans with
``[REDACTED:<category>]`` (home folders become ``~``). ``scan_outgoing`` checks the finished
bytes of a share or an export, as a reader would decode them, before anything is published.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_right
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from contextlab.redaction import catalog, encoded, keywords, patterns
from contextlab.redaction.patterns import HOME, Span

__all__ = [
    "HOME",
    "SEPARATOR",
    "Finding",
    "Path",
    "Span",
    "TreeRedaction",
    "categories",
    "find",
    "kind_of",
    "mask",
    "mask_emails",
    "redact",
    "redact_tree",
    "replacement",
    "scan_outgoing",
    "secret_categories",
    "strings_of",
]

#: personal data: redacted by default like secrets, but never announced as one
PERSONAL = frozenset({"email"})


@dataclass(frozen=True)
class Finding:
    category: str
    #: where the text is, as the caller labels it (e.g. "request 3 · message 12, block 0")
    location: str
    #: a masked hint (prefix and length), never the value
    hint: str


@lru_cache(maxsize=1)
def categories() -> list[str]:
    """Every category a finding can have."""
    return sorted(
        {
            *patterns.categories(),
            *keywords.CATEGORIES,
            encoded.CATEGORY,
            *catalog.categories(),
        }
    )


def secret_categories() -> list[str]:
    """The categories that are secrets (not personal data, not home folders)."""
    return [c for c in categories() if c != HOME and c not in PERSONAL]


def kind_of(category: str) -> str:
    """What a category is, in the dialog's words: "secret", "personal data" or "home folder"."""
    if category == HOME:
        return "home folder"
    return "personal data" if category in PERSONAL else "secret"


def _direct_spans(text: str, lowered: str, final: bool = False) -> list[Span]:
    """Every detector but the Base64 decoding one; ``final``: those of the final scan."""
    first = len(patterns.OWN_RULES) + 10
    if final:
        spans = list(patterns.own_spans(text, shapes_only=True))
        spans += list(patterns.email_spans(text, first))
    else:
        spans = [*patterns.own_spans(text), *patterns.plugin_spans(text, lowered)]
    spans += [Span(h.start, h.end, h.category, first) for h in catalog.hits(text)]
    spans += [Span(h.start, h.end, h.category, first + 1) for h in keywords.hits(text)]
    return spans


#: what a secret's decoded text holds somewhere: a separator or a key prefix
_DECODED_HINT = re.compile(r"[:=_\-.@/]|AKIA|ASIA|AIza")


def _decoded_secret(decoded: str) -> bool:
    """Decoded Base64 that holds a secret of a known shape or a named one (the catalogue
    decodes Base64 on its own)."""
    if not _DECODED_HINT.search(decoded):
        return False  # no separator, no key prefix: nothing a shape or a name could match
    if any(span.category != HOME for span in patterns.own_spans(decoded, shapes_only=True)):
        return True
    lowered = decoded.lower()
    return any(keywords.hits(decoded)) if len(lowered) == len(decoded) else False


def _spans(text: str, final: bool = False) -> list[Span]:
    """Every raw span of every detector, overlaps included.

    JSON text (a tool call's input) writes line breaks as "\\n": the detectors read each such
    escape as a space and the break it stands for (same length, so offsets hold), so that
    "\\nkey-…" starts a word and a line, and "…key\\n" ends one, as they do for a reader. (A
    backslash left after a token hid it from a catalogue rule whose end it is not: a
    PlanetScale password before "\\n" went out whole.)"""
    original = text
    if "\\" in text:
        text = text.replace("\\n", " \n").replace("\\t", " \t").replace("\\r", " \r")
    lowered = text.lower()
    if len(lowered) != len(text):  # lower() changed lengths (rare scripts): keep offsets
        lowered = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    spans = _direct_spans(text, lowered, final)
    if not final:
        last = len(patterns.OWN_RULES) + 20
        spans += [
            Span(h.start, h.end, h.category, last) for h in encoded.hits(text, _decoded_secret)
        ]
    if text is not original:
        # a Windows home folder's name may start with n, t or r: C:\Users\tom
        spans += patterns.windows_home_spans(original)
    return spans


def _merge(spans: list[Span]) -> list[Span]:
    """Non-overlapping spans: a span inside a higher-priority one goes; partial overlaps join,
    keeping the category of the higher-priority rule."""
    merged: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end, s.priority)):
        if merged and span.start < merged[-1].end:
            last = merged[-1]
            winner = last if last.priority <= span.priority else span
            merged[-1] = Span(last.start, max(last.end, span.end), winner.category, winner.priority)
        else:
            merged.append(span)
    return merged


def find(text: str, final: bool = False) -> list[Span]:
    """The secrets and personal data in ``text``, as non-overlapping spans in order.

    ``final``: the final scan of bytes that already went through redaction, with the
    detectors that read what serializing and rendering can change (the catalogue, which also
    decodes Base64, our token shapes, the keyword, flag and header rules, e-mail addresses);
    the entropy rules and detect-secrets' plugins judge tokens that serializing leaves whole,
    and already read them in the redaction pass."""
    if not text:
        return []
    if not final and "[REDACTED:" in text:
        # our own markers are read as what they stand for, a value already hidden (same
        # length, offsets hold): text redacted once and again (a snapshot's text in an export)
        # would have rules match inside them, "AccountName=…;[REDACTED:…]" taking "REDACTED"
        # for a name, and nest markers that the final scan then refuses
        text = _MARKER.sub(lambda marker: _MARK * len(marker.group()), text)
        # a rule that takes a marker for a value (``key: [REDACTED:…]``, with the quote and
        # comma after it) finds nothing new where the rest holds no letter or digit: the
        # marker stays as it is
        return [
            span
            for span in _merge(_spans(text, final))
            if any(c.isalnum() for c in text[span.start : span.end].replace(_MARK, ""))
        ]
    return _merge(_spans(text, final))


_UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def readable(payload: str) -> str:
    """What a reader (or a script) gets from outgoing bytes: HTML entities and JSON escapes
    undone, twice (JSON inside HTML, HTML inside JSON)."""
    text = payload
    for _ in range(2):
        text = html.unescape(text)
        text = _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
        text = text.replace("\\/", "/").replace('\\"', '"')
    return text


def scan_outgoing(payload: str, keep: Collection[str] = ()) -> list[str]:
    """The categories (not kept) still found in bytes about to be published, as a reader
    decodes them (entities and escapes undone), so that a secret the rendering joined up or
    escaped is seen too."""
    # decoding only joins what escapes split, so the decoded bytes hold all the raw ones show;
    # our own markers are no secret (a rule reading "--user [REDACTED:…]" would think so)
    decoded = _MARKER.sub(_MARK, readable(payload))
    found = {
        span.category
        for span in find(decoded, final=True)
        if _MARK not in decoded[span.start : span.end]
    }
    return sorted(found - set(keep))


_MARKER = re.compile(r"\[REDACTED:[a-z0-9-]+\]")
#: what a marker becomes for the scan: a span holding it is a value already redacted
_MARK = "\u2588"


def mask(value: str, category: str) -> str:
    """A hint that tells findings apart without revealing them: a short prefix and the length."""
    if category == HOME:
        return value.split("/")[1] if "/" in value else "Users"
    if category == "email":
        return f"e-mail ({len(value)} chars)"
    shown = value[:4] if len(value) >= 16 else ""
    return f"{shown}… ({len(value)} chars)"


def mask_emails(text: str) -> str:
    """``text`` with each e-mail address shown as its first letter and top-level domain only
    (``c…@….io``): enough to tell people apart, never the address."""
    # every address, documentation domains included: a username is not documentation
    return _ANY_EMAIL.sub(lambda m: f"{m.group(1)[0]}…@….{m.group(2)}", text)


_ANY_EMAIL = re.compile(r"([^\s@]+)@[^\s@]+\.([A-Za-z]{2,24})(?![\w-])")


def replacement(category: str) -> str:
    return "~" if category == HOME else f"[REDACTED:{category}]"


def redact(text: str, keep: Collection[str] = ()) -> tuple[str, list[Span]]:
    """``text`` with every finding not in a ``keep`` category replaced; and the spans replaced."""
    spans = [span for span in find(text) if span.category not in keep]
    if not spans:
        return text, []
    out: list[str] = []
    position = 0
    for span in spans:
        out.append(text[position : span.start])
        out.append(replacement(span.category))
        position = span.end
    out.append(text[position:])
    return "".join(out), spans


# --- JSON trees (snapshots, exports) -----------------------------------------------------------

#: joins a tree's strings for one pass of ``find``; no rule matches across it (a span that
#: would is cut at it)
SEPARATOR = "\n\x00\n"

Path = tuple[str | int, ...]


def strings_of(tree: Any, path: Path, out: list[tuple[Path, str]]) -> None:
    """Every string of a JSON-like tree (values and keys, a key's path marked with
    ``"\x01key"``), with its path, appended to ``out`` in order."""
    if isinstance(tree, str):
        out.append((path, tree))
    elif isinstance(tree, dict):
        for key, value in tree.items():
            if isinstance(key, str):
                out.append(((*path, "\x01key", key), key))
            strings_of(value, (*path, key), out)
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            strings_of(value, (*path, index), out)


def _replace(tree: Any, replaced: dict[Path, str], path: Path) -> Any:
    if isinstance(tree, str):
        return replaced.get(path, tree)
    if isinstance(tree, dict):
        out = {}
        for key, value in tree.items():
            new_key = replaced.get((*path, "\x01key", key), key) if isinstance(key, str) else key
            out[new_key] = _replace(value, replaced, (*path, key))
        return out
    if isinstance(tree, list):
        return [_replace(value, replaced, (*path, i)) for i, value in enumerate(tree)]
    return tree


@dataclass
class TreeRedaction:
    tree: Any
    findings: list[Finding]

    def by_category(self, max_locations: int = 5) -> list[dict[str, Any]]:
        """[{category, count, locations, hints}] sorted by count: what a dialog shows."""
        groups: dict[str, dict[str, Any]] = {}
        for finding in self.findings:
            group = groups.setdefault(
                finding.category,
                {
                    "category": finding.category,
                    "kind": kind_of(finding.category),
                    "count": 0,
                    "locations": [],
                    "hints": [],
                },
            )
            group["count"] += 1
            if (
                finding.location not in group["locations"]
                and len(group["locations"]) < max_locations
            ):
                group["locations"].append(finding.location)
            if finding.hint not in group["hints"] and len(group["hints"]) < 3:
                group["hints"].append(finding.hint)
        # secrets first, then personal data, then home folders; the most found first
        order = {"secret": 0, "personal data": 1, "home folder": 2}
        return sorted(groups.values(), key=lambda g: (order[g["kind"]], -g["count"], g["category"]))


@lru_cache(maxsize=8192)
def _names_a_secret(key: str) -> bool:
    """A JSON key whose value is a secret ("password", "api_key"); keys repeat, hence the
    cache."""
    return bool(keywords.KEYWORD.search(key.lower())) and keywords.name_strength(key) == 2


def redact_tree(
    tree: Any,
    keep: Collection[str] = (),
    locate: Callable[[Path], str] = lambda path: ".".join(map(str, path)),
) -> TreeRedaction:
    """Redact every string (values and keys) of a JSON-like tree in one pass.

    Returns the new tree (the input is not changed) and every finding, kept categories
    included (a kept finding is reported, not replaced)."""
    strings: list[tuple[Path, str]] = []
    strings_of(tree, (), strings)
    joined = SEPARATOR.join(text for _, text in strings)
    starts: list[int] = []
    position = 0
    for _, text in strings:
        starts.append(position)
        position += len(text) + len(SEPARATOR)
    per_string: dict[int, list[Span]] = {}
    # a value whose key names a secret ({"password": "…"}, a tool call's input) is one whole
    for index, (path, text) in enumerate(strings):
        key = path[-1] if path else None
        if (
            isinstance(key, str)
            and (len(path) < 2 or path[-2] != "\x01key")
            and _names_a_secret(key)
            and keywords.is_literal(text, quoted=True)
        ):
            category = keywords.PASSWORD if keywords.is_password_name(key) else keywords.ASSIGNMENT
            per_string[index] = [Span(0, len(text), category, 0)]
    for span in find(joined):
        first = bisect_right(starts, span.start) - 1
        last = bisect_right(starts, span.end - 1) - 1
        for index in range(max(first, 0), last + 1):
            offset = starts[index]
            length = len(strings[index][1])
            start, end = max(span.start - offset, 0), min(span.end - offset, length)
            if start < end:
                per_string.setdefault(index, []).append(
                    Span(start, end, span.category, span.priority)
                )
    for index, spans in per_string.items():
        if len(spans) > 1:
            per_string[index] = _merge(spans)
    findings: list[Finding] = []
    replaced: dict[Path, str] = {}
    for index, spans in per_string.items():
        path, text = strings[index]
        location = locate(tuple(p for p in path if p != "\x01key"))
        out: list[str] = []
        cursor = 0
        for span in spans:
            findings.append(
                Finding(span.category, location, mask(text[span.start : span.end], span.category))
            )
            if span.category in keep:
                continue
            out.append(text[cursor : span.start])
            out.append(replacement(span.category))
            cursor = span.end
        out.append(text[cursor:])
        replaced[path] = "".join(out)
    return TreeRedaction(_replace(tree, replaced, ()), findings)
