"""Redaction on single texts: every planted kind, raw and as JSON text (a tool call's input is
stored JSON-encoded), the kinds an independent audit found leaking, and ordinary code that must
stay as it is. Values are random on every run (``planted.SEED``, printed on failure)."""

from __future__ import annotations

import json
import random

import pytest

from contextlab import redaction
from tests.redaction import planted as p

PLANTED = p.make_planted()
WANTED = {item.kind: p.pieces([item]) for item in PLANTED}


def _leaks(text: str, kind: str) -> dict[str, str]:
    return p.find_leaks(text, WANTED[kind])


def test_the_planted_corpus_has_over_100_kinds():
    assert len(p.kinds(PLANTED)) >= 100, p.seed_note()
    # every core is long enough to be checked in 12-character pieces, or whole
    assert all(core for item in PLANTED for core in item.cores)


@pytest.mark.parametrize("item", PLANTED, ids=lambda item: item.kind)
def test_each_planted_kind_is_redacted_in_full(item):
    text = f"before\n{item.text}\nafter"
    redacted, spans = redaction.redact(text)
    assert spans, f"{item.kind} not found; {p.seed_note()}"
    assert _leaks(redacted, item.kind) == {}, f"{redacted!r}; {p.seed_note()}"
    assert redacted.startswith("before\n")
    assert redacted.endswith("\nafter")


@pytest.mark.parametrize("item", PLANTED, ids=lambda item: item.kind)
def test_each_planted_kind_is_redacted_as_json_text(item):
    """As a tool call's input reaches the snapshot: JSON text, newlines and quotes escaped."""
    text = "Bash" + json.dumps({"command": f"cd /srv && {item.text}", "timeout": 60})
    redacted, _ = redaction.redact(text)
    assert _leaks(redacted, item.kind) == {}, f"{redacted!r}; {p.seed_note()}"


@pytest.mark.parametrize("item", PLANTED, ids=lambda item: item.kind)
def test_each_planted_kind_is_redacted_between_escaped_line_breaks(item):
    """A secret on a line of its own in JSON text: "\\n" right before and right after it (a
    backslash after a token once hid a PlanetScale password from its catalogue rule)."""
    text = "Bash" + json.dumps({"command": f"cat <<EOF\nbefore\n{item.text}\nafter\nEOF"})
    redacted, _ = redaction.redact(text)
    assert _leaks(redacted, item.kind) == {}, f"{redacted!r}; {p.seed_note()}"


@pytest.mark.parametrize("item", PLANTED, ids=lambda item: item.kind)
def test_redacting_a_redacted_text_again_changes_nothing(item):
    """An export redacts a snapshot's text that was redacted when the link was made: rules
    must not match inside our markers (an Azure connection string's second pass once took
    "REDACTED" for an account name and nested markers, and the final scan refused the
    export)."""
    for text in (item.text, f"cmd {item.text}\n", "Bash" + json.dumps({"command": item.text})):
        once, _ = redaction.redact(text)
        assert redaction.redact(once)[0] == once, f"{once!r}; {p.seed_note()}"


#: the kinds the audit of main found leaking wherever they occur (issue #23)
AUDIT_KINDS = (
    "yaml-password-lower",
    "json-password",
    "env-export-lower",
    "env-db-pass",
    "tfvars-password",
    "sqlserver-connection-string",
    "azure-sql-connection-string",
    "mysql-p",
    "curl-u",
    "sshpass",
    "docker-login-p",
    "netrc",
    "authorization-bearer-hex",
    "authorization-basic",
    "x-api-key-header",
    "query-access-token",
    "mailgun-key",
    "kubernetes-secret-data",
    "gcp-service-account",
    "django-secret-key",
    "aws-credentials-file",
)


@pytest.mark.parametrize("kind", AUDIT_KINDS)
def test_the_kinds_the_audit_found_leaking_are_redacted(kind):
    (item,) = [i for i in PLANTED if i.kind == kind]
    redacted, _ = redaction.redact(item.text)
    assert _leaks(redacted, kind) == {}, f"{redacted!r}; {p.seed_note()}"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["authorization-basic", "aws-credentials-file"])
def test_random_values_of_the_partly_caught_kinds_are_all_redacted(kind):
    """The audit caught 44 % of random Basic credentials and 24 % of random AWS secret keys
    (a + or / split them into words too short for the entropy rule): 200 random draws each."""
    seeds = random.Random(p.SEED).sample(range(10**9), 200)
    missed = []
    for seed in seeds:
        (item,) = [i for i in p.make_planted(seed) if i.kind == kind]
        redacted, _ = redaction.redact(item.text)
        if p.find_leaks(redacted, p.pieces([item])):
            missed.append(seed)
    assert missed == [], f"missed with CONTEXTLAB_REDACTION_SEED in {missed[:5]}; {p.seed_note()}"


def test_a_password_as_a_tool_input_key_is_redacted_in_a_tree():
    """``{"password": "…"}`` as a tool call's input: the key names the value a secret."""
    value = PLANTED[0].cores[0][:20]
    tree = {"input": {"password": value, "db_password": value, "note": "ok"}}
    result = redaction.redact_tree(tree)
    assert value not in json.dumps(result.tree), p.seed_note()
    assert result.tree["input"]["note"] == "ok"


@pytest.mark.parametrize(
    "text",
    [
        "MAX_TOKENS = 4096",
        "API_KEY = os.environ['API_KEY']",
        "TOKEN=${GITHUB_TOKEN}",
        "SECRET_KEY = settings.SECRET_KEY",
        "PASSWORD: ***",
        "password: str",
        "password: Optional[str] = None",
        "def login(username: str, password: str) -> bool:",
        'password = request.POST["password"]',
        "if not password:",
        "token = get_token(user)",
        "api_key: string;",
        '"password": password,',
        "password: ${DB_PASSWORD}",
        'password: "{{ .Values.db.password }}"',
        "PASSWORD_MIN_LENGTH = 8",
        "echo $TOKEN | docker login --password-stdin ghcr.io",
        "Authorization: Bearer ${TOKEN}",
        "Authorization: Bearer <token>",
        'curl -u "$USER:$PASS" https://example.com',
        "mysql -u root -p app",
        "the password field is required",
        "commit 3f4e2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f",
        "uuid 8463c716-a2ea-4c14-9efa-87158ebd9f20",
        "toolu_01VFMPi4pKheFn9Ht7yq7cux and msg_017zQdGyW3BA1JyDjZwfD3H1",
        "Co-Authored-By: Claude <noreply@anthropic.com>",
        "git@github.com:org/repo.git",
        "see src/components/RequestExplorerTable/index.tsx",
        "the function test_handles_very_long_file_names_correctly",
        "passwordless login; tokenizer = tiktoken.get_encoding('cl100k_base')",
        'password = "$DB_PASSWORD"',
        "define('DB_PASSWORD', '%DB_PASSWORD%');",
        "secret_key = '$(openssl rand -hex 32)'",
        "const handler = handleUserAccountSettings2FactorAuth;",
    ],
)
def test_ordinary_code_is_not_a_finding(text):
    assert redaction.find(text) == [], text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # a generated key starting with "$" (WordPress salts draw from it): no reference
        (
            "define('AUTH_KEY',         '$4jHRS3]0iaIbw9R~F~Lk-cZuA;>e1fsoA#s1hpNyk$.OJJ,3dWBK|f6)XEeZ');",
            "4jHRS3]0iaIbw9R~F~Lk-cZuA",
        ),
        # random letters with one digit and a quarter vowels: not a name of words
        (
            "the session cookie is lxlZvOaWlIaODJfAfVLaExiTZZBmrZrzwUjLg8mk (do not share)",
            "lxlZvOaWlIaODJfAfVLaExiTZZBmrZrzwUjLg8mk",
        ),
    ],
)
def test_random_values_seeds_once_let_through_are_redacted(text, secret):
    # found by the planted corpus' random seeds 48449940 and 2861199291
    redacted, spans = redaction.redact(text)
    assert spans
    assert secret not in redacted


def test_home_folders_are_their_own_non_secret_category():
    """Another issue found 1,832 home-folder paths listed as "secrets" in the dialog."""
    spans = redaction.find("cd /Users/jane/app && ls /home/bob/src")
    assert {span.category for span in spans} == {redaction.HOME}
    assert redaction.HOME not in redaction.secret_categories()
    assert "email" not in redaction.secret_categories()
