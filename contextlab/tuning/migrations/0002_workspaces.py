"""Configs, comparisons and sweeps belong to a workspace: each existing one moves to its
owner's personal workspace (created here for an owner who has none yet)."""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models


def to_personal_workspaces(apps: Any, schema_editor: Any) -> None:
    Workspace = apps.get_model("workspaces", "Workspace")
    Membership = apps.get_model("workspaces", "Membership")
    personal = dict(
        Workspace.objects.filter(personal_for__isnull=False).values_list("personal_for_id", "pk")
    )
    for name in ("SavedConfig", "Comparison", "Sweep"):
        model = apps.get_model("tuning", name)
        owners = set(
            model.objects.filter(workspace__isnull=True).values_list("owner_id", flat=True)
        )
        for owner_id in owners:
            if owner_id not in personal:
                # the workspaces migration gave every user one; a user made since without
                # the signal (raw SQL, fixtures) gets it now
                owner = model._meta.get_field("owner").related_model.objects.get(pk=owner_id)
                workspace = Workspace.objects.create(
                    name=f"{owner.username} (personal)",
                    personal_for_id=owner_id,
                    created_by_id=owner_id,
                )
                Membership.objects.create(workspace=workspace, user_id=owner_id, role="owner")
                personal[owner_id] = workspace.pk
            model.objects.filter(owner_id=owner_id, workspace__isnull=True).update(
                workspace_id=personal[owner_id]
            )


def _workspace_field(related_name: str) -> models.ForeignKey:  # type: ignore[type-arg]
    return models.ForeignKey(
        null=True,
        on_delete=django.db.models.deletion.CASCADE,
        related_name=related_name,
        to="workspaces.workspace",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("tuning", "0001_initial"),
        ("workspaces", "0002_personal_workspaces"),
    ]

    operations = [
        migrations.AddField(
            model_name="savedconfig", name="workspace", field=_workspace_field("saved_configs")
        ),
        migrations.AddField(
            model_name="comparison", name="workspace", field=_workspace_field("comparisons")
        ),
        migrations.AddField(model_name="sweep", name="workspace", field=_workspace_field("sweeps")),
        migrations.RunPython(to_personal_workspaces, migrations.RunPython.noop),
    ]
