"""PostgreSQL: the ``vector`` column is no longer generated but made by a trigger, of the
row's ``words`` when the writer gives them (``backends.write_entries``: the text's letters
and digits, every other character a space, ``backends.index_words``), else of its text as
``migrations/0001`` made it. ``words`` is never stored (the trigger empties it). The same
``to_tsvector('simple', …)`` of the same words either way: what is stored and found is
unchanged, rows stored before stay as they are; the database no longer runs the regular
expression on the texts the worker gives words for (about a fifth of the database's CPU per
replay: bench/README.md, ``bench_run_db.py``). SQLite: nothing (FTS5
splits the text itself)."""

from typing import Any

from django.db import migrations

#: the vector of the text ``body`` as ``migrations/0001`` generated it
VECTOR = "to_tsvector('simple'::regconfig, regexp_replace({}, '[^[:alnum:]]+', ' ', 'g'))"

FORWARD = (
    "ALTER TABLE search_entry ALTER COLUMN vector DROP EXPRESSION",
    "ALTER TABLE search_entry ADD COLUMN words text",
    "CREATE FUNCTION search_entry_vector() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF NEW.words IS NOT NULL THEN "
    "NEW.vector := to_tsvector('simple'::regconfig, NEW.words); NEW.words := NULL; "
    f"ELSE NEW.vector := {VECTOR.format('NEW.body')}; END IF; RETURN NEW; END $$",
    "CREATE TRIGGER search_entry_vector BEFORE INSERT OR UPDATE OF body, words "
    "ON search_entry FOR EACH ROW EXECUTE FUNCTION search_entry_vector()",
)
BACKWARD = (
    "DROP TRIGGER search_entry_vector ON search_entry",
    "DROP FUNCTION search_entry_vector()",
    "ALTER TABLE search_entry DROP COLUMN words",
    "DROP INDEX search_entry_vector",
    "ALTER TABLE search_entry DROP COLUMN vector",
    "ALTER TABLE search_entry ADD COLUMN vector tsvector GENERATED ALWAYS AS "
    f"({VECTOR.format('body')}) STORED",
    "CREATE INDEX search_entry_vector ON search_entry USING gin (vector)",
)


def _run(statements: tuple[str, ...]) -> Any:
    def run(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        with schema_editor.connection.cursor() as cursor:
            # the vector's compression (search/0002) kept when the column is made again
            cursor.execute(
                "SELECT attcompression FROM pg_attribute WHERE attname = 'vector' "
                "AND attrelid = 'search_entry'::regclass"
            )
            (compression,) = cursor.fetchone()
        for sql in statements:
            schema_editor.execute(sql)
        if compression == "l":
            schema_editor.execute(
                "ALTER TABLE search_entry ALTER COLUMN vector SET COMPRESSION lz4"
            )

    return run


class Migration(migrations.Migration):
    dependencies = [("search", "0002_lz4_compression")]

    operations = [migrations.RunPython(_run(FORWARD), _run(BACKWARD), elidable=False)]
