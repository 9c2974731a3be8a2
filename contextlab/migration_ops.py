"""Operations that several apps' migrations share. Migrations that ran refer to these by
import, so what one does may not change: a new behaviour is a new function."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def set_compression(app_label: str, columns: list[tuple[str, str]]) -> migrations.RunPython:
    """PostgreSQL: ``columns`` ((model, column) of ``app_label``) compressed with lz4 rather
    than pglz, the server's default (writing a replay's large values costs the database about
    a third less CPU: bench/README.md, ``bench_hosts.py``; reading them less too); reversed,
    pglz again. What is stored and read is unchanged; values stored before stay as they are
    until written again. Nothing where the server has no lz4 (built without it), nor on
    SQLite."""

    def compress_with(method: str) -> Any:
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
            for model, column in columns:
                table = apps.get_model(app_label, model)._meta.db_table
                schema_editor.execute(
                    f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method}"
                )

        return run

    return migrations.RunPython(compress_with("lz4"), compress_with("pglz"), elidable=False)
