"""Find and redact secrets and personal data in texts before they leave the server.

Two sources of rules:

* detect-secrets' regex plugins (a maintained catalogue: AWS, GitHub, GitLab, Slack, Stripe,
  JWT, private keys, npm, PyPI, SendGrid, Twilio, Telegram, Discord, …), run through
  ``_PLUGINS`` with a cheap prefilter each, on bounded windows: some of their patterns
  backtrack badly on long lines (an earlier attempt hung on a 4 MB transcript);
* our own rules (``OWN_RULES``) for what matters most in coding-agent transcripts:
  Anthropic/OpenAI keys, ``KEY=``/``TOKEN=``/``SECRET=``/``PASSWORD=`` assignments,
  ``user:password@`` URLs, high-entropy tokens, home directories and e-mail addresses.

A finding carries its category, where it is (the caller's location label) and a masked hint,
never the value. ``redact`` replaces each dropped category's spans with
``[REDACTED:<category>]`` (home directories become ``~``).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector

#: detect-secrets plugins run on windows of at most this many characters (lines longer than
#: that are cut with an overlap), so a pattern that backtracks stays bounded
WINDOW = 4096
OVERLAP = 256
HOME = "home-path"


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    category: str
    priority: int


@dataclass(frozen=True)
class Finding:
    category: str
    #: where the text is, as the caller labels it (e.g. "request 3 · message 12, block 0")
    location: str
    #: a masked hint (prefix and length), never the value
    hint: str


@dataclass(frozen=True)
class Rule:
    """One of our patterns. Every pattern starts with a literal, which Python's ``re`` finds
    with a fast substring search; boundary checks that would need a leading look-behind (and
    make the search crawl character by character) are done on each match instead."""

    category: str
    pattern: re.Pattern[str]
    #: the character before the match must not be one of these
    not_after: str = ""
    #: substrings one of which a text must contain for the rule to run (a fast pre-check)
    needs: tuple[str, ...] = ()


def _rule(category: str, pattern: str, not_after: str = "", needs: tuple[str, ...] = ()) -> Rule:
    return Rule(category, re.compile(pattern), not_after, needs)


_TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"

#: Our rules, in priority order (an earlier rule wins an overlap). A rule with a group named
#: ``secret`` redacts only that group.
OWN_RULES: tuple[Rule, ...] = (
    _rule(
        "private-key",
        r"-----BEGIN[A-Z0-9 ]{0,30} PRIVATE KEY(?: BLOCK)?-----[\s\S]{0,12000}?"
        r"(?:-----END[A-Z0-9 ]{0,30} PRIVATE KEY(?: BLOCK)?-----|\Z)",
        needs=("PRIVATE KEY",),
    ),
    _rule("anthropic-key", r"sk-ant-[A-Za-z0-9_\-]{16,}", _TOKEN_CHARS, ("sk-ant-",)),
    _rule("openai-key", r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}", _TOKEN_CHARS),
    _rule("github-token", r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,}", _TOKEN_CHARS),
    _rule(
        "aws-access-key",
        r"A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[A-Z0-9]{16}(?![A-Z0-9])",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    ),
    _rule("slack-token", r"xox[abposr]-[A-Za-z0-9-]{10,}", needs=("xox",)),
    _rule(
        "slack-webhook",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]{20,}",
        needs=("hooks.slack.com",),
    ),
    _rule(
        "stripe-key",
        r"k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{20,}",
        needs=("k_live_", "k_test_", "whsec_"),
    ),
    _rule("jwt", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", needs=("eyJ",)),
    _rule(
        "url-credentials",
        r"://(?P<secret>[^\s:/@\"'<>\\]{1,100}:[^\s@/\"'<>\\]{1,200})@",
    ),
    _rule(
        "secret-assignment",
        # an upper-case env-style name ending in KEY, TOKEN, SECRET, PASSWORD … given a literal
        # value (quoted or bare); references (os.environ, $VAR, ${…}, <…>) are not secrets
        # (quotes may come JSON-escaped: the tool inputs of a transcript are JSON text)
        r"(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|CREDENTIALS?)[A-Z0-9_]{0,30}(?:\\?[\"'])?"
        r"\s{0,3}(?::=|=|:)\s{0,3}(?:\\?[\"'])?"
        r"(?P<secret>(?![$<{(\[*/+-]|\\[unrt]|os\.|process\.|env\.|true\b|false\b|null\b|None\b)"
        r"[^\s\"',;()}\]\\\x00-\x1f]{6,300})",
        "abcdefghijklmnopqrstuvwxyz",
    ),
    _rule(HOME, r"/(?:Users|home)/(?!Shared\b|runner\b)[A-Za-z0-9._-]{1,64}"),
    _rule(HOME, r"\\{1,2}Users\\{1,2}(?!Public\b)[A-Za-z0-9._-]{1,64}", needs=("Users\\",)),
)

#: e-mail addresses are found from their "@" (a literal), the local part read leftwards
EMAIL_DOMAIN = re.compile(
    r"@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,5}\.[A-Za-z]{2,24}(?![\w-])"
)
EMAIL_LOCAL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-")
#: Not personal: addresses every Claude Code transcript contains (commit trailers, git remotes)
#: and documentation domains.
EMAIL_ALLOWED = re.compile(
    r"(?i)^(?:noreply@anthropic\.com|git@[\w.-]+|[^@]+@(?:example\.(?:com|org|net)|test\.com|users\.noreply\.github\.com))$"
)
#: a secret-assignment "value" that is code, not a secret: a bare dotted name, a CONSTANT,
#: a number or a lower-case word
ASSIGNMENT_CODE = re.compile(
    r"[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_0-9]*)+|[A-Z_]+|[\d_.]+|[a-z_]+"
    r"|.*(?:xxxx|XXXX|\.\.\.|REDACTED|<[a-z_-]+>|your[-_]).*"
)

#: high-entropy candidates: maximal base64/url-safe runs, judged by ``_high_entropy``
ENTROPY_CANDIDATE = re.compile(r"[A-Za-z0-9+/=_-]{24,}")
ENTROPY_MIN = 4.3
#: longer runs are data (images, archives), not credentials
ENTROPY_MAX_LEN = 256
#: ids the Anthropic API and Claude Code mint: random, public within a transcript, not secrets
PUBLIC_IDS = re.compile(r"(?:agent_)?(?:toolu|srvtoolu|msg|req|call|file|chatcmpl)_[A-Za-z0-9]+")
_MIXED = re.compile(r"(?=[^0-9]*[0-9])(?=[^A-Z]*[A-Z])(?=[^a-z]*[a-z])")
_VOWELS = frozenset("aeiouAEIOU")
_WORD_SPLIT = re.compile(r"[/_\-.=+]")

#: detect-secrets plugins we do not use: IP addresses are not secrets; the keyword and entropy
#: plugins are replaced by OWN_RULES' assignment rule and ``_high_entropy``
SKIPPED_PLUGINS = {"Public IP (ipv4)", "Secret Keyword"}


@dataclass(frozen=True)
class Trigger:
    pattern: re.Pattern[str]
    #: run on the lower-cased text (a literal search there is much faster than IGNORECASE)
    lowered: bool = False


def _t(*patterns: str) -> tuple[Trigger, ...]:
    return tuple(Trigger(re.compile(p)) for p in patterns)


def _lower(*patterns: str) -> tuple[Trigger, ...]:
    return tuple(Trigger(re.compile(p), lowered=True) for p in patterns)


#: Where a plugin can match: literal-led patterns found in one fast pass over the text. A
#: plugin runs only on a window around each place one of its triggers matched, so its own
#: patterns (some of which backtrack on long lines) only ever see short texts.
PLUGIN_TRIGGERS: dict[str, tuple[Trigger, ...]] = {
    "Artifactory Credentials": _t(r"AKC", r"AP[0-9A-F]"),
    "AWS Access Key": _t(r"A(?:KIA|SIA|BIA|CCA|3T)") + _lower(r"aws"),
    "Azure Storage Account access key": _t(r"AccountKey="),
    "Basic Auth Credentials": _t(r"://[^\s/@]{1,100}@"),
    "Cloudant Credentials": _lower(r"cl(?:oudant|ou)?[_-]?(?:api)?(?:key|pw|pass|token)"),
    "Discord Bot Token": _t(r"\.[a-zA-Z0-9_-]{6}\.[a-zA-Z0-9_-]{27}"),
    "GitHub Token": _t(r"gh[pousr]_"),
    "GitLab Token": _t(r"gl[a-z]{2,7}-", r"GR1348941"),
    "IBM Cloud IAM Key": _lower(r"ibm", r"iam"),
    "IBM COS HMAC Credentials": _lower(r"secret[-_]?(?:access)?[-_]?key"),
    "JSON Web Token": _t(r"eyJ"),
    "Mailchimp Access Key": _t(r"-us[0-9]"),
    "NPM tokens": _t(r"_authToken"),
    "OpenAI Token": _t(r"T3BlbkFJ"),
    "Private Key": _t(r"PRIVATE KEY", r"PuTTY"),
    "PyPI Token": _t(r"pypi-"),
    "SendGrid API Key": _t(r"SG\."),
    "Slack Token": _t(r"xox", r"hooks\.slack"),
    "SoftLayer Credentials": _lower(r"softlayer", r"sl[_-]?(?:api)?[_-]?(?:key|pwd|pass|token)"),
    "Square OAuth Secret": _t(r"sq0csp-"),
    "Stripe Access Key": _t(r"k_live_"),
    "Telegram Bot Token": _t(r":[0-9A-Za-z_-]{35}"),
    "Twilio API Key": _t(r"AC[a-z0-9]{32}", r"SK[a-z0-9]{32}"),
}
#: a plugin's window: this much text before and after a trigger (within its line)
BEFORE, AFTER = 200, 600
#: detect-secrets' secret types under the names our own rules use
PLUGIN_CATEGORY = {
    "AWS Access Key": "aws-access-key",
    "Basic Auth Credentials": "url-credentials",
    "GitHub Token": "github-token",
    "JSON Web Token": "jwt",
    "OpenAI Token": "openai-key",
    "Private Key": "private-key",
    "Slack Token": "slack-token",
    "Stripe Access Key": "stripe-key",
}


def _slug(secret_type: str) -> str:
    return PLUGIN_CATEGORY.get(secret_type) or re.sub(
        r"[^a-z0-9]+", "-", secret_type.lower()
    ).strip("-")


@lru_cache(maxsize=1)
def _plugins() -> tuple[tuple[str, tuple[Trigger, ...], tuple[re.Pattern[str], ...]], ...]:
    """(category, triggers, patterns) of every detect-secrets regex plugin we use.

    A plugin this module has no triggers for (a new detect-secrets release) runs on every
    window of the text: slower, never skipped."""
    out = []
    mapping: dict[str, type[Any]] = get_mapping_from_secret_type_to_class()
    for secret_type, plugin_class in mapping.items():
        if secret_type in SKIPPED_PLUGINS or not issubclass(plugin_class, RegexBasedDetector):
            continue
        plugin = plugin_class()
        triggers = PLUGIN_TRIGGERS.get(secret_type, ())
        out.append((_slug(secret_type), triggers, tuple(plugin.denylist)))
    return tuple(out)


def categories() -> list[str]:
    """Every category a finding can have."""
    own = [rule.category for rule in OWN_RULES]
    return sorted({*own, "email", "high-entropy", *(category for category, _, _ in _plugins())})


def _all_windows(text: str) -> Iterator[tuple[int, int]]:
    """Overlapping (start, end) windows covering ``text``: for plugins without triggers."""
    step = WINDOW - OVERLAP
    for start in range(0, len(text), step):
        yield start, min(len(text), start + WINDOW)


def _trigger_windows(
    text: str, lowered: str, triggers: tuple[Trigger, ...]
) -> list[tuple[int, int]]:
    """Windows around every trigger match, cut at line ends, overlapping ones joined (up to
    WINDOW characters)."""
    starts: set[int] = set()
    for trigger in triggers:
        if trigger.lowered and len(lowered) == len(text):
            starts.update(m.start() for m in trigger.pattern.finditer(lowered))
        elif trigger.lowered:  # lower() changed lengths (rare scripts): search case-blind
            blind = re.compile(trigger.pattern.pattern, re.IGNORECASE)
            starts.update(m.start() for m in blind.finditer(text))
        else:
            starts.update(m.start() for m in trigger.pattern.finditer(text))
    windows: list[tuple[int, int]] = []
    for position in sorted(starts):
        line_start = text.rfind("\n", max(0, position - BEFORE), position) + 1
        start = max(line_start, position - BEFORE)
        line_end = text.find("\n", position, position + AFTER)
        end = line_end if line_end != -1 else min(len(text), position + AFTER)
        if windows and start <= windows[-1][1] and end - windows[-1][0] <= WINDOW:
            windows[-1] = (windows[-1][0], max(end, windows[-1][1]))
        else:
            windows.append((start, end))
    return windows


def _entropy(value: str) -> float:
    length = len(value)
    return -sum(c / length * math.log2(c / length) for c in Counter(value).values())


def _high_entropy(value: str) -> bool:
    """A token that looks like a random credential: mixed case and digits, not shaped like
    words (identifiers have few digits and many vowels), Shannon entropy (detect-secrets'
    measure) of at least ENTROPY_MIN bits per character."""
    if len(value) > ENTROPY_MAX_LEN or not _MIXED.match(value):
        return False
    if PUBLIC_IDS.fullmatch(value):
        return False
    # identifiers split into words are not random
    if max(len(part) for part in _WORD_SPLIT.split(value)) < 16:
        return False
    digits = sum(c.isdigit() for c in value)
    vowels = sum(c in _VOWELS for c in value) / len(value)
    if digits < 2 and vowels >= 0.2:
        return False
    return _entropy(value) >= ENTROPY_MIN


def _entropy_spans(text: str, priority: int) -> Iterator[Span]:
    """High-entropy tokens; a run with "/" (a path, a URL, base64) is judged part by part, so
    a random folder name in a path does not take the whole path with it."""
    for match in ENTROPY_CANDIDATE.finditer(text):
        run = match.group(0)
        if len(run) > ENTROPY_MAX_LEN:
            continue  # data (an image, an archive), not a credential
        if "/" not in run:
            if _high_entropy(run):
                yield Span(match.start(), match.end(), "high-entropy", priority)
            continue
        offset = match.start()
        for part in run.split("/"):
            if len(part) >= 24 and _high_entropy(part):
                yield Span(offset, offset + len(part), "high-entropy", priority)
            offset += len(part) + 1


def _own_spans(text: str) -> Iterator[Span]:
    for priority, rule in enumerate(OWN_RULES):
        if rule.needs and not any(needed in text for needed in rule.needs):
            continue
        for match in rule.pattern.finditer(text):
            start = match.start()
            if rule.not_after and start > 0 and text[start - 1] in rule.not_after:
                continue
            if "secret" in rule.pattern.groupindex:
                value = match.group("secret")
                if rule.category == "secret-assignment" and ASSIGNMENT_CODE.fullmatch(value):
                    continue
                yield Span(*match.span("secret"), rule.category, priority)
            else:
                yield Span(*match.span(), rule.category, priority)
    priority = len(OWN_RULES)
    for match in EMAIL_DOMAIN.finditer(text):
        at = match.start()
        local = at
        while local > 0 and at - local < 64 and text[local - 1] in EMAIL_LOCAL_CHARS:
            local -= 1
        if local == at:
            continue
        if EMAIL_ALLOWED.match(text[local : match.end()]):
            continue
        yield Span(local, match.end(), "email", priority)
    yield from _entropy_spans(text, priority + 1)


def _plugin_spans(text: str) -> Iterator[Span]:
    first = len(OWN_RULES) + 2
    lowered = text.lower()
    for index, (category, triggers, patterns) in enumerate(_plugins()):
        windows = _trigger_windows(text, lowered, triggers) if triggers else _all_windows(text)
        for window_start, window_end in windows:
            window = text[window_start:window_end]
            for pattern in patterns:
                for match in pattern.finditer(window):
                    start, end = match.span()
                    # the secret is group 1 where the pattern captures it (not a type prefix)
                    if match.re.groups and match.group(1) and len(match.group(1)) >= 8:
                        start, end = match.span(1)
                    value = window[start:end]
                    stripped = value.strip(" \t\r\n\"':=")
                    if not stripped:
                        continue
                    start += value.index(stripped)
                    yield Span(
                        window_start + start,
                        window_start + start + len(stripped),
                        category,
                        first + index,
                    )


def _spans(text: str) -> list[Span]:
    """Every raw span of every rule, overlaps included."""
    return [*_own_spans(text), *_plugin_spans(text)]


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


def find(text: str) -> list[Span]:
    """The secrets and personal data in ``text``, as non-overlapping spans in order."""
    if not text:
        return []
    return _merge(_spans(text))


def mask(value: str, category: str) -> str:
    """A hint that tells findings apart without revealing them: a short prefix and the length."""
    if category == HOME:
        return value.split("/")[1] if "/" in value else "Users"
    if category == "email":
        return f"e-mail ({len(value)} chars)"
    shown = value[:4] if len(value) >= 16 else ""
    return f"{shown}… ({len(value)} chars)"


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


def _strings(tree: Any, path: Path, out: list[tuple[Path, str]]) -> None:
    if isinstance(tree, str):
        out.append((path, tree))
    elif isinstance(tree, dict):
        for key, value in tree.items():
            if isinstance(key, str):
                out.append(((*path, "\x01key", key), key))
            _strings(value, (*path, key), out)
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            _strings(value, (*path, index), out)


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
                {"category": finding.category, "count": 0, "locations": [], "hints": []},
            )
            group["count"] += 1
            if (
                finding.location not in group["locations"]
                and len(group["locations"]) < max_locations
            ):
                group["locations"].append(finding.location)
            if finding.hint not in group["hints"] and len(group["hints"]) < 3:
                group["hints"].append(finding.hint)
        return sorted(groups.values(), key=lambda g: (-g["count"], g["category"]))


def redact_tree(
    tree: Any,
    keep: Collection[str] = (),
    locate: Callable[[Path], str] = lambda path: ".".join(map(str, path)),
) -> TreeRedaction:
    """Redact every string (values and keys) of a JSON-like tree in one pass.

    Returns the new tree (the input is not changed) and every finding, kept categories
    included (a kept finding is reported, not replaced)."""
    strings: list[tuple[Path, str]] = []
    _strings(tree, (), strings)
    joined = SEPARATOR.join(text for _, text in strings)
    starts: list[int] = []
    position = 0
    for _, text in strings:
        starts.append(position)
        position += len(text) + len(SEPARATOR)
    per_string: dict[int, list[Span]] = {}
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
