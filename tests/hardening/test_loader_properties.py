"""Property tests: whatever bytes arrive, the loader answers a session with problems or a
``TranscriptError`` with a reason, never another exception (bench/fuzz_loader.py runs the same
properties for longer)."""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextlab import engine
from contextlab.engine import loading

pytestmark = pytest.mark.slow

#: JSON text fragments that have broken the loader or the database before
HOSTILE_TOKENS = [
    "Infinity",
    "-Infinity",
    "NaN",
    "1e300",
    "1e400",
    "-0",
    str(2**63),
    str(2**70),
    "3e9",
    '"\\ud800"',
    '"\\udfff"',
    '"\\u0000"',
    '"\\ud83d\\ude00"',
    "[" * 300 + "]" * 300,
    '"<script>"',
    "null",
    "true",
    '""',
    "{}",
    "[]",
]
KEYS = [
    "type",
    "uuid",
    "parentUuid",
    "message",
    "content",
    "usage",
    "input_tokens",
    "role",
    "sessionId",
    "id",
    "text",
    "tool_use_id",
    "isSidechain",
    "subtype",
    "logicalParentUuid",
]
TYPES = [
    "user",
    "assistant",
    "system",
    "progress",
    "attachment",
    "summary",
    "tool_use",
    "tool_result",
    "text",
    "compact_boundary",
    "content-replacement",
]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(TYPES),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner, max_size=6),
    ),
    max_leaves=25,
)


@st.composite
def record_lines(draw: st.DrawFn) -> bytes:
    """Lines that look like transcript records, with hostile fragments spliced in."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 12))):
        record = draw(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=8))
        record.setdefault("type", draw(st.sampled_from(TYPES)))
        text = json.dumps(record)
        if draw(st.booleans()):
            token = draw(st.sampled_from(HOSTILE_TOKENS))
            at = draw(st.integers(0, len(text)))
            text = text[:at] + token + text[at:]
        lines.append(text)
    return ("\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))).encode(
        "utf-8", "surrogatepass"
    )


def load_never_crashes(path: Path) -> None:
    try:
        session = engine.load_session(str(path))
    except engine.TranscriptError as exc:
        reason = str(exc)
        assert reason, "a refusal says why"
        return
    try:
        assert len(session.problems) <= loading.MAX_PROBLEMS
        # what the web app stores must be JSON a database accepts
        json.dumps(engine.messages_json(session), allow_nan=False).encode("utf-8")
        json.dumps([p.to_json() for p in session.problems], allow_nan=False).encode("utf-8")
    finally:
        session.upload.close()  # type: ignore[union-attr]


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(data=st.binary(max_size=4096))
def test_any_bytes_as_jsonl(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "s.jsonl"
    path.write_bytes(data)
    load_never_crashes(path)


@FAST
@given(data=record_lines())
def test_record_like_lines(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "s.jsonl"
    path.write_bytes(data)
    load_never_crashes(path)


@FAST
@given(data=record_lines(), cut=st.integers(0, 400))
def test_gzip_whole_or_cut(tmp_path_factory, data: bytes, cut: int) -> None:
    packed = gzip.compress(data)
    path = tmp_path_factory.mktemp("fuzz") / "s.jsonl.gz"
    path.write_bytes(packed[: len(packed) - cut] if cut else packed)
    load_never_crashes(path)


@FAST
@given(
    members=st.dictionaries(
        st.sampled_from(
            [
                "s.jsonl",
                "a/s.jsonl",
                "a/subagents/agent-1.jsonl",
                "../x.jsonl",
                "/abs.jsonl",
                "a/tool-results/t.txt",
                "a\\b.jsonl",
                "",
            ]
        ),
        record_lines(),
        min_size=1,
        max_size=4,
    ),
    flip=st.integers(0, 2000),
)
def test_zip_whole_or_corrupted(tmp_path_factory, members: dict[str, bytes], flip: int) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name or "noname", data)
    packed = bytearray(buf.getvalue())
    if flip:
        packed[flip % len(packed)] ^= 0xFF
    path = tmp_path_factory.mktemp("fuzz") / "s.zip"
    path.write_bytes(bytes(packed))
    load_never_crashes(path)


def test_a_zip_claiming_an_unknown_version_is_refused(tmp_path) -> None:
    """The fuzzer's first finding: one flipped byte in the central directory made zipfile raise
    NotImplementedError ("zip file version 23.5") out of the loader."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("s.jsonl", b'{"type": "user"}')
    data = bytearray(buf.getvalue())
    central = data.rindex(b"PK\x01\x02")
    data[central + 6] = 235  # "version needed to extract": 23.5
    path = tmp_path / "s.zip"
    path.write_bytes(bytes(data))
    with pytest.raises(engine.TranscriptError, match="not a readable zip"):
        engine.load_session(str(path))
