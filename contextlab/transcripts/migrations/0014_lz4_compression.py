"""PostgreSQL: the JSON values of a session's stored messages (``TranscriptMessages``, its parts and appends' rows) compressed
with lz4 rather than pglz (the server's default): writing a replay's values cost the database
about a third less CPU (bench/README.md, ``bench_hosts.py``), reading them less too. What
is stored and read is unchanged; values stored before stay as they are until written again.
Left at pglz where the server has no lz4 (built without it). SQLite: nothing."""

from typing import Any

from django.db import migrations

#: (model, column) of the values compressed with lz4
COLUMNS = [
    ("TranscriptMessages", "data"),
    ("TranscriptMessagesPart", "data"),
    ("AppendedMessages", "data"),
]


def _compress_with(method: str) -> Any:
    def run(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' "
                "AND %s = ANY(enumvals)",
                [method],
            )
            if cursor.fetchone() is None:
                return
        for model, column in COLUMNS:
            table = apps.get_model("transcripts", model)._meta.db_table
            schema_editor.execute(
                f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method}"
            )

    return run


class Migration(migrations.Migration):
    dependencies = [("transcripts", "0013_messages_parts")]

    operations = [
        migrations.RunPython(_compress_with("lz4"), _compress_with("pglz"), elidable=False)
    ]
