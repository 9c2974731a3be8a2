"""The workspace is required once every config, comparison and sweep has one (a migration of
its own: PostgreSQL refuses to alter a table with the data migration's pending trigger events
in one transaction); config names are unique per workspace instead of per user."""

import django.db.models.deletion
from django.db import migrations, models


def _workspace_field(related_name: str) -> models.ForeignKey:  # type: ignore[type-arg]
    return models.ForeignKey(
        on_delete=django.db.models.deletion.CASCADE,
        related_name=related_name,
        to="workspaces.workspace",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("tuning", "0002_workspaces"),
    ]

    operations = [
        migrations.AlterField(
            model_name="savedconfig", name="workspace", field=_workspace_field("saved_configs")
        ),
        migrations.AlterField(
            model_name="comparison", name="workspace", field=_workspace_field("comparisons")
        ),
        migrations.AlterField(
            model_name="sweep", name="workspace", field=_workspace_field("sweeps")
        ),
        migrations.RemoveConstraint(model_name="savedconfig", name="saved_config_unique_name"),
        migrations.AddConstraint(
            model_name="savedconfig",
            constraint=models.UniqueConstraint(
                fields=("workspace", "name"), name="saved_config_unique_name_per_workspace"
            ),
        ),
    ]
