"""A team workspace (owner olive, editor eddie, viewer vera, outsider nora) with one replayed
session, for the comment tests."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client


@pytest.fixture
def team(django_user_model: Any, tool_heavy_jsonl: Any) -> dict[str, Any]:
    from contextlab.jobs import replay as runner
    from contextlab.transcripts import services as transcript_services
    from contextlab.workspaces import services

    users = {
        name: django_user_model.objects.create_user(username=name, password="pw-123-xyz")
        for name in ("olive", "eddie", "vera", "nora")
    }
    workspace = services.create_workspace(creator=users["olive"], name="Team")
    services.set_member(workspace=workspace, username="eddie", role="editor")
    services.set_member(workspace=workspace, username="vera", role="viewer")
    with tool_heavy_jsonl.open("rb") as fh:
        session, _ = transcript_services.create_transcript(
            owner=users["olive"], name="team.jsonl", content=fh, workspace=workspace
        )
    runner.execute_run(session.runs.get().pk)
    clients = {}
    for name, user in users.items():
        client = Client()
        client.force_login(user)
        clients[name] = client
    return {"users": users, "workspace": workspace, "session": session, "clients": clients}


@pytest.fixture
def gated():
    """The session as the gate hands it to ``user`` (with their role annotated)."""
    from contextlab.workspaces import access

    def get(user: Any, session: Any) -> Any:
        return access.session_for(user, session.pk)

    return get
