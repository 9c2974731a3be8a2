"""Secrets named by what stands before them: a keyword and a value.

A format-specific detector knows ``ghp_…``; nothing but context says that ``Qw8r…`` after
``password:`` is a password. These rules read that context wherever transcripts carry it:

* assignments of a secret-sounding name, in any case, quoted or bare: YAML and TOML
  (``password: …``), JSON (``"api_key": "…"``), env files and shells (``export db_password=…``,
  ``DB_PASS=…``), tfvars and code (``db_password = "…"``), connection strings
  (``Password=…;``), query strings (``?access_token=…``), XML (``<password>…``), calls
  (``define('DB_PASSWORD', '…')``) and sentences (``the password is …``);
* command-line flags that take a password (``mysql -p…``, ``curl -u user:…``,
  ``sshpass -p``, ``docker login -p``, ``--password …``, ``pass:…``, ``-U user%…``);
* HTTP headers (``Authorization: Bearer|Basic|token …``) and cookies;
* ``.netrc`` and ``.pgpass`` lines.

Values that are code, not secrets (``os.environ[…]``, ``${VAR}``, ``<token>``, ``str``, a bare
identifier, ``***``) are left alone. Each rule is found from a literal (the keyword) in one
pass over the lower-cased text, then matched at that place only, so no pattern scans a line
from every position.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

PASSWORD = "password"
ASSIGNMENT = "secret-assignment"
AUTH_HEADER = "auth-header"
COOKIE = "cookie"
CATEGORIES = (PASSWORD, ASSIGNMENT, AUTH_HEADER, COOKIE)


@dataclass(frozen=True)
class Hit:
    start: int
    end: int
    category: str


# --- names ---------------------------------------------------------------------------------

#: where a name may be: found in the lower-cased text (a literal alternation)
KEYWORD = re.compile(
    r"pass(?:word|wd|phrase)?|pwd|secret|token|api[ _-]?key|credential|private[_-]?key"
    r"|access[_-]?key|auth|pw|sig|key"
)
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
#: a name holding one of these (as letters not run on into another word) names a secret
STRONG = re.compile(
    r"(?:password|passwd|passphrase|secret|token|credential|apikey|privatekey|accesskey"
    r"|authkey|clientkey|secretkey|signingkey|masterkey|encryptionkey|accountkey|servicekey"
    r"|subscriptionkey|licensekey|consumerkey|sharedkey|keybase"
    r"|pwd)(?:id)?$|(?:secret|credential)s$"
)
#: whole parts of a name that name a secret (``DB_PASS``, ``pw``)
STRONG_PARTS = frozenset({"pass", "pw", "pwd", "passwd", "password", "secret", "token"})
#: whole parts whose value is a secret only when it looks random (``auth``, ``sig``)
WEAK_PARTS = frozenset({"auth", "sig", "key"})
#: a name ending in one of these is about a secret, not one (``token_url``, ``password_min``)
NOT_VALUE_PARTS = frozenset(
    [
        "url",
        "uri",
        "urls",
        "endpoint",
        "path",
        "file",
        "filename",
        "files",
        "dir",
        "name",
        "names",
        "type",
        "types",
        "count",
        "counts",
        "length",
        "len",
        "limit",
        "limits",
        "min",
        "max",
        "size",
        "field",
        "fields",
        "label",
        "prompt",
        "policy",
        "hint",
        "hints",
        "required",
        "expiry",
        "expires",
        "expiration",
        "expired",
        "ttl",
        "timeout",
        "format",
        "env",
        "var",
        "vars",
        "header",
        "headers",
        "param",
        "params",
        "regex",
        "pattern",
        "input",
        "inputs",
        "id_token_hint",
        "usage",
        "used",
        "budget",
        "window",
        "estimate",
        "estimator",
        "counter",
        "encoding",
        "encoder",
        "tokenizer",
        "cache",
        "store",
        "manager",
        "provider",
        "helper",
        "class",
        "service",
        "handler",
        "validator",
        "reset",
        "strength",
        "rules",
        "mode",
        "source",
        "method",
        "kind",
        "scheme",
        "prefix",
        "suffix",
    ]
)
NOT_VALUE_FIRST = frozenset(
    [
        "max",
        "min",
        "num",
        "is",
        "has",
        "use",
        "enable",
        "enabled",
        "show",
        "validate",
        "check",
        "should",
        "must",
        "can",
        "total",
        "input",
        "output",
        "cache",
        "prompt",
    ]
)


@lru_cache(maxsize=8192)
def name_strength(name: str) -> int:
    """2: names a secret; 1: names a secret when the value looks random; 0: not a secret."""
    parts = [p.lower() for p in _PARTS.findall(name)]
    if not parts or sum(c.isdigit() for c in name) >= 3:
        return 0  # no name, or an id ("msg_011CdqKVdZBBzrNKvRDw8PwK"), not a variable
    if parts[-1] in NOT_VALUE_PARTS or parts[0] in NOT_VALUE_FIRST:
        return 0
    # joined pairs catch camelCase and run-together names (apiKey, PGPASSWORD, secret_key)
    joined = "".join(parts)
    if any(part in STRONG_PARTS for part in parts):
        return 2
    for end in range(len(parts), 0, -1):
        tail = "".join(parts[max(0, end - 2) : end])
        if STRONG.search(tail) or STRONG.search(parts[end - 1]):
            return 2
    if re.search(r"(?:password|passwd|secret|credential)", joined) and not re.search(
        r"(?:password|secret)(?:less|ary|ariat)", joined
    ):
        return 2
    if parts[-1] in WEAK_PARTS:
        return 1
    return 0


def is_password_name(name: str) -> bool:
    return bool(re.search(r"(?i)pass|pwd|pw", name))


# --- values --------------------------------------------------------------------------------

#: a value stops at these (bare) — whitespace, quotes, JSON escapes, separators of lists,
#: query strings and connection strings, markup and brackets
BARE_VALUE = re.compile(r"[^\s\"'`\\;,&<>|(){}\[\]]{4,400}")
#: an opening quote, maybe JSON-escaped (``\"``) once or twice
OPEN_QUOTE = re.compile(r"(\\{0,3})([\"'`])")
#: after a name: an optional closing quote or bracket, then the separator
SEPARATOR = re.compile(
    r"(?P<close>\\{0,3}[\"'`]|\])?[ \t]{0,3}(?P<sep>:=|=>|==|=|:(?!:)|\s+(?:is|was|are)\s+|,(?=\s{0,16}\\{0,3}[\"'`]))[ \t]{0,16}"
)
#: a value that is code or a stand-in, not a literal secret
NOT_A_SECRET = re.compile(
    r"(?i)(?:\{\{|<%|<[a-z_ -]+>|os\.|process\.|env\.|ENV\[|settings\.|config\.|self\.|this\."
    r"|request\.|getenv|secrets\.|vault:|ref\+|\*{3}|x{4}|\.{3}|…|redacted|your[-_ ]|placeholder"
    r"|changeme$|example|dummy|sample|fake|test(?:ing)?$|none$|null$|nil$|true$|false$|undefined$"
    r"|yes$|no$|required$|optional$|string$|str$|bytes$|secret$|password$|token$|hidden$|masked$"
    r"|\[redacted|sha256:|bearer$|basic$|pass$|passwd$|pwd$|https?://|read$|write$"
    r"|[A-Z]?[a-z]*(?:Int|int|Float|float)\d+(?:Array)?$)"
)
#: a lower-case phrase that says it is a stand-in ("test-only-secret", "dev-key-not-for-prod")
STAND_IN = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)+")
STAND_IN_WORD = re.compile(
    r"(?:^|[-_])(?:test|tests|dev|development|example|sample|dummy|fake|placeholder|local"
    r"|changeme|production|insecure-default|my|your|foo|bar|token|secret|password|passwd|key)"
    r"(?:[-_]|$)"
)
#: bare code: names, dotted paths, hyphenated words, with no digit (a literal secret has one)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_-]*(?:[.:][A-Za-z_][A-Za-z_-]*)*(?:\(\)?)?")
DOTTED = re.compile(r"\w+(?:\.\w+)+(?:\(.*)?")
NUMBER = re.compile(r"[\d_.:-]+[a-zA-Z]{0,2}")


def _is_path(value: str) -> bool:
    """A file path (most segments lower-case names), not Base64 that starts with "/"."""
    segments = [part for part in value.split("/") if part not in ("", ".", "..", "~")]
    names = sum(1 for part in segments if re.fullmatch(r"[a-z0-9_.@-]+|[A-Za-z][a-z]+", part))
    return names * 2 >= len(segments)


def looks_random(value: str) -> bool:
    """Letters and digits mixed, long enough: a generated value rather than a word."""
    if len(value) < 12 or (DOTTED.fullmatch(value) and _wordlike(value)):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    return has_digit and has_alpha


#: punctuation a generated key holds and a reference ($NAME, ${NAME}, $(command), %NAME%) does not
_KEY_PUNCTUATION = frozenset("!#&*+,;<=>?@[]^|~")


def is_reference(value: str) -> bool:
    """A value that starts like a reference (``$NAME``, ``${NAME}``, ``$(command)``,
    ``%NAME%``), unless it is a generated key that happens to start with "$" or "%"
    (WordPress's salts draw from an alphabet with both): letters of both cases, digits and
    punctuation no reference holds."""
    if not value or value[0] not in "$%":
        return False
    generated = (
        any(c.islower() for c in value)
        and any(c.isupper() for c in value)
        and any(c.isdigit() for c in value)
        and any(c in _KEY_PUNCTUATION for c in value)
    )
    return not generated


def is_literal(value: str, quoted: bool) -> bool:
    """A value that may be a secret: not a reference, a stand-in, a type or bare code."""
    if len(value) < (4 if quoted else 6) or is_reference(value) or NOT_A_SECRET.match(value):
        return False
    if STAND_IN.fullmatch(value) and STAND_IN_WORD.search(value):
        return False
    if value[0] in "/.~" and _is_path(value):
        return False
    if not quoted and (" " in value.strip() or value[0] == "-"):
        return False  # bare: a phrase, or the next flag
    if quoted:
        # a quoted literal is data, even a word ("hunter2", "letmein"), unless it is a name
        # the code refers to (a dotted path, an env var name, a snake_case key)
        return not re.fullmatch(r"[A-Z][A-Z0-9_]{2,}|[a-z]+(?:[._/][a-z]+)+", value)
    if NUMBER.fullmatch(value):
        return False
    return not (IDENTIFIER.fullmatch(value) and _wordlike(value))


def _wordlike(value: str) -> bool:
    """Made of words (``get_token``, ``ConvertTo-SecureString``), not of random letters."""
    letters = sum(c.isalpha() for c in value)
    # words, and a leading vowel-less abbreviation of the kind code is full of (csrfToken)
    parts = _PARTS.findall(value)
    words = sum(
        len(part)
        for index, part in enumerate(parts)
        if (len(part) >= 3 and re.search(r"[aeiouyAEIOUY]", part))
        or (index == 0 and part.islower() and 3 <= len(part) <= 4)
    )
    return words >= 0.7 * letters


def _value_at(text: str, at: int) -> tuple[int, int, bool] | None:
    """The value starting at ``at``: (start, end, quoted), or None."""
    opened = OPEN_QUOTE.match(text, at)
    if opened:
        quote = opened.group(0)
        start = opened.end()
        end = text.find(quote, start, start + 500)
        newline = text.find("\n", start, start + 500)
        if end == -1 or (newline != -1 and newline < end):
            return None
        if opened.group(1) == "" and end > start and text[end - 1] == "\\":
            return None  # an escaped quote inside: not a value we can bound
        return start, end, True
    bare = BARE_VALUE.match(text, at)
    if not bare:
        return None
    return at, bare.end(), False


def _assignment(text: str, name_start: int, name_end: int) -> Hit | None:
    if text[max(0, name_start - 2) : name_start] == "${":
        return None  # a shell reference with its default: ${DB_PASSWORD:-postgres}
    sep = SEPARATOR.match(text, name_end)
    if not sep:
        return None
    name = text[name_start:name_end].strip(".-")
    strength = name_strength(name)
    if not strength:
        return None
    separator = sep.group("sep").strip()
    if separator == "==":
        return None  # a comparison
    if separator in ("is", "was", "are") and not looks_random(
        text[sep.end() : sep.end() + 60].split(" ")[0].rstrip(".,;:!)")
    ):
        return None
    if separator == "," and (
        not sep.group("close") or name_start == 0 or text[name_start - 1] not in "\"'`"
    ):
        return None  # define('NAME', 'value'): only a quoted name takes a comma
    found = _value_at(text, sep.end())
    if found is None:
        return None
    start, end, quoted = found
    value = text[start:end]
    if separator in ("is", "was", "are"):
        end = start + len(value.split(" ")[0].rstrip(".,;:!)"))
        value = text[start:end]
    if not is_literal(value, quoted):
        return None
    if strength == 1 and not looks_random(value):
        return None
    category = PASSWORD if is_password_name(name) else ASSIGNMENT
    return Hit(start, end, category)


def _xml(text: str, name_start: int, name_end: int) -> Hit | None:
    """``<password>value</password>``."""
    if name_start == 0 or text[name_start - 1] != "<" or text[name_end : name_end + 1] != ">":
        return None
    name = text[name_start:name_end]
    if name_strength(name) != 2:
        return None
    close = text.find("</", name_end + 1, name_end + 400)
    value = text[name_end + 1 : close] if close != -1 else ""
    if not is_literal(value, quoted=True):
        return None
    return Hit(name_end + 1, close, PASSWORD if is_password_name(name) else ASSIGNMENT)


_NAME_REST = re.compile(r"[A-Za-z0-9_.-]*")
#: what may follow a name: a closing quote or bracket, a separator, a tag's end
_AFTER_NAME = frozenset("\"'`\\]=:,>")
_IS_SEPARATOR = re.compile(r"[ \t]{1,3}(?:[=:]|is |was |are )")


def keyword_hits(text: str, lowered: str) -> Iterator[Hit]:
    """Values of secret-named assignments (``lowered``: ``text.lower()``, same length)."""
    seen: set[int] = set()
    for match in KEYWORD.finditer(lowered):
        start = match.start()
        rest = _NAME_REST.match(text, match.end())
        end = rest.end() if rest else match.end()
        # most keywords are words of prose ("tokens are"): a name needs a separator or a tag
        if end < len(text) and text[end] not in _AFTER_NAME and not _IS_SEPARATOR.match(text, end):
            continue
        while start > 0 and text[start - 1] in NAME_CHARS:
            if start >= 2 and text[start - 2] == "\\":
                break  # an escape ("\nDB_PASS=…" in JSON text) is not part of the name
            start -= 1
        if start in seen:
            continue
        seen.add(start)
        hit = _assignment(text, start, end) or _xml(text, start, end)
        if hit is not None:
            yield hit


# --- commands, headers, files --------------------------------------------------------------

#: a flag's value: quoted (anything up to the same quote) or bare (up to a space or a shell
#: operator); never a reference ($VAR, <placeholder>, {template}) or another flag
#: between the words of a file's lines: spaces, line breaks (escaped in JSON text) and the
#: line numbers the Read tool puts before each line
_GAP = r"(?:\s|\\|\d{1,7}\u2192)+"
_V = (
    r"(?:(?P<q>\\{0,3}[\"'])(?P<quoted>(?![$<{])[^\"'\n\\]{4,300})(?P=q)"
    r"|(?P<bare>(?![$<{`\-]|\\[nrt])[^\s\"'\\;|&<>`]{4,200}))"
)


@dataclass(frozen=True)
class Rule:
    category: str
    #: found in the lower-cased text
    trigger: re.Pattern[str]
    #: matched at the trigger's start (may run over several lines for netrc)
    pattern: re.Pattern[str]
    #: the value must look random (letters and digits), for weak contexts
    random_only: bool = False
    #: matched from the start of the trigger's line (or word), not the trigger
    from_line_start: bool = False
    #: the trigger must start a word (after a space, a quote or the line's start)
    word_start: bool = False


def _r(
    category: str,
    trigger: str,
    pattern: str,
    random_only: bool = False,
    line: bool = False,
    word: bool = False,
) -> Rule:
    return Rule(category, re.compile(trigger), re.compile(pattern), random_only, line, word)


COMMAND_RULES: tuple[Rule, ...] = (
    # mysql -pSECRET (no space: with a space, -p asks for it)
    _r(PASSWORD, r"mysql|mariadb", r"(?:mysql\w*|mariadb\w*)\b[^\n|;]{0,200}?\s-p" + _V),
    # curl -u user:SECRET, --user user:SECRET, smbclient -U user%SECRET
    _r(
        PASSWORD,
        r"curl|wget|smbclient|rpcclient|--user",
        r"(?:(?:curl|wget|smbclient|rpcclient)\b[^\n|;]{0,200}?\s)?(?:-[uU]|--user)[ =]?\s{0,3}(?P<q>\\{0,3}[\"']?)[^\s:\"'$%]{1,64}[:%]"
        r"(?P<secret>(?![$<{])[^\s\"'\\;|&<>`@]{3,200})(?P=q)",
    ),
    # sshpass -p SECRET, docker login … -p SECRET, sqlcmd -P, redis-cli -a, ldapsearch -w
    _r(PASSWORD, r"sshpass", r"sshpass\s+-p\s*" + _V),
    _r(PASSWORD, r"login", r"login\b[^\n|;]{0,200}?\s(?:-p|--password)[ =]" + _V),
    _r(PASSWORD, r"sqlcmd|bcp", r"(?:sqlcmd|bcp)\b[^\n|;]{0,200}?\s-P\s*" + _V),
    _r(PASSWORD, r"redis-cli", r"redis-cli\b[^\n|;]{0,200}?\s-a\s+" + _V),
    _r(PASSWORD, r"ldap", r"ldap\w+\b[^\n|;]{0,200}?\s-w\s+" + _V),
    # --password SECRET, --token=SECRET, -storepass SECRET (not --password-stdin)
    _r(
        PASSWORD,
        r"-(?:-?(?:store|key|src|dest|new)?pass|-(?:password|passwd|token|api-key|apikey|auth-token|access-token|client-secret))",
        r"-(?:-?(?:store|key|src|dest|new)?pass(?:word)?|-(?:password|passwd|token|api-key|apikey|auth-token|access-token|client-secret))(?:=|\s+)"
        + _V,
        word=True,
    ),
    # openssl … pass:SECRET
    _r(
        PASSWORD,
        r"pass:",
        r"pass:(?P<bare>(?![$<{`\-]|\\[nrt])[^\s\"'\\;|&<>`,()]{4,200})",
        word=True,
    ),
    # htpasswd -b[c] file user SECRET
    _r(
        PASSWORD,
        r"htpasswd",
        r"htpasswd(?:\s+-[a-zA-Z]+)*\s+-[a-zA-Z]*b[a-zA-Z]*(?:\s+-[a-zA-Z]+)*\s+\S+\s+\S+\s+" + _V,
    ),
    # ConvertTo-SecureString "SECRET" -AsPlainText
    _r(
        PASSWORD,
        r"convertto-securestring",
        r"(?i:convertto-securestring)\s+(?:-String\s+)?" + _V,
    ),
    # .netrc: machine HOST [login USER] password SECRET (across lines)
    _r(
        PASSWORD,
        r"machine",
        # (in JSON text the line breaks are "\n" escapes)
        # (in JSON text the line breaks are "\n" escapes; the Read tool numbers lines "184→")
        rf"machine{_GAP}[^\s\\]+(?:{_GAP}(?:login|account){_GAP}[^\s\\]+)*{_GAP}password\s+" + _V,
    ),
    # Authorization: Bearer|Basic|token|SSWS|Bot|Digest SECRET (headers, JSON, curl -H)
    _r(
        AUTH_HEADER,
        r"authorization",
        r"(?i:authorization)\\{0,3}[\"']?\s{0,3}[:=]\s{0,3}\\{0,3}[\"']?\s{0,3}"
        r"(?i:bearer|basic|token|ssws|bot|digest|apikey|key|sharedkey|hmac)\s+"
        r"(?P<secret>(?![$<{])[A-Za-z0-9+/=._~:-]{8,2000})",
    ),
    # a bare "Bearer SECRET" anywhere (logs, docs of one's own API)
    _r(
        AUTH_HEADER,
        r"bearer ",
        r"(?i:bearer)\s+(?P<secret>(?![$<{])[A-Za-z0-9+/=._~-]{16,2000})",
        random_only=True,
    ),
    # Cookie: name=SECRET; Set-Cookie: name=SECRET
    _r(
        COOKIE,
        r"cookie:",
        r"(?i:(?:set-)?cookie):\s*[A-Za-z0-9_.-]{1,64}=(?P<secret>[^\s;\"'\\]{12,4000})",
        random_only=True,
    ),
    # query strings: ?sig=, &key=, &code= with a random value
    _r(
        ASSIGNMENT,
        r"[?&;](?:sig|signature|key|code|auth|session|sid)=",
        r"[?&;](?:sig|signature|key|code|auth|session|sid)=(?P<secret>[^\s&#\"'\\<>]{16,2000})",
        random_only=True,
    ),
    # .pgpass: host:port:database:user:SECRET
    _r(
        PASSWORD,
        # (the port, then database and user fields: not a clock's "12:30:45")
        r":\d{1,5}:(?=[^\s:\"',]{1,64}:[^\s:\"',]{1,64}:)",
        r"[^\s:\"',]{1,253}:\d{1,5}:[^\s:\"',]{1,64}:[^\s:\"',]{1,64}:(?P<secret>[^\s\\\"',]{4,200})(?=[\s\\\"']|$)",
        line=True,
    ),
)


def _literals(trigger: re.Pattern[str]) -> tuple[str, ...] | None:
    """The words of a trigger that is an alternation of plain words (searched one by one:
    Python's search skips to a literal, not to the first of several)."""
    words = trigger.pattern.split("|")
    if all(re.fullmatch(r"[a-z-]+", word) for word in words):
        return tuple(words)
    return None


def _trigger_starts(rule: Rule, lowered: str) -> list[int]:
    words = _literals(rule.trigger)
    if words is None:
        return [m.start() for m in rule.trigger.finditer(lowered)]
    starts: list[int] = []
    for word in words:
        at = lowered.find(word)
        while at != -1:
            starts.append(at)
            at = lowered.find(word, at + 1)
    return sorted(starts)


def command_hits(text: str, lowered: str) -> Iterator[Hit]:
    # one pass per rule: each trigger starts with a literal that the search skips to, which
    # one alternation of them all would not
    for rule in COMMAND_RULES:
        for at in _trigger_starts(rule, lowered):
            if rule.word_start and at > 0 and text[at - 1] not in " \t\n\"'=":
                continue
            if rule.from_line_start:
                at = max(text.rfind("\n", 0, at), text.rfind(" ", 0, at)) + 1
            match = rule.pattern.match(text, at)
            if not match:
                continue
            group = next(g for g in ("secret", "quoted", "bare") if match.groupdict().get(g))
            value = match.group(group)
            if not is_literal(value, quoted=group == "quoted") or (
                rule.random_only and not looks_random(value)
            ):
                continue
            yield Hit(*match.span(group), rule.category)


def hits(text: str) -> Iterator[Hit]:
    lowered = text.lower()
    if len(lowered) != len(text):  # lower() changed lengths (rare scripts): keep offsets
        lowered = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    yield from keyword_hits(text, lowered)
    yield from command_hits(text, lowered)
