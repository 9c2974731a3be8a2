"""Every hostile upload the audit tried (and more), through the real API, the worker's replay
and every page of the session: each answers a clear 4xx, or a session whose problems list the
bad lines, and never a 5xx; a refused upload leaves no file, session or run behind.

The same table runs on SQLite (the unit run) and on PostgreSQL (the default test database),
where NUL characters, 32-bit columns and jsonb's number rules differ.
"""

from __future__ import annotations

import gzip
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.conf import settings

from contextlab.jobs import replay as runner
from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript
from tests.hardening.conftest import SMALL_EXPANSION
from tests.hardening.hostile import (
    NORMAL_USAGE,
    TarMember,
    gzip_of_lines,
    gzip_of_zeros,
    session_bytes,
    session_text,
    tar_gz_of,
    zip_of,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media"), pytest.mark.slow]


@dataclass(frozen=True)
class Attack:
    name: str
    filename: str
    build: Callable[[], bytes]
    #: 201: a session; else the 4xx the upload is refused with
    status: int = 201
    #: problem codes the session (or the refusal) must list
    problems: frozenset[str] = field(default_factory=frozenset)
    #: words the refusal's message must contain
    says: str = ""
    #: needs the small engine bounds (a bomb)
    small: bool = False


def usage_with(value: str) -> str:
    return NORMAL_USAGE.replace('"input_tokens": 3', f'"input_tokens": {value}')


DEEP = "[" * 100_000 + "]" * 100_000
MEMBERS = 600  # past the small bound of 500 members


def bomb_zip() -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("s/s.jsonl", session_bytes())
        with zf.open("s/tool-results/toolu_1.txt", "w") as member:
            for _ in range(2 * SMALL_EXPANSION // (1 << 20)):
                member.write(b"\0" * (1 << 20))
    return buf.getvalue()


def bomb_tar() -> bytes:
    return tar_gz_of(
        [
            TarMember("s/s.jsonl", session_bytes()),
            TarMember("s/tool-results/toolu_1.txt", b"\0" * (2 * SMALL_EXPANSION)),
        ]
    )


def valid_then_zeros() -> bytes:
    import io

    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb") as gz:
        gz.write(session_bytes())
        for _ in range(2 * SMALL_EXPANSION // (1 << 20)):
            gz.write(b"\0" * (1 << 20))
    return buf.getvalue()


def zstd_of(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


def zstd_bomb(prefix: bytes = b"") -> bytes:
    """``prefix`` then zeros past the small expansion bound, as one zstd stream."""
    import io

    import zstandard

    buf = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(buf, closefd=False) as writer:
        writer.write(prefix)
        for _ in range(2 * SMALL_EXPANSION // (1 << 20)):
            writer.write(b"\0" * (1 << 20))
    return buf.getvalue()


def many_sessions(count: int) -> bytes:
    return session_text().encode() + b"".join(
        session_text(session_id=f'"s{i}"').encode().replace(b'"u-', f'"u{i}-'.encode())
        for i in range(count)
    )


def truncated_zstd() -> bytes:
    # past several of zstd's 128 KiB blocks, so the first ones are read before the cut
    data = zstd_of(many_sessions(2000))
    return data[: len(data) // 2]


def truncated_gzip() -> bytes:
    data = gzip.compress(many_sessions(200))
    return data[: len(data) // 2]


def long_line(size: int) -> bytes:
    # words, as a real tool output has (a 50 MB run of one letter is a tokenizer worst case:
    # about 90 s of replay, bounded by the task time limit; see bench/bench_ingest_bounds.py)
    filler = "lorem ipsum dolor " * (size // 18)
    return session_bytes(content=f'"{filler}"')


ATTACKS = [
    # --- numbers ---------------------------------------------------------------------------
    Attack(
        "usage 1e300",
        "n.jsonl",
        lambda: session_bytes(usage=usage_with("1e300")),
        problems=frozenset({"bad_field"}),
    ),
    Attack(
        "usage 2*2**62",
        "n.jsonl",
        lambda: session_bytes(usage=usage_with(str(2 * 2**62))),
        problems=frozenset({"bad_field"}),
    ),
    Attack(
        "usage 3e9 (int32)",
        "n.jsonl",
        lambda: session_bytes(usage=usage_with("3000000000")),
        problems=frozenset({"bad_field"}),
    ),
    Attack(
        "usage 3e9 float",
        "n.jsonl",
        lambda: session_bytes(usage=usage_with("3e9")),
        problems=frozenset({"bad_field"}),
    ),
    Attack(
        "usage Infinity",
        "n.jsonl",
        lambda: session_bytes(usage=usage_with("Infinity")),
        problems=frozenset({"invalid_json"}),
    ),
    Attack(
        "usage -Infinity",
        "n.jsonl",
        lambda: session_bytes(usage=usage_with("-Infinity")),
        problems=frozenset({"invalid_json"}),
    ),
    Attack(
        "usage NaN",
        "n.jsonl",
        lambda: session_bytes(usage=usage_with("NaN")),
        problems=frozenset({"invalid_json"}),
    ),
    Attack(
        "usage 1e400 overflows",
        "n.jsonl",
        lambda: session_bytes(usage=usage_with("1e400")),
        problems=frozenset({"invalid_json"}),
    ),
    Attack("usage -5", "n.jsonl", lambda: session_bytes(usage=usage_with("-5"))),
    Attack(
        "5000-digit integer",
        "n.jsonl",
        lambda: session_bytes(usage=usage_with("9" * 5000)),
        problems=frozenset({"invalid_json"}),
    ),
    Attack(
        "2**70 in a tool input",
        "n.jsonl",
        lambda: session_bytes(
            extra_lines=(
                session_text()
                .splitlines()[1]
                .replace(
                    '{"type": "text", "text": "hi back"}',
                    '{"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"n": '
                    + str(2**70)
                    + "}}",
                )
                .replace('"uuid": "a-1"', '"uuid": "a-9"')
                .replace("msg_1", "msg_9"),
            )
        ),
    ),
    # --- text ------------------------------------------------------------------------------
    Attack(
        "lone surrogate in content",
        "t.jsonl",
        lambda: session_bytes(content='"a\\ud800b"'),
        problems=frozenset({"replaced_characters"}),
    ),
    Attack(
        "lone low surrogate in a reply",
        "t.jsonl",
        lambda: session_bytes(text='"\\udfff tail"'),
        problems=frozenset({"replaced_characters"}),
    ),
    Attack(
        "surrogate in a key",
        "t.jsonl",
        lambda: session_bytes(content='[{"type": "text", "text": "k", "\\ud800": 1}]'),
        problems=frozenset({"replaced_characters"}),
    ),
    Attack("escaped pair is kept", "t.jsonl", lambda: session_bytes(content='"\\ud83d\\ude00"')),
    Attack(
        "NUL in content",
        "t.jsonl",
        lambda: session_bytes(content='"a\\u0000b"'),
        problems=frozenset({"replaced_characters"}),
    ),
    Attack(
        "NUL in sessionId",
        "t.jsonl",
        lambda: session_bytes(session_id='"s\\u0000id"'),
        problems=frozenset({"replaced_characters"}),
    ),
    Attack("sessionId of 500 chars", "t.jsonl", lambda: session_bytes(session_id=f'"{"s" * 500}"')),
    Attack(
        "raw NUL byte in a line",
        "t.jsonl",
        lambda: session_bytes(content='"a\0b"'),
        problems=frozenset({"invalid_json"}),
    ),
    Attack(
        "invalid UTF-8",
        "t.jsonl",
        lambda: session_bytes().replace(b"hello there", b"hello \xff\xfe there"),
        problems=frozenset({"invalid_utf8"}),
    ),
    Attack(
        "HTML in content", "t.jsonl", lambda: session_bytes(content='"<script>alert(1)</script>"')
    ),
    # --- structure -------------------------------------------------------------------------
    Attack(
        "a line nested 100k deep",
        "d.jsonl",
        lambda: session_bytes(extra_lines=(DEEP,)),
        problems=frozenset({"invalid_json"}),
    ),
    Attack(
        "a record nested 500 deep",
        "d.jsonl",
        lambda: session_bytes(
            extra_lines=('{"type": "user", "x": ' + "[" * 500 + "]" * 500 + "}",)
        ),
        problems=frozenset({"invalid_json"}),
    ),
    Attack(
        "wrong types everywhere",
        "w.jsonl",
        lambda: session_bytes(
            extra_lines=(
                '{"type": "user", "uuid": 7, "message": {}}',
                '{"type": "assistant", "uuid": "w1", "parentUuid": ["a-1"], "message": []}',
                '{"type": "assistant", "uuid": "w2", "parentUuid": "a-1", "timestamp": 5, '
                '"message": {"content": 5, "usage": "lots", "id": 9, "model": 1}}',
                '{"type": 5}',
                "[1, 2]",
                '"text"',
                "null",
                '{"type": "user", "uuid": "w3", '
                '"message": {"content": [5, null, {"type": "tool_result", "content": 9}]}}',
            )
        ),
        problems=frozenset({"missing_uuid", "bad_field", "missing_type", "not_an_object"}),
    ),
    Attack(
        "duplicate uuids",
        "u.jsonl",
        lambda: session_bytes() + session_text().splitlines()[0].encode() + b"\n",
    ),
    Attack(
        "parentUuid cycle",
        "c.jsonl",
        lambda: session_bytes(
            extra_lines=(
                '{"type": "user", "uuid": "c-1", "parentUuid": "c-2", "message": {"content": "x"}}',
                '{"type": "user", "uuid": "c-2", "parentUuid": "c-1", "message": {"content": "y"}}',
            )
        ),
    ),
    Attack(
        "self parent",
        "c.jsonl",
        lambda: session_bytes().replace(b'"parentUuid": null', b'"parentUuid": "u-1"'),
    ),
    Attack(
        "1M tiny lines",
        "l.jsonl.gz",
        lambda: gzip.compress(session_bytes()) + gzip_of_lines(b"1\n", 1_000_000),
        problems=frozenset({"not_an_object", "more_problems"}),
    ),
    Attack(
        "4M tiny lines stop reading",
        "l.jsonl.gz",
        lambda: gzip.compress(session_bytes()) + gzip_of_lines(b"1\n", 4_000_000),
        problems=frozenset({"not_an_object", "too_many_problems", "more_problems"}),
        small=True,
    ),
    Attack(
        "bad lines before the session stop reading",
        "l.jsonl.gz",
        lambda: gzip_of_lines(b"[]\n", 100_000) + gzip.compress(session_bytes()),
        status=422,
        says="reading stopped",
        small=True,
    ),
    Attack("a 50 MB line", "big.jsonl", lambda: long_line(50 * 1024**2)),
    Attack(
        "a line past the 64 MiB cap",
        "big.jsonl",
        lambda: session_bytes(extra_lines=('"' + "y" * (65 * 1024**2) + '"',)),
        problems=frozenset({"line_too_long"}),
    ),
    # --- whole files -----------------------------------------------------------------------
    Attack("empty file", "e.jsonl", lambda: b"", status=422, says="empty"),
    Attack("blank lines only", "e.jsonl", lambda: b"\n\n  \n", status=422, says="empty"),
    Attack(
        "garbage",
        "g.jsonl",
        lambda: bytes(range(256)) * 40,
        status=422,
        says="not a Claude Code transcript",
    ),
    Attack("garbage .tar.gz", "g.tar.gz", lambda: bytes(range(256)) * 40, status=422),
    Attack(
        "gzip magic, garbage body",
        "g.tar.gz",
        lambda: b"\x1f\x8b\x08\x00" + b"\x07" * 5000,
        status=422,
    ),
    Attack("garbage .zip", "g.zip", lambda: b"PK\x03\x04" + b"\x01" * 5000, status=422, says="zip"),
    Attack(
        "truncated gzip", "t.jsonl.gz", truncated_gzip, problems=frozenset({"truncated_stream"})
    ),
    Attack("wrong extension", "s.exe", session_bytes, status=422, says="unsupported"),
    # Codex keeps cold rollouts as .jsonl.zst
    Attack("a .jsonl.zst session", "s.jsonl.zst", lambda: zstd_of(session_bytes())),
    Attack(
        "truncated zstd", "t.jsonl.zst", truncated_zstd, problems=frozenset({"truncated_stream"})
    ),
    Attack(
        "zstd magic, garbage body",
        "g.jsonl.zst",
        lambda: b"\x28\xb5\x2f\xfd" + b"\x07" * 5000,
        status=422,
    ),
    Attack(
        "zstd bomb (one endless line)",
        "b.jsonl.zst",
        zstd_bomb,
        status=422,
        says="expands",
        small=True,
    ),
    Attack(
        "valid session, then a zstd bomb",
        "b.jsonl.zst",
        lambda: zstd_bomb(session_bytes()),
        problems=frozenset({"expansion_limit"}),
        small=True,
    ),
    # --- archives --------------------------------------------------------------------------
    Attack("zip bomb", "b.zip", bomb_zip, status=422, says="bomb", small=True),
    Attack("tar bomb", "b.tar.gz", bomb_tar, status=422, says="bomb", small=True),
    Attack(
        "gzip bomb (one endless line)",
        "b.jsonl.gz",
        lambda: gzip_of_zeros(2 * SMALL_EXPANSION),
        status=422,
        says="expands",
        small=True,
    ),
    Attack(
        "valid session, then a gzip bomb",
        "b.jsonl.gz",
        valid_then_zeros,
        problems=frozenset({"expansion_limit"}),
        small=True,
    ),
    Attack(
        "zip traversal and absolute members",
        "p.zip",
        lambda: zip_of(
            {
                "../../../../tmp/contextlab-escape.jsonl": session_bytes(),
                "/etc/contextlab-abs.txt": b"x",
            }
        ),
    ),
    Attack(
        "tar traversal, links and devices",
        "p.tar.gz",
        lambda: tar_gz_of(
            [
                TarMember("../../../tmp/contextlab-escape.jsonl", session_bytes()),
                TarMember("/abs/contextlab-abs.txt", b"x"),
                TarMember("s/link.jsonl", kind=tarfile.SYMTYPE, link="/etc/passwd"),
                TarMember(
                    "s/hard.jsonl",
                    kind=tarfile.LNKTYPE,
                    link="../../../tmp/contextlab-escape.jsonl",
                ),
                TarMember("s/tool-results/dev.txt", kind=tarfile.CHRTYPE),
                TarMember("s/fifo.jsonl", kind=tarfile.FIFOTYPE),
            ]
        ),
    ),
    Attack(
        "only a symlink to a transcript",
        "p.tar.gz",
        lambda: tar_gz_of(
            [
                TarMember("s/s.jsonl", kind=tarfile.SYMTYPE, link="/etc/passwd"),
            ]
        ),
        status=422,
        says="no .jsonl",
    ),
    Attack(
        "hundreds of members",
        "m.zip",
        lambda: zip_of(
            {
                "s/s.jsonl": session_bytes(),
                **{f"s/tool-results/toolu_{i}.txt": b"out" for i in range(MEMBERS - 110)},
            }
        ),
        small=True,
    ),
    Attack(
        "too many zip members",
        "m.zip",
        lambda: zip_of(
            {
                "s/s.jsonl": session_bytes(),
                **{f"s/tool-results/toolu_{i}.txt": b"" for i in range(MEMBERS)},
            }
        ),
        status=422,
        says="members",
        small=True,
    ),
    Attack(
        "too many tar members",
        "m.tar.gz",
        lambda: tar_gz_of(
            [
                TarMember("s/s.jsonl", session_bytes()),
                *(TarMember(f"s/e{i}.txt") for i in range(MEMBERS)),
            ]
        ),
        status=422,
        says="members",
        small=True,
    ),
]


def stored_files() -> list[Path]:
    root = Path(settings.MEDIA_ROOT) / "uploads"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def upload(client, auth_header, name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return client.post("/api/sessions", {"file": SimpleUploadedFile(name, data)}, **auth_header)


def assert_every_page_answers(client, transcript: Transcript) -> None:
    """The report, each request's explorer and each message's block text: all 200."""
    paths = [f"/sessions/{transcript.pk}/"]
    paths += [f"/sessions/{transcript.pk}/requests/{i}/" for i in range(transcript.request_count)]
    for thread in transcript.threads:
        paths += [
            f"/sessions/{transcript.pk}/messages/{thread['id']}/{m}/0/"
            for m in range(min(thread["messages"], 8))
        ]
    for path in paths:
        response = client.get(path)
        # a message without a block 0 answers 404; nothing answers 5xx
        assert response.status_code in (200, 404), (path, response.status_code)
        assert response.status_code == 200 or "/messages/" in path, path


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_hostile_upload(attack: Attack, client, alice_client, auth_header, request) -> None:
    if attack.small:
        request.getfixturevalue("small_bounds")
    response = upload(client, auth_header, attack.filename, attack.build())
    assert response.status_code == attack.status, response.content[:2000]
    body = response.json()
    if attack.status != 201:
        message = body["detail"] if isinstance(body["detail"], str) else body["detail"][0]["msg"]
        assert attack.says.lower() in message.lower(), message
        assert "internal error" not in message
        assert Transcript.objects.count() == 0
        assert Run.objects.count() == 0
        assert stored_files() == [], "a refused upload left a file behind"
        return
    codes = {p["code"] for p in body["problems"]}
    assert attack.problems <= codes, codes
    assert len(body["problems"]) <= 1006  # 1000, the errors that stopped reading, a count
    transcript = Transcript.objects.get(pk=body["id"])
    assert [p.name for p in stored_files()] == [Path(transcript.file).name]
    run = transcript.runs.get()
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE, run.error
    assert_every_page_answers(alice_client, transcript)
    assert client.get(f"/api/sessions/{transcript.pk}", **auth_header).status_code == 200
    page = client.get(f"/api/runs/{run.pk}/requests?limit=1000", **auth_header)
    assert page.status_code == 200
    # nothing unstorable or unencodable reached the results
    assert "\\u0000" not in page.content.decode()
    assert "\\ud800" not in page.content.decode()


def test_surrogate_and_nul_become_replacement_characters(client, alice_client, auth_header):
    response = upload(client, auth_header, "s.jsonl", session_bytes(content='"a\\ud800b\\u0000c"'))
    transcript = Transcript.objects.get(pk=response.json()["id"])
    runner.execute_run(transcript.runs.get().pk)
    page = alice_client.get(f"/sessions/{transcript.pk}/messages/main/0/0/")
    assert page.status_code == 200
    assert "a\ufffdb\ufffdc" in page.content.decode()


def test_usage_out_of_range_is_ignored_not_stored(client, auth_header):
    response = upload(client, auth_header, "n.jsonl", session_bytes(usage=usage_with("3e9")))
    transcript = Transcript.objects.get(pk=response.json()["id"])
    # the second response's prompt (3 + 1200 + 9000) is the largest recorded, not 3e9
    assert transcript.max_prompt_tokens == 10_203
    problem = next(p for p in transcript.problems if p["code"] == "bad_field")
    assert problem["line"] == 2
    assert "input_tokens" in problem["message"]


PAGE_CASES = [
    a
    for a in ATTACKS
    if a.name
    in {
        "garbage .tar.gz",
        "gzip magic, garbage body",
        "zip bomb",
        "lone surrogate in content",
        "NUL in sessionId",
        "usage Infinity",
        "too many tar members",
    }
]


@pytest.mark.parametrize("attack", PAGE_CASES, ids=[a.name for a in PAGE_CASES])
def test_hostile_upload_through_the_page(attack: Attack, alice_client, request) -> None:
    """The browser's upload endpoint answers the same as the API (its JSON, then the pages)."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    if attack.small:
        request.getfixturevalue("small_bounds")
    response = alice_client.post(
        "/sessions/upload/",
        {"file": SimpleUploadedFile(attack.filename, attack.build())},
        HTTP_ACCEPT="application/json",
    )
    # the page answers a refused file 400 (the API: 422 naming the field)
    assert response.status_code == (400 if attack.status == 422 else attack.status)
    (result,) = response.json()["results"]
    assert result["ok"] is (attack.status == 201)
    assert attack.says.lower() in result["message"].lower()
    if attack.status == 201:
        assert_every_page_answers(alice_client, Transcript.objects.get(pk=result["id"]))
    else:
        assert stored_files() == []
        assert Transcript.objects.count() == 0
    # the session list renders whatever was stored
    assert alice_client.get("/sessions/").status_code == 200


def test_disk_full_while_the_upload_streams_in(client, auth_header, monkeypatch):
    """The store fails mid-write (ENOSPC): a clear 507, and the partial file is gone."""
    import errno
    from pathlib import Path as RealPath

    real_open = RealPath.open
    written: list[RealPath] = []

    def open_then_fill_up(self, mode="r", *args, **kwargs):
        handle = real_open(self, mode, *args, **kwargs)
        if "w" in mode and self.name.startswith(".partial-"):
            written.append(self)

            def write(data, _real=handle.write):
                _real(data[:10])
                raise OSError(errno.ENOSPC, "No space left on device")

            handle.write = write
        return handle

    monkeypatch.setattr(RealPath, "open", open_then_fill_up)
    response = upload(client, auth_header, "s.jsonl", session_bytes())
    assert response.status_code == 507
    assert "No space left on device" in response.json()["detail"]
    assert written, "the upload never reached the store"
    assert not any(p.exists() for p in written)
    assert stored_files() == []
    assert Transcript.objects.count() == 0
