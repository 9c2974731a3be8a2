"""The data migration: configs, comparisons and sweeps made before they belonged to a
workspace move to their owner's personal workspace (run backwards, then forwards, on the test
database)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BEFORE = [("tuning", "0001_initial")]


def test_existing_tuning_objects_move_to_their_owners_personal_workspace():
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    old = executor.loader.project_state([*BEFORE, ("workspaces", "0002_personal_workspaces")]).apps
    user_model = old.get_model("auth", "User")
    alice = user_model.objects.create(username="old-alice")
    bob = user_model.objects.create(username="old-bob")
    for owner in (alice, bob):
        old.get_model("tuning", "SavedConfig").objects.create(owner=owner, name="same-name")
        old.get_model("tuning", "Comparison").objects.create(owner=owner)
        old.get_model("tuning", "Sweep").objects.create(owner=owner, field="f", values=[1])
    # alice has her personal workspace; bob, made without the signal (historical models send
    # none), has none yet: the migration makes his
    personal = old.get_model("workspaces", "Workspace").objects.create(
        name="alice (personal)", personal_for_id=alice.pk
    )
    old.get_model("workspaces", "Membership").objects.create(
        workspace=personal, user_id=alice.pk, role="owner"
    )

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(latest)
    new = executor.loader.project_state(latest).apps
    workspace_model = new.get_model("workspaces", "Workspace")
    membership_model = new.get_model("workspaces", "Membership")
    assert workspace_model.objects.get(personal_for_id=alice.pk).pk == personal.pk
    for user in (alice, bob):
        personal = workspace_model.objects.get(personal_for_id=user.pk)
        assert membership_model.objects.get(workspace=personal, user_id=user.pk).role == "owner"
        for name in ("SavedConfig", "Comparison", "Sweep"):
            rows = new.get_model("tuning", name).objects.filter(owner_id=user.pk)
            assert rows.count() == 1, name
            assert set(rows.values_list("workspace_id", flat=True)) == {personal.pk}, name
