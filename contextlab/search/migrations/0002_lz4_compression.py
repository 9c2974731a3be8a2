"""PostgreSQL: the search index's texts and their ``tsvector`` compressed with lz4 rather
than pglz (the server's default), as ``runs/0007`` does a result's values: less CPU to write
and read them (bench/README.md, ``bench_hosts.py``). What is stored and found is unchanged;
rows stored before stay as they are. Left at pglz where the server has no lz4. SQLite:
nothing."""

from typing import Any

from django.db import migrations

#: (model, column) of the values compressed with lz4
COLUMNS = [("Entry", "body"), ("Entry", "vector")]


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
            table = apps.get_model("search", model)._meta.db_table
            schema_editor.execute(
                f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method}"
            )

    return run


class Migration(migrations.Migration):
    dependencies = [("search", "0001_initial")]

    operations = [
        migrations.RunPython(_compress_with("lz4"), _compress_with("pglz"), elidable=False)
    ]
