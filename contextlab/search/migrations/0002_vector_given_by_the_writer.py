"""PostgreSQL: the ``vector`` column is no longer generated but given by whoever writes the
row (``backends.write_entries``: the worker works it out, ``backends.vector_text``), else
worked out by the database as before (a trigger, for a row written without one or whose
text changes). The same ``to_tsvector`` either way: what is stored and found is unchanged;
parsing the text was most of the database's CPU of a replay's first run. The text and the
vector compressed with lz4 rather than pglz where the server has it (less CPU to write and
read, as ``runs/0007``). SQLite: nothing."""

from typing import Any

from django.db import migrations

#: the vector of ``body`` as ``migrations/0001`` generated it
VECTOR = "to_tsvector('simple'::regconfig, regexp_replace({}, '[^[:alnum:]]+', ' ', 'g'))"

FORWARD = (
    "ALTER TABLE search_entry ALTER COLUMN vector DROP EXPRESSION",
    "CREATE FUNCTION search_entry_vector() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF TG_OP = 'UPDATE' OR NEW.vector IS NULL THEN "
    f"NEW.vector := {VECTOR.format('NEW.body')}; END IF; RETURN NEW; END $$",
    "CREATE TRIGGER search_entry_vector BEFORE INSERT OR UPDATE OF body ON search_entry "
    "FOR EACH ROW EXECUTE FUNCTION search_entry_vector()",
)
BACKWARD = (
    "DROP TRIGGER search_entry_vector ON search_entry",
    "DROP FUNCTION search_entry_vector()",
    "DROP INDEX search_entry_vector",
    "ALTER TABLE search_entry DROP COLUMN vector",
    "ALTER TABLE search_entry ADD COLUMN vector tsvector GENERATED ALWAYS AS "
    f"({VECTOR.format('body')}) STORED",
    "CREATE INDEX search_entry_vector ON search_entry USING gin (vector)",
)


def _run(statements: tuple[str, ...], compression: str) -> Any:
    def run(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        for sql in statements:
            schema_editor.execute(sql)
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' "
                "AND 'lz4' = ANY(enumvals)"
            )
            if cursor.fetchone() is None:
                return
        for column in ("body", "vector"):
            schema_editor.execute(
                f"ALTER TABLE search_entry ALTER COLUMN {column} SET COMPRESSION {compression}"
            )

    return run


class Migration(migrations.Migration):
    dependencies = [("search", "0001_initial")]

    operations = [
        migrations.RunPython(_run(FORWARD, "lz4"), _run(BACKWARD, "pglz"), elidable=False)
    ]
