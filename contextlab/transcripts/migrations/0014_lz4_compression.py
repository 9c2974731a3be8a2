"""PostgreSQL: the JSON values of a session's stored messages (``TranscriptMessages``, its parts and appends' rows) compressed
with lz4 rather than pglz (the server's default): writing a replay's values cost the database
about a third less CPU (bench/README.md, ``bench_hosts.py``), reading them less too. What
is stored and read is unchanged; values stored before stay as they are until written again.
Left at pglz where the server has no lz4 (built without it). SQLite: nothing."""

from django.db import migrations

from contextlab.migration_ops import set_compression

#: (model, column) of the values compressed with lz4
COLUMNS = [
    ("TranscriptMessages", "data"),
    ("TranscriptMessagesPart", "data"),
    ("AppendedMessages", "data"),
]


class Migration(migrations.Migration):
    dependencies = [("transcripts", "0013_messages_parts")]

    operations = [set_compression("transcripts", COLUMNS)]
