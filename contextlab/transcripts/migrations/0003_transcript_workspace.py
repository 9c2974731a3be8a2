"""Sessions belong to a workspace: each existing session moves to its owner's personal one."""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models


def to_personal_workspaces(apps: Any, schema_editor: Any) -> None:
    Transcript = apps.get_model("transcripts", "Transcript")
    Workspace = apps.get_model("workspaces", "Workspace")
    personal = dict(
        Workspace.objects.filter(personal_for__isnull=False).values_list("personal_for_id", "pk")
    )
    for owner_id, workspace_id in personal.items():
        Transcript.objects.filter(owner_id=owner_id, workspace__isnull=True).update(
            workspace_id=workspace_id
        )


class Migration(migrations.Migration):
    dependencies = [
        ("transcripts", "0002_max_prompt_tokens"),
        ("workspaces", "0002_personal_workspaces"),
    ]

    operations = [
        migrations.AddField(
            model_name="transcript",
            name="workspace",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="transcripts",
                to="workspaces.workspace",
            ),
        ),
        migrations.RunPython(to_personal_workspaces, migrations.RunPython.noop),
    ]
