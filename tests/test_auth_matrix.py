"""Every page and API route, found by walking the URL conf and the OpenAPI schema, refuses
anonymous visitors: pages redirect to the login page, API routes answer 401."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

PUBLIC = {
    "accounts:login",
    "accounts:signup",
    "accounts:logout",
    "workspaces:invite",
    # share links: the token decides (tests/sharing/test_share_links.py)
    "sharing:shared",
    "sharing:shared_request",
    "sharing:shared_block",
}


def page_routes() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []

    def walk(patterns, prefix: str, namespace: str | None) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                if p.namespace in ("admin", "api"):
                    continue
                walk(p.url_patterns, prefix + str(p.pattern), p.namespace or namespace)
            elif isinstance(p, URLPattern) and p.name and namespace:
                name = f"{namespace}:{p.name}"
                if name not in PUBLIC:
                    # fill every converter with 1 (ids) or "main" (thread names)
                    path = re.sub(r"<int:\w+>", "1", prefix + str(p.pattern))
                    path = re.sub(r"<(str:)?\w+>", "main", path)
                    out.append((name, "/" + path))

    walk(get_resolver().url_patterns, "", None)
    return out


def test_there_are_routes_to_check():
    names = {name for name, _ in page_routes()}
    assert {"transcripts:list", "runs:report", "runs:request", "runs:detail"} <= names


@pytest.mark.parametrize("method", ["get", "post"])
def test_every_page_redirects_anonymous_visitors_to_login(client, method):
    for name, path in page_routes():
        response = getattr(client, method)(path)
        assert response.status_code in (302, 405), f"{name} {path}: {response.status_code}"
        if response.status_code == 302:
            assert response["Location"].startswith("/accounts/login/"), f"{name} {path}"


def test_every_api_operation_answers_401_without_a_token(client):
    schema = client.get("/api/openapi.json").json()
    checked = 0
    for path, operations in schema["paths"].items():
        url = re.sub(r"\{\w+\}", "1", path)
        for method in operations:
            response = getattr(client, method)(url)
            assert response.status_code == 401, f"{method.upper()} {path}: {response.status_code}"
            checked += 1
    assert checked >= 7


# --- the role matrix ---------------------------------------------------------------------------
#
# Every route declares who may use it. A route missing here fails
# ``test_every_route_declares_a_policy``, so a new page or API operation cannot ship without
# saying who may see it.
#
#   public         anyone, logged out included
#   user           any logged-in user, on their own things only (lists, forms, uploads)
#   owned          the user who created it (configs, comparisons, sweeps); others get 404
#   session:ROLE   a session of a workspace: non-members 404, members below ROLE 403
#   run:ROLE       the same, for a run (through its session)
#   workspace:ROLE the same, for a workspace
#   link           a share link: the token decides (see tests/sharing)
#   comment:author           a comment (by the editor): its author only; other members 403,
#                            non-members 404 (an owner deletes, never rewrites, others' words)
#   comment:author-or-owner  the same, and the workspace's owners too
#   item:ROLE      a config, comparison or sweep of a workspace: non-members 404, members
#                  below ROLE 403 (viewers read, editors change, owners delete)

PAGE_POLICIES: dict[str, str] = {
    "accounts:login": "public",
    "accounts:signup": "public",
    "accounts:logout": "public",
    "accounts:tokens": "user",
    "accounts:revoke_token": "owned",
    "transcripts:list": "user",
    "transcripts:upload": "user",
    "transcripts:demo": "user",
    "transcripts:delete": "session:owner",
    "transcripts:rename": "session:editor",
    "runs:report": "session:viewer",
    "runs:create": "session:editor",
    "runs:request": "session:viewer",
    "runs:block": "session:viewer",
    "runs:detail": "run:viewer",
    "runs:requests_csv": "run:viewer",
    "runs:tools_csv": "run:viewer",
    "runs:compare_requests": "session:viewer",
    "runs:cancel": "run:editor",
    "runs:replay_in_full": "run:editor",
    "runs:glossary": "user",
    "tuning:index": "user",
    "tuning:config_new": "user",
    "tuning:config_check": "user",
    "tuning:config": "item:viewer",
    "tuning:config_delete": "item:owner",
    "tuning:compare_new": "user",
    "tuning:comparison": "item:viewer",
    "tuning:comparison_delete": "item:owner",
    "tuning:comparison_cancel": "item:editor",
    "tuning:compare_request": "item:viewer",
    "tuning:sweep_new": "user",
    "tuning:sweep": "item:viewer",
    "tuning:sweep_delete": "item:owner",
    "tuning:sweep_cancel": "item:editor",
    "advice:list": "user",
    "advice:new": "user",
    "advice:detail": "item:viewer",
    "advice:cancel": "item:editor",
    "advice:delete": "item:owner",
    "workspaces:list": "user",
    "workspaces:create": "user",
    "workspaces:member_set": "workspace:owner",
    "workspaces:member_remove": "workspace:owner",
    "workspaces:invite_create": "workspace:owner",
    "workspaces:invite": "public",
    "moving:move_session": "session:editor",
    "sharing:dialog": "session:editor",
    "sharing:comparison_dialog": "item:editor",
    "sharing:sweep_dialog": "item:editor",
    "sharing:export_html": "session:viewer",
    "sharing:links": "user",
    "sharing:revoke": "owned",
    "sharing:shared": "link",
    "sharing:shared_request": "link",
    "sharing:shared_block": "link",
    "comments:create": "session:editor",
    "comments:edit": "comment:author",
    "comments:delete": "comment:author-or-owner",
    "search:workspace": "user",
    "search:session": "session:viewer",
}

API_POLICIES: dict[str, str] = {
    "create_session": "user",
    "list_sessions": "user",
    "get_session": "session:viewer",
    "delete_session": "session:owner",
    "create_run": "session:editor",
    "get_run": "run:viewer",
    "cancel_run": "run:editor",
    "list_run_requests": "run:viewer",
    "get_run_waste": "run:viewer",
    "get_run_tools": "run:viewer",
    "get_request_composition": "run:viewer",
    "list_config_fields": "user",
    "create_comparison": "user",
    "list_comparisons": "user",
    "get_comparison": "item:viewer",
    "delete_comparison": "item:owner",
    "create_sweep": "user",
    "list_sweeps": "user",
    "get_sweep": "item:viewer",
    "delete_sweep": "item:owner",
    "create_advice": "user",
    "get_advice": "item:viewer",
    "cancel_advice": "item:editor",
    "delete_advice": "item:owner",
    "create_workspace": "user",
    "list_workspaces": "user",
    "get_workspace": "workspace:viewer",
    "add_workspace_member": "workspace:owner",
    "remove_workspace_member": "workspace:owner",
    "create_workspace_invite": "workspace:owner",
    "move_session": "session:editor",
    # live sessions (``contextlab watch``): owner and editors grow a session
    "append_session": "session:editor",
    "create_share": "session:editor",
    "list_shares": "user",
    "revoke_share": "owned",
    "export_session": "session:viewer",
    "list_comments": "session:viewer",
    "create_comment": "session:editor",
    "update_comment": "comment:author",
    "delete_comment": "comment:author-or-owner",
    # resumable uploads (tus): anyone logged in starts one; only its creator sees or feeds it
    "tus_options": "user",
    "create_upload": "user",
    "upload_offset": "owned",
    "append_upload": "owned",
    "get_upload": "owned",
    "delete_upload": "owned",
    # search: a session's blocks as reading the session; a workspace's as reading the workspace
    "search_session": "session:viewer",
    "search_workspace": "workspace:viewer",
}

#: query strings of operations whose ids are not in their path
API_QUERIES = {
    "search_session": "?q=hello",
    "search_workspace": "?q=hello&workspace_id={workspace_id}",
}

ROLES = ("nonmember", "viewer", "editor", "owner")
RANK = {"viewer": 1, "editor": 2, "owner": 3}


def all_page_routes() -> list[tuple[str, str]]:
    """(name, pattern) of every named page route, public ones included."""
    out: list[tuple[str, str]] = []

    def walk(patterns, prefix: str, namespace: str | None) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                if p.namespace in ("admin", "api"):
                    continue
                walk(p.url_patterns, prefix + str(p.pattern), p.namespace or namespace)
            elif isinstance(p, URLPattern) and p.name and namespace:
                out.append((f"{namespace}:{p.name}", "/" + prefix + str(p.pattern)))

    walk(get_resolver().url_patterns, "", None)
    return out


def api_operations(client) -> list[tuple[str, str, str]]:
    """(operation_id, method, path template) of every API operation in the OpenAPI schema."""
    schema = client.get("/api/openapi.json").json()
    return [
        (op["operationId"], method, path)
        for path, operations in schema["paths"].items()
        for method, op in operations.items()
    ]


def test_every_route_declares_a_policy(client):
    pages = {name for name, _ in all_page_routes()}
    assert pages - set(PAGE_POLICIES) == set(), "pages without a declared access policy"
    assert set(PAGE_POLICIES) - pages == set(), "policies of pages that no longer exist"
    operations = {op for op, _, _ in api_operations(client)}
    assert operations - set(API_POLICIES) == set(), "API operations without a policy"
    assert set(API_POLICIES) - operations == set(), "policies of operations that no longer exist"


@pytest.fixture
def team(django_user_model, make_transcript, short_jsonl):
    """A team workspace owned by olive with a viewer, an editor, a session and its run, plus a
    user who is not a member; the tuning objects are olive's, in the team workspace."""
    from contextlab.advice.models import Advice
    from contextlab.jobs import replay as runner
    from contextlab.transcripts import resumable
    from contextlab.transcripts import services as transcript_services
    from contextlab.tuning.models import Comparison, SavedConfig, Sweep
    from contextlab.workspaces import services

    users = {
        role: django_user_model.objects.create_user(username=f"u-{role}", password="pw-123-xyz")
        for role in ROLES
    }
    workspace = services.create_workspace(creator=users["owner"], name="Team")
    services.set_member(workspace=workspace, username="u-viewer", role="viewer")
    services.set_member(workspace=workspace, username="u-editor", role="editor")

    def new_session():
        with short_jsonl.open("rb") as fh:
            # a fresh name and bytes per call: one upload per check of a destructive route
            data = fh.read() + b"\n" * new_session.count
        new_session.count += 1
        transcript, _ = transcript_services.create_transcript(
            owner=users["owner"], name="team.jsonl", content=[data], workspace=workspace
        )
        return transcript

    new_session.count = 0
    owner = users["owner"]
    # one replayed session for the routes that only read or add; deleting gets a fresh one
    session = new_session()
    runner.execute_run(session.runs.get().pk)
    comparison = Comparison.objects.create(owner=owner, workspace=workspace)
    comparison.sessions.add(session)
    from contextlab.sharing import services as sharing

    share, token = sharing.create_share(user=owner, transcript=session)
    from contextlab.accounts.services import create_api_token
    from contextlab.comments.models import Comment

    def new_comment():
        # by the editor: the author-only routes tell the author from the owner
        return Comment.objects.create(
            transcript=session, request_index=0, author=users["editor"], body="a comment"
        )

    comment = new_comment()

    return {
        "users": users,
        "workspace": workspace,
        "session": session,
        "token": token,
        "new_session": lambda destructive: new_session() if destructive else session,
        "new_comment": lambda destructive: new_comment() if destructive else comment,
        "owned": {
            "config": SavedConfig.objects.create(owner=owner, workspace=workspace, name="cfg"),
            "comparison": comparison,
            "sweep": Sweep.objects.create(
                owner=owner, workspace=workspace, field="autocompact_pct", values=[80]
            ),
            "advice": Advice.objects.create(owner=owner, workspace=workspace),
            "share": share,
            "token": create_api_token(username=owner.username)[0],
            "upload": resumable.create(owner=owner, length=10, name="s.jsonl", workspace=None),
        },
    }


def expected(policy: str, role: str | None) -> str:
    """ "login" (redirect or 401), "404", "403" or "ok" (anything else below 500)."""
    if policy in ("public", "link"):
        return "ok"
    if role is None:
        return "login"
    if policy == "user":
        return "ok"
    if policy.startswith("comment:"):
        if role == "nonmember":
            return "404"
        allowed = {"editor"} | ({"owner"} if policy == "comment:author-or-owner" else set())
        return "ok" if role in allowed else "403"
    if policy == "owned":
        return "ok" if role == "owner" else "404"
    need = policy.split(":")[1]
    if role == "nonmember":
        return "404"
    return "ok" if RANK[role] >= RANK[need] else "403"


def _owned_for(name: str, team) -> int:
    for part, kind in (
        ("config", "config"),
        ("compar", "comparison"),
        ("sweep", "sweep"),
        ("advice", "advice"),
        ("revoke_token", "token"),
        ("revoke", "share"),
    ):
        if part in name:
            return team["owned"][kind].pk
    raise AssertionError(f"no owned object for {name}")


def _fill(pattern: str, name: str, policy: str, team, session) -> str:
    kind = policy.split(":")[0]
    if kind == "session":
        pk = session.pk
    elif kind == "run":
        pk = session.runs.first().pk
    elif kind == "workspace":
        pk = team["workspace"].pk
    elif kind in ("owned", "item"):
        pk = _owned_for(name, team)
    elif kind == "comment":
        pk = team["new_comment"](name.endswith("delete")).pk
    else:
        pk = 1
    path = pattern.replace("<int:pk>", str(pk)).replace("<str:token>", team["token"])
    if "<int:message>" in path:
        from contextlab.runs.services import session_messages

        messages = session_messages(session or team["session"])["main"]
        first = next(i for i, m in enumerate(messages) if m.get("blocks"))
        path = path.replace("<int:message>", str(first))
    path = re.sub(r"<int:\w+>", "0", path)
    return re.sub(r"<(str:)?\w+>", "main", path)


def _verdict(status: int) -> str:
    if status in (401, 302):
        return "login" if status == 401 else "redirect"
    if status in (403, 404):
        return str(status)
    assert status < 500, status
    return "ok"


@pytest.mark.usefixtures("clean_media")
@pytest.mark.parametrize(("name", "policy"), sorted(PAGE_POLICIES.items()))
def test_page_answers_each_role_as_its_policy_says(name, policy, team):
    pattern = dict(all_page_routes())[name]
    writes = (
        policy.endswith((":editor", ":owner"))
        or name.endswith(
            (
                "delete",
                "create",
                "upload",
                "member_set",
                "member_remove",
                "invite_create",
                "revoke",
                "cancel",
            )
        )
        or name.endswith(("revoke_token",))
        or policy.startswith("comment:")
    )
    for role in (None, *ROLES):
        destructive = name.endswith("delete")
        session = (
            team["new_session"](destructive) if policy.startswith(("session", "run")) else None
        )
        if policy == "link":
            session = team["session"]
        path = _fill(pattern, name, policy, team, session)
        client = Client()
        if role is not None:
            client.force_login(team["users"][role])
        response = client.post(path) if writes else client.get(path)
        want = expected(policy, role)
        got = _verdict(response.status_code)
        if want == "login":
            assert response.status_code == 302, (name, role, response.status_code)
            assert response["Location"].startswith("/accounts/login/"), (name, role)
        elif want == "ok":
            # a redirect elsewhere than the login page is a normal answer (e.g. after a POST)
            assert got in ("ok", "redirect"), (name, path, role, response.status_code)
            if got == "redirect":
                assert not response["Location"].startswith("/accounts/login/"), (name, role)
        else:
            assert got == want, (name, path, role, response.status_code)


def _api_body(operation: str, team, session) -> dict:
    bodies = {
        "create_run": {"session_id": session.pk if session else 0, "mode": "recorded"},
        "create_comparison": {"session_ids": [session.pk] if session else [0], "a": {}, "b": {}},
        "create_sweep": {
            "session_ids": [session.pk] if session else [0],
            "field": "autocompact_pct",
            "values": [80],
        },
        "create_advice": {"session_ids": [session.pk] if session else [0]},
        "create_workspace": {"name": "Another"},
        "add_workspace_member": {"username": "u-nonmember", "role": "viewer"},
        "create_workspace_invite": {"role": "viewer"},
        # the session's own workspace: the gate answers first, then 422 (already there)
        "move_session": {"workspace_id": team["workspace"].pk},
        "create_share": {"session_id": session.pk if session else 0, "expires_in_days": 1},
        "create_comment": {"request": 0, "body": "a comment"},
        "update_comment": {"body": "edited"},
    }
    return bodies.get(operation, {})


@pytest.mark.usefixtures("clean_media")
@pytest.mark.parametrize(("operation", "policy"), sorted(API_POLICIES.items()))
def test_api_operation_answers_each_role_as_its_policy_says(operation, policy, team, client):
    from contextlab.accounts.services import create_api_token

    method, template = next((m, p) for op, m, p in api_operations(client) if op == operation)
    for role in (None, *ROLES):
        destructive = operation.startswith("delete")
        session = team["new_session"](destructive)
        if operation == "revoke_share":
            # a live link per check: revoking twice is still a 204
            team["owned"]["share"].revoked_at = None
            team["owned"]["share"].save()
        kind = policy.split(":")[0]
        ids = {
            "session_id": session.pk if session else 0,
            "run_id": session.runs.first().pk if session else 0,
            "workspace_id": team["workspace"].pk,
            "comparison_id": team["owned"]["comparison"].pk,
            "sweep_id": team["owned"]["sweep"].pk,
            "advice_id": team["owned"]["advice"].pk,
            "username": "u-viewer",
            "share_id": team["owned"]["share"].pk,
            "comment_id": team["new_comment"](destructive).pk,
            "upload_id": team["owned"]["upload"].pk,
            "index": 0,
        }
        url = re.sub(
            r"\{(\w+)\}",
            lambda m, ids=ids: str(ids[m.group(1)]),
            template + API_QUERIES.get(operation, ""),
        )
        headers = {}
        if role is not None:
            token = create_api_token(username=team["users"][role].username)[1]
            headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
        body = _api_body(operation, team, session)
        if method in ("post", "put", "patch"):
            response = getattr(client, method)(
                url, body, content_type="application/json", **headers
            )
        else:
            response = getattr(client, method)(url, **headers)
        want = expected(policy, role)
        if operation in ("create_run", "create_comparison", "create_sweep") and role is not None:
            # creating needs the editor role on the named sessions
            want = "404" if role == "nonmember" else ("403" if role == "viewer" else "ok")
            if operation != "create_run" and role == "viewer":
                want = "404"  # the tuning forms only offer (and accept) sessions you can run
        got = _verdict(response.status_code)
        assert got == want, (operation, kind, role, response.status_code, response.content[:300])


LINK_ROUTES = sorted(name for name, policy in PAGE_POLICIES.items() if policy == "link")


@pytest.mark.usefixtures("clean_media")
@pytest.mark.parametrize("name", LINK_ROUTES)
def test_link_routes_answer_each_link_state(name, team):
    """Link holder 200 (logged out or in, member or not), revoked and expired 410, unknown
    404: the same for the report, the explorer and the block fragments."""
    from datetime import timedelta

    from django.core.cache import cache
    from django.utils import timezone

    from contextlab.sharing import services as sharing

    cache.clear()  # wrong tokens of earlier tests count towards the rate limit
    pattern = dict(all_page_routes())[name]
    owner = team["users"]["owner"]

    def url(token: str) -> str:
        return _fill(pattern, name, "link", {**team, "token": token}, team["session"])

    _, live = sharing.create_share(user=owner, transcript=team["session"])
    revoked, revoked_token = sharing.create_share(user=owner, transcript=team["session"])
    sharing.revoke(revoked)
    expired, expired_token = sharing.create_share(user=owner, transcript=team["session"])
    expired.expires_at = timezone.now() - timedelta(minutes=1)
    expired.save()
    for role in (None, *ROLES):
        client = Client()
        if role is not None:
            client.force_login(team["users"][role])
        assert client.get(url(live)).status_code == 200, (name, role)
        assert client.get(url(revoked_token)).status_code == 410, (name, role)
        assert client.get(url(expired_token)).status_code == 410, (name, role)
        assert client.get(url(sharing.TOKEN_PREFIX + "unknown")).status_code == 404, (name, role)


# --- links to a comparison or a sweep (the same states as a session's link) --------------------


@pytest.mark.usefixtures("clean_media")
@pytest.mark.parametrize("kind", ["comparison", "sweep"])
def test_comparison_and_sweep_links_answer_each_link_state(kind, team):
    """Link holder 200 on /s/<token>/ (logged out or in, member or not), revoked and expired
    410; the request explorer and block fragments of such a link do not exist (404)."""
    from datetime import timedelta

    from django.core.cache import cache
    from django.utils import timezone

    from contextlab.sharing import services as sharing
    from contextlab.sharing import targets

    cache.clear()
    owner = team["users"]["owner"]
    target = team["owned"][kind]
    _, live = targets.create_share(user=owner, target=target)
    revoked, revoked_token = targets.create_share(user=owner, target=target)
    sharing.revoke(revoked)
    expired, expired_token = targets.create_share(user=owner, target=target)
    expired.expires_at = timezone.now() - timedelta(minutes=1)
    expired.save()
    for role in (None, *ROLES):
        client = Client()
        if role is not None:
            client.force_login(team["users"][role])
        assert client.get(f"/s/{live}/").status_code == 200, (kind, role)
        assert client.get(f"/s/{live}/requests/0/").status_code == 404, (kind, role)
        assert client.get(f"/s/{live}/messages/main/0/0/").status_code == 404, (kind, role)
        assert client.get(f"/s/{revoked_token}/").status_code == 410, (kind, role)
        assert client.get(f"/s/{expired_token}/").status_code == 410, (kind, role)
