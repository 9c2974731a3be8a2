"""The data migration: sessions uploaded before workspaces existed move to their owner's
personal workspace, and every existing user gets one (run backwards, then forwards, on the
test database)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BEFORE = [("transcripts", "0002_max_prompt_tokens"), ("workspaces", None)]


def test_existing_users_and_sessions_get_personal_workspaces():
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    old = executor.loader.project_state([BEFORE[0]]).apps
    user_model = old.get_model("auth", "User")
    transcript_model = old.get_model("transcripts", "Transcript")
    alice = user_model.objects.create(username="old-alice")
    bob = user_model.objects.create(username="old-bob")
    for owner, sha in ((alice, "a" * 64), (alice, "b" * 64), (bob, "c" * 64)):
        transcript_model.objects.create(owner=owner, name="t.jsonl", file="x", size=1, sha256=sha)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(latest)
    new = executor.loader.project_state(latest).apps
    workspace_model = new.get_model("workspaces", "Workspace")
    membership_model = new.get_model("workspaces", "Membership")
    transcript_model = new.get_model("transcripts", "Transcript")
    for user in (alice, bob):
        workspace = workspace_model.objects.get(personal_for_id=user.pk)
        assert membership_model.objects.get(workspace=workspace, user_id=user.pk).role == "owner"
        owned = transcript_model.objects.filter(owner_id=user.pk)
        assert owned.count() == (2 if user == alice else 1)
        assert set(owned.values_list("workspace_id", flat=True)) == {workspace.pk}
