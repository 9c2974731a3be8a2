"""PostgreSQL: the search index's texts and their ``tsvector`` compressed with lz4 rather
than pglz (the server's default), as ``runs/0007`` does a result's values: less CPU to write
and read them (bench/README.md, ``bench_hosts.py``). What is stored and found is unchanged;
rows stored before stay as they are. Left at pglz where the server has no lz4. SQLite:
nothing."""

from django.db import migrations

from contextlab.migration_ops import set_compression

#: (model, column) of the values compressed with lz4
COLUMNS = [("Entry", "body"), ("Entry", "vector")]


class Migration(migrations.Migration):
    dependencies = [("search", "0001_initial")]

    operations = [set_compression("search", COLUMNS)]
