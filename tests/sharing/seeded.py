"""A transcript seeded with fake secrets of many kinds in every place text can appear.

The secrets are made at run time from a seeded generator (nothing secret-shaped is committed):
each has the real format of its kind, so detectors that know the format find it.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "persisted_preview.jsonl"
ALNUM = string.ascii_letters + string.digits


@dataclass(frozen=True)
class Secret:
    kind: str
    #: the text written into the transcript
    text: str
    #: parts of it that must not appear in anything shared (the random cores)
    cores: tuple[str, ...]


def _rand(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    # at least one digit, one upper and one lower letter when the alphabet has them
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(n))
        kinds = [
            any(c.isdigit() for c in value),
            any(c.isupper() for c in value),
            any(c.islower() for c in value),
        ]
        wanted = [
            any(c.isdigit() for c in alphabet),
            any(c.isupper() for c in alphabet),
            any(c.islower() for c in alphabet),
        ]
        if kinds == wanted:
            return value


def make_secrets(seed: int = 11) -> list[Secret]:
    rng = random.Random(seed)
    upper_digits = string.ascii_uppercase + string.digits
    hex_lower = "0123456789abcdef"
    out: list[Secret] = []

    def add(kind: str, text: str, *cores: str) -> None:
        out.append(Secret(kind, text, cores or (text,)))

    core = _rand(rng, 48, ALNUM + "-_")
    add("anthropic-key", "sk-ant-api03-" + core, core)
    core = _rand(rng, 48)
    add("openai-key", "sk-proj-" + core, core)
    core = _rand(rng, 36)
    add("github-token", "ghp_" + core, core)
    core = _rand(rng, 22) + "_" + _rand(rng, 59)
    add("github-pat", "github_pat_" + core, core)
    core = _rand(rng, 16, upper_digits)
    add("aws-access-key", "AKIA" + core, core)
    core = _rand(rng, 40, ALNUM + "+/")
    add("aws-secret-assignment", "AWS_SECRET_ACCESS_KEY=" + core, core)
    core = f"{rng.randrange(10**11, 10**12)}-{rng.randrange(10**11, 10**12)}-{_rand(rng, 24)}"
    add("slack-token", "xoxb-" + core, core)
    core = f"T{_rand(rng, 8, upper_digits)}/B{_rand(rng, 8, upper_digits)}/{_rand(rng, 24)}"
    add("slack-webhook", "https://hooks.slack.com/services/" + core, core)
    core = _rand(rng, 24)
    add("stripe-key", "sk_live_" + core, core)
    body = [_rand(rng, 64, ALNUM + "+/") for _ in range(6)]
    add(
        "private-key",
        "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END RSA PRIVATE KEY-----",
        *body,
    )
    payload = (
        base64.urlsafe_b64encode(json.dumps({"sub": _rand(rng, 12), "exp": 1900000000}).encode())
        .decode()
        .rstrip("=")
    )
    signature = _rand(rng, 43, ALNUM + "-_")
    add(
        "jwt",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + payload + "." + signature,
        payload,
        signature,
    )
    core = _rand(rng, 14)
    add("url-credentials", f"postgres://admin:{core}@db.internal:5432/app", f"admin:{core}")
    core = _rand(rng, 14)
    add("password-assignment", f"DATABASE_PASSWORD={core}", core)
    core = _rand(rng, 20)
    add("token-assignment", f'API_TOKEN: "{core}"', core)
    core = _rand(rng, 40)
    add("high-entropy", f"the session cookie is {core} (do not share)", core)
    add("home-path-mac", "/Users/quentinmac/Projects/app/.env", "/Users/quentinmac")
    add("home-path-linux", "/home/ursulalinux/src/app/config.py", "/home/ursulalinux")
    add("email", "carol.danvers@corp-mail.io", "carol.danvers@corp-mail.io")
    core = _rand(rng, 20)
    add("gitlab-token", "glpat-" + core, core)
    core = _rand(rng, 22, ALNUM + "_-") + "." + _rand(rng, 43, ALNUM + "_-")
    add("sendgrid-key", "SG." + core, core)
    core = _rand(rng, 36)
    add("npm-token", "//registry.npmjs.org/:_authToken=npm_" + core, core)
    core = _rand(rng, 72, ALNUM + "-_")
    add("pypi-token", "pypi-AgEIcHlwaS5vcmc" + core, core)
    core = _rand(rng, 32, hex_lower)
    add("twilio-key", "SK" + core, core)
    return out


def secret_block(secrets: list[Secret], place: str) -> str:
    lines = [f"[{place}] {s.kind}: {s.text}" for s in secrets]
    return "\n" + "\n".join(lines) + "\n"


def _seed_content(content: object, secrets: list[Secret], place: str) -> object:
    if isinstance(content, str):
        return content + secret_block(secrets, place)
    if isinstance(content, list):
        out = []
        for block in content:
            block = dict(block)
            kind = block.get("type")
            if kind == "text":
                block["text"] = block["text"] + secret_block(secrets, place + " text")
            elif kind == "thinking":
                block["thinking"] = block["thinking"] + secret_block(secrets, place + " thinking")
            elif kind == "tool_use":
                block["input"] = {
                    key: (
                        value + secret_block(secrets, f"{place} tool input {key}")
                        if isinstance(value, str)
                        else value
                    )
                    for key, value in block["input"].items()
                }
            elif kind == "tool_result":
                block["content"] = _seed_content(
                    block.get("content") or "", secrets, place + " tool output"
                )
            out.append(block)
        return out
    return content


def seeded_transcript(path: Path, secrets: list[Secret]) -> Path:
    """persisted_preview.jsonl (a real session with a persisted-output preview) with the
    secrets in every prompt, thinking and text block, tool input (file paths and commands
    included), tool output (the persisted preview included), plus a compaction summary and a
    session title."""
    records = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]
    out = []
    for record in records:
        message = record.get("message")
        if isinstance(message, dict) and "content" in message:
            place = f"{record.get('type')} {record.get('uuid', '')[:8]}"
            record = {
                **record,
                "message": {
                    **message,
                    "content": _seed_content(message["content"], secrets, place),
                },
            }
        out.append(record)
    last = next(r for r in reversed(out) if r.get("uuid"))
    session = last.get("sessionId")
    out.append(
        {
            "type": "summary",
            "summary": "title " + secret_block(secrets, "title"),
            "leafUuid": last["uuid"],
        }
    )
    out.append(
        {
            "type": "custom-title",
            "customTitle": "title" + secret_block(secrets, "custom title"),
            "sessionId": session,
        }
    )
    out.append(
        {
            "parentUuid": last["uuid"],
            "isSidechain": False,
            "userType": "external",
            "cwd": "/Users/quentinmac/Projects/app",
            "sessionId": session,
            "version": last.get("version"),
            "type": "user",
            "isCompactSummary": True,
            "isVisibleInTranscriptOnly": True,
            "message": {
                "role": "user",
                "content": "This session is being continued. Summary:"
                + secret_block(secrets, "summary"),
            },
            "uuid": "5eed5eed-0000-4000-8000-000000000001",
            "timestamp": last.get("timestamp"),
        }
    )
    path.write_text("".join(json.dumps(r) + "\n" for r in out))
    return path
