"""The large values a replay stores (its result, the session's stored messages, the search
index's texts) are compressed with lz4 on a PostgreSQL server that has it (migrations
runs/0007, transcripts/0014, search/0002), and read back as written."""

from __future__ import annotations

import pytest
from django.db import connection

from contextlab.jobs import replay as runner
from contextlab.runs.services import session_messages

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's TOAST"),
]

COMPRESSED = [
    ("runs_runresult", "data"),
    ("runs_runresultpart", "data"),
    ("runs_runresultviewpart", "data"),
    ("transcripts_transcriptmessages", "data"),
    ("transcripts_transcriptmessagespart", "data"),
    ("transcripts_appendedmessages", "data"),
    ("search_entry", "body"),
    ("search_entry", "vector"),
]


def _server_has_lz4() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' "
            "AND 'lz4' = ANY(enumvals)"
        )
        return cursor.fetchone() is not None


def _compression(table: str, column: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attcompression FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = %s",
            [table, column],
        )
        return str(cursor.fetchone()[0])


def test_large_values_are_compressed_with_lz4():
    if not _server_has_lz4():
        pytest.skip("this PostgreSQL server was built without lz4")
    assert {f"{t}.{c}": _compression(t, c) for t, c in COMPRESSED} == {
        f"{t}.{c}": "l" for t, c in COMPRESSED
    }


@pytest.mark.usefixtures("clean_media")
def test_a_replay_s_stored_values_are_lz4_s_and_read_back(make_transcript, tool_heavy_jsonl):
    if not _server_has_lz4():
        pytest.skip("this PostgreSQL server was built without lz4")
    transcript = make_transcript(tool_heavy_jsonl)
    runner.execute_run(transcript.runs.get().pk)
    assert transcript.runs.get().result.read()["requests"]
    assert session_messages(transcript)["main"]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT pg_column_compression(data) FROM transcripts_transcriptmessagespart "
            "WHERE messages_id = %s UNION SELECT DISTINCT pg_column_compression(body) "
            "FROM search_entry WHERE transcript_id = %s",
            [transcript.pk, transcript.pk],
        )
        # (NULL: a value too short to be compressed)
        assert {row[0] for row in cursor.fetchall()} - {None} == {"lz4"}
