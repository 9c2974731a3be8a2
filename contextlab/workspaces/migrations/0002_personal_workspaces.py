"""Every existing user gets a personal workspace they own (new users get one on creation)."""

from typing import Any

from django.conf import settings
from django.db import migrations


def create_personal_workspaces(apps: Any, schema_editor: Any) -> None:
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    Workspace = apps.get_model("workspaces", "Workspace")
    Membership = apps.get_model("workspaces", "Membership")
    have = set(
        Workspace.objects.filter(personal_for__isnull=False).values_list(
            "personal_for_id", flat=True
        )
    )
    for user in User.objects.exclude(pk__in=have).iterator():
        workspace = Workspace.objects.create(
            name=f"{user.username} (personal)", personal_for=user, created_by=user
        )
        Membership.objects.create(workspace=workspace, user=user, role="owner")


class Migration(migrations.Migration):
    dependencies = [
        ("workspaces", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(create_personal_workspaces, migrations.RunPython.noop),
    ]
