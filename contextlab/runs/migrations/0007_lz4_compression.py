"""PostgreSQL: the JSON values of a run's result (``RunResult``, its parts and view parts) compressed
with lz4 rather than pglz (the server's default): writing a replay's values cost the database
about a third less CPU (bench/README.md, ``bench_hosts.py``), reading them less too. What
is stored and read is unchanged; values stored before stay as they are until written again.
Left at pglz where the server has no lz4 (built without it). SQLite: nothing."""

from django.db import migrations

from contextlab.migration_ops import set_compression

#: (model, column) of the values compressed with lz4
COLUMNS = [
    ("RunResult", "data"),
    ("RunResultPart", "data"),
    ("RunResultViewPart", "data"),
]


class Migration(migrations.Migration):
    dependencies = [("runs", "0006_run_result_view_parts")]

    operations = [set_compression("runs", COLUMNS)]
