"""The workspace is required once every session has one (a migration of its own: PostgreSQL
refuses to alter a table with the data migration's pending trigger events in one transaction)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("transcripts", "0003_transcript_workspace"),
    ]

    operations = [
        migrations.AlterField(
            model_name="transcript",
            name="workspace",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="transcripts",
                to="workspaces.workspace",
            ),
        ),
        migrations.RemoveConstraint(
            model_name="transcript",
            name="transcript_unique_per_owner",
        ),
        migrations.AddConstraint(
            model_name="transcript",
            constraint=models.UniqueConstraint(
                fields=("workspace", "sha256"), name="transcript_unique_per_workspace"
            ),
        ),
    ]
