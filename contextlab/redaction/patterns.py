"""Detectors with a known shape: our own rules for coding-agent transcripts, detect-secrets'
plugins (its regex catalogue, its keyword detector and its Base64 entropy detector, each run on
bounded windows), high-entropy tokens, e-mail addresses and home folders.

detect-secrets' patterns backtrack badly on long lines (an earlier attempt hung on a 4 MB
transcript), so each plugin only ever sees a short window around a literal trigger.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters import heuristic
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.keyword import KeywordDetector

from contextlab.redaction.keywords import is_literal, is_reference

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
    _rule("gitlab-token", r"gl(?:pat|rt|dt|ptt|cbt|oas)-[A-Za-z0-9_-]{16,}", _TOKEN_CHARS, ("gl",)),
    _rule("square-token", r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,43}", _TOKEN_CHARS, ("sq0",)),
    _rule("huggingface-token", r"hf_[A-Za-z]{34}(?![A-Za-z0-9])", _TOKEN_CHARS, ("hf_",)),
    _rule("databricks-token", r"dapi[a-f0-9]{32}(?:-\d)?(?![A-Za-z0-9])", _TOKEN_CHARS, ("dapi",)),
    _rule("google-oauth-secret", r"GOCSPX-[A-Za-z0-9_-]{28}", _TOKEN_CHARS, ("GOCSPX-",)),
    _rule(
        "newrelic-key",
        r"NR(?:AK|AA|II)-[A-Z0-9]{27}(?![A-Z0-9])",
        _TOKEN_CHARS,
        ("NRAK-", "NRAA-", "NRII-"),
    ),
    _rule("mailgun-key", r"key-[0-9a-f]{32}(?![0-9a-zA-Z])", _TOKEN_CHARS, ("key-",)),
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
        r"://(?P<secret>[^\s:/@\"'<>\\]{0,100}:[^\s@/\"'<>\\]{1,200})@",
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
#: a part of an identifier: a word, a short name, a number
_WORDY = re.compile(r"[A-Z]?[a-z]+|[A-Z]+|[A-Z]?[a-z]*\d{1,4}|[A-Z][a-z]+(?:[A-Z][a-z]+)+")

#: detect-secrets plugins we do not run as regex plugins: IP addresses are not secrets; the
#: keyword detector runs on its own (``_keyword_spans``: its patterns want one line each)
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
    """Every category these detectors give."""
    own = [rule.category for rule in OWN_RULES]
    plugins = [category for category, _, _ in _plugins()]
    return sorted({*own, "email", "high-entropy", "secret-keyword", *plugins})


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


def _high_entropy(value: str, split: re.Pattern[str] = _WORD_SPLIT) -> bool:
    """A token that looks like a random credential: mixed case and digits, not shaped like
    words (identifiers have few digits and many vowels), Shannon entropy (detect-secrets'
    measure) of at least ENTROPY_MIN bits per character."""
    if len(value) > ENTROPY_MAX_LEN or not _MIXED.match(value):
        return False
    if PUBLIC_IDS.fullmatch(value):
        return False
    # identifiers split into words are not random; a random token split by "-" or "_" is
    parts = [part for part in split.split(value) if part]
    if max(len(part) for part in parts) < 16:
        words = sum(1 for part in parts if _WORDY.fullmatch(part))
        if words * 2 >= len(parts):
            return False
    digits = sum(c.isdigit() for c in value)
    vowels = sum(c in _VOWELS for c in value) / len(value)
    if digits < 2 and vowels >= 0.2 and _mean_chunk(value) >= _WORD_CHUNK:
        return False  # a name of words ("renderUserSettings2"), not random letters
    return _entropy(value) >= ENTROPY_MIN


#: camel-case chunks of a name of words are this long on average; random letters, about 2.5
_WORD_CHUNK = 3.5
_CHUNK = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+|[^A-Za-z\d]+")


def _mean_chunk(value: str) -> float:
    """The mean length of ``value``'s camel-case chunks (words, capitals runs, numbers)."""
    return len(value) / max(1, len(_CHUNK.findall(value)))


#: Base64 uses "+" and "/" as letters: a random key judged whole splits only at word marks
_B64_WORD_SPLIT = re.compile(r"[_\-.=]")
#: a path's segment is a word or a name ("src", "RequestExplorer", "v2")
_PATH_SEGMENT = re.compile(r"[A-Za-z][a-z]{2,}(?:[A-Z][a-z]+)*\d{0,2}|[a-z]{1,3}\d{0,2}|")


def _entropy_spans(text: str, priority: int) -> Iterator[Span]:
    """High-entropy tokens. A run with "/" is a path, a URL or Base64: a path (most segments
    words) is judged segment by segment, so a random folder name does not take the whole path
    with it; otherwise the run is judged whole (an AWS secret key holds "/" and "+")."""
    for match in ENTROPY_CANDIDATE.finditer(text):
        run = match.group(0)
        if len(run) > ENTROPY_MAX_LEN:
            continue  # data (an image, an archive), not a credential
        if "/" not in run:
            if _high_entropy(run, _B64_WORD_SPLIT if "+" in run else _WORD_SPLIT):
                yield Span(match.start(), match.end(), "high-entropy", priority)
            continue
        # a key or a Base64 run has a "/" or two where a path has many, and words
        segments = run.split("/")
        words = sum(1 for part in segments if _PATH_SEGMENT.fullmatch(part))
        if (
            run.count("/") <= 2
            and not run.startswith("/")
            and words * 2 < len(segments)
            and _high_entropy(run, _B64_WORD_SPLIT)
        ):
            yield Span(match.start(), match.end(), "high-entropy", priority)
            continue
        offset = match.start()
        for part in segments:
            if len(part) >= 24 and _high_entropy(part):
                yield Span(offset, offset + len(part), "high-entropy", priority)
            offset += len(part) + 1


#: detect-secrets' Base64 entropy detector (quoted strings, 4.5 bits a character)
_QUOTED_ENTROPY = Base64HighEntropyString()


def _quoted_entropy_spans(text: str, priority: int) -> Iterator[Span]:
    """detect-secrets' Base64 entropy detector, with its own heuristic filters (uuids,
    sequences, ids) and ours (public API ids, data too long to be a credential)."""
    plugin = _QUOTED_ENTROPY
    for match in plugin.regex.finditer(text):
        value = match.group(2)
        if not 20 <= len(value) <= ENTROPY_MAX_LEN or PUBLIC_IDS.fullmatch(value):
            continue
        if heuristic.is_potential_uuid(value) or heuristic.is_sequential_string(value):
            continue
        if plugin.calculate_shannon_entropy(value) > plugin.entropy_limit and _MIXED.match(value):
            yield Span(match.start(2), match.end(2), "high-entropy", priority)


_KEYWORD_DETECTOR = KeywordDetector()
#: where detect-secrets' keyword detector can match (its denylist, lower-cased)
_KEYWORD_TRIGGER = re.compile(
    r"api_?key|auth_?key|service_?key|account_?key|db_?key|database_?key|priv_?key|private_?key"
    r"|client_?key|db_?pass|database_?pass|key_?pass|password|passwd|pwd|secret|contrase"
)


#: what follows a keyword before a quoted value in detect-secrets' patterns
_KEYWORD_SHAPE = re.compile(
    r"\w{0,40}[\]'\"]{0,2}\s{0,5}(?:[:=!]{1,3}>?|\.assign\(|\()\s{0,5}@?[\"'`]"
)


def _keyword_spans(text: str, lowered: str, priority: int) -> Iterator[Span]:
    """detect-secrets' keyword detector (its quoted-value patterns, as it runs them on code), on
    the line around each keyword, filtered as detect-secrets filters it (templates,
    ``$``-references, indirect references) and by our test for literals."""
    done: set[int] = set()
    for trigger in _KEYWORD_TRIGGER.finditer(lowered):
        # its patterns want a quoted value after the name: look for the quote first
        if not _KEYWORD_SHAPE.match(text, trigger.end()):
            continue
        # the name and the value after it: its patterns are quadratic in the line's length
        window_start = max(0, trigger.start() - 20)
        line_start = max(window_start, text.rfind("\n", window_start, trigger.start()) + 1)
        if line_start in done:
            continue
        done.add(line_start)
        # a line ends at a newline, written or JSON-escaped ("\\n")
        line_end = min(len(text), trigger.start() + 120)
        for end_mark in ("\n", "\\n"):
            found = text.find(end_mark, trigger.start(), line_end)
            if found != -1:
                line_end = found
        line = text[line_start:line_end]
        if heuristic.is_indirect_reference(line):
            continue
        for value in _KEYWORD_DETECTOR.analyze_string(line):
            value = value.strip()
            if (
                heuristic.is_templated_secret(value)
                or (heuristic.is_prefixed_with_dollar_sign(value) and is_reference(value))
                or not is_literal(value, quoted=True)
            ):
                continue
            at = line.find(value)
            if at != -1:
                yield Span(
                    line_start + at, line_start + at + len(value), "secret-keyword", priority
                )


def own_spans(text: str, shapes_only: bool = False) -> Iterator[Span]:
    """Our rules; ``shapes_only``: the token shapes alone (no e-mail, entropy or paths)."""
    for priority, rule in enumerate(OWN_RULES):
        if rule.needs and not any(needed in text for needed in rule.needs):
            continue
        for match in rule.pattern.finditer(text):
            start = match.start()
            if rule.not_after and start > 0 and text[start - 1] in rule.not_after:
                continue
            if "secret" in rule.pattern.groupindex:
                yield Span(*match.span("secret"), rule.category, priority)
            else:
                yield Span(*match.span(), rule.category, priority)
    if shapes_only:
        return
    priority = len(OWN_RULES)
    yield from email_spans(text, priority)
    yield from _entropy_spans(text, priority + 1)
    yield from _quoted_entropy_spans(text, priority + 1)


def windows_home_spans(text: str) -> list[Span]:
    """Windows home folders only (``C:\\Users\\<name>``), as the rules find them."""
    rule = next(r for r in OWN_RULES if r.category == HOME and r.needs)
    if not any(needed in text for needed in rule.needs):
        return []
    priority = OWN_RULES.index(rule)
    return [Span(*m.span(), HOME, priority) for m in rule.pattern.finditer(text)]


def email_spans(text: str, priority: int = 0) -> Iterator[Span]:
    """E-mail addresses, found from their "@", the local part read leftwards."""
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


def plugin_spans(text: str, lowered: str) -> Iterator[Span]:
    first = len(OWN_RULES) + 2
    yield from _keyword_spans(text, lowered, first)
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
