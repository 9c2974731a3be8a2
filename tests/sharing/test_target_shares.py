"""Share links of a comparison and of a sweep: the dialog (audience, expiry, findings by
category), the API, the read-only shared page (tables and charts, no forms) with every text
redacted (session names, config names, chart titles), 410 once revoked or expired, listed on
the Shared links page."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from contextlab.jobs import replay as runner
from contextlab.runs.models import Run
from contextlab.sharing import services, targets
from contextlab.sharing.models import ShareLink
from contextlab.transcripts import services as transcript_services
from contextlab.tuning import configs as tuning_configs
from contextlab.tuning import services as tuning
from contextlab.workspaces import services as workspace_services
from tests.sharing.seeded import make_secrets
from tests.tuning.conftest import EARLY

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

SECRETS = {s.kind: s for s in make_secrets()}
#: secrets in the texts a comparison or sweep page shows: the session's name, config names
SESSION_NAME = f"deploy {SECRETS['email'].text} {SECRETS['aws-access-key'].text}.jsonl"
CONFIG_NAME = f"early {SECRETS['github-token'].text}"
BASE_NAME = f"base {SECRETS['stripe-key'].text}"
CORES = [
    core
    for kind in ("email", "aws-access-key", "github-token", "stripe-key")
    for core in SECRETS[kind].cores
]


def finish_all() -> None:
    for pk in Run.objects.filter(status=Run.Status.QUEUED).values_list("pk", flat=True):
        runner.execute_run(pk)


def leaks(body: bytes) -> list[str]:
    text = body.decode().replace("&#x27;", "'").replace("&quot;", '"').replace("&amp;", "&")
    text = text.replace("\\u0040", "@").replace("\\u002F", "/")
    return [core for core in CORES if core in text]


@pytest.fixture
def session(user, short_jsonl):
    with short_jsonl.open("rb") as fh:
        transcript, _ = transcript_services.create_transcript(
            owner=user, name=SESSION_NAME, content=fh
        )
    return transcript


@pytest.fixture
def comparison(user, session):
    version = tuning.save_config(owner=user, name=CONFIG_NAME, preset="auto", overrides=EARLY)
    comparison = tuning.create_comparison(
        owner=user,
        transcripts=[session],
        a=tuning_configs.ConfigSpec(),
        b=tuning_configs.config_spec(owner=user, version_id=version.pk),
    )
    finish_all()
    return comparison


@pytest.fixture
def sweep(user, session):
    version = tuning.save_config(owner=user, name=BASE_NAME, preset="auto", overrides={})
    sweep = tuning.create_sweep(
        owner=user,
        transcripts=[session],
        base=tuning_configs.config_spec(owner=user, version_id=version.pk),
        field_name="autocompact_pct_override",
        values=[40, 80],
    )
    finish_all()
    return sweep


def test_the_owners_pages_hold_the_seeded_texts(alice_client, comparison, sweep):
    # the seed reaches the pages being shared: otherwise the redaction tests prove nothing
    assert leaks(alice_client.get(comparison.get_absolute_url()).content)
    assert leaks(alice_client.get(sweep.get_absolute_url()).content)


@pytest.mark.parametrize("kind", ["comparison", "sweep"])
def test_shared_page_is_read_only_redacted_and_has_the_tables_and_charts(
    kind, request, alice_client
):
    target = request.getfixturevalue(kind)
    page = alice_client.get(target.get_absolute_url()).content.decode()
    assert 'id="share-button"' in page
    dialog = alice_client.get(f"{target.get_absolute_url()}share/")
    assert dialog.status_code == 200
    body = dialog.content.decode()
    assert "Anyone with the link" in body
    found = set(re.findall(r'data-category="([\w-]+)"', body))
    assert {"email", "aws-access-key"} <= found
    assert not leaks(dialog.content)  # hints are masked, never the value
    created = alice_client.post(
        f"{target.get_absolute_url()}share/", {"audience": "link", "expires_in_days": "7"}
    )
    assert created.status_code == 201, created.content[:500]
    url = re.search(r'id="share-url" value="([^"]+)"', created.content.decode()).group(1)
    path = url.split("testserver", 1)[1]
    response = Client().get(path)  # logged out
    assert response.status_code == 200
    assert not leaks(response.content), leaks(response.content)
    html = response.content.decode()
    assert "[REDACTED:" in html
    assert "<form" not in html
    assert f"Read-only shared {kind}" in html
    assert "shared by alice" in html
    if kind == "comparison":
        assert 'id="delta-table"' in html
        assert 'id="session-deltas"' in html
        assert html.count('class="chart"') == 3
        # the owner's order of the charts (jsonb keeps no key order: they are stored as a list)
        order = [html.index(f'data-chart="chart-{c}-data-0"') for c in ("context", "cache", "cost")]
        assert order == sorted(order)
    else:
        assert 'id="sweep-table"' in html
        assert html.count("<tr data-value=") == 2
        assert 'id="chart-sweep-data"' in html
    link = ShareLink.objects.get()
    assert link.kind == kind
    assert link.views == 1


@pytest.mark.parametrize("kind", ["comparison", "sweep"])
def test_api_lists_and_revokes_and_the_link_then_answers_410(kind, request, alice_client):
    target = request.getfixturevalue(kind)
    response = alice_client.post(
        "/api/shares",
        {f"{kind}_id": target.pk, "audience": "link", "expires_in_days": 1},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert {f["category"] for f in body["findings"]} >= {"email", "aws-access-key"}
    path = body["url"].split("testserver", 1)[1]
    assert Client().get(path).status_code == 200
    listed = alice_client.get("/api/shares").json()
    assert [(s["kind"], s[f"{kind}_id"], s["session_id"]) for s in listed] == [
        (kind, target.pk, None)
    ]
    links_page = alice_client.get("/shares/").content.decode()
    assert f"{kind} #{target.pk}" in links_page
    assert alice_client.delete(f"/api/shares/{body['id']}").status_code == 204
    gone = Client().get(path)
    assert gone.status_code == 410
    assert "revoked" in gone.content.decode()


def test_expired_target_links_answer_410(user, comparison):
    link, token = targets.create_share(user=user, target=comparison)
    link.expires_at = timezone.now() - timedelta(seconds=1)
    link.save()
    assert Client().get(f"/s/{token}/").status_code == 410


def test_the_api_needs_exactly_one_target(alice_client, comparison, session):
    for body in ({}, {"session_id": session.pk, "comparison_id": comparison.pk}):
        response = alice_client.post("/api/shares", body, content_type="application/json")
        assert response.status_code == 422, body
    assert not ShareLink.objects.exists()


def test_keep_keeps_a_category_in_the_shared_page(user, comparison):
    link, token = targets.create_share(user=user, target=comparison, keep=["aws-access-key"])
    html = Client().get(f"/s/{token}/").content
    assert SECRETS["aws-access-key"].cores[0] in html.decode()
    assert SECRETS["github-token"].cores[0] not in html.decode()
    assert link.kept == ["aws-access-key"]


def test_unfinished_comparisons_cannot_be_shared(user, session, alice_client):
    pending = tuning.create_comparison(
        owner=user,
        transcripts=[session],
        a=tuning_configs.ConfigSpec(),
        b=tuning_configs.ConfigSpec(overrides={"autocompact_pct_override": 33}),
    )
    with pytest.raises(services.ShareError, match="share it when its replays are done"):
        targets.create_share(user=user, target=pending)
    dialog = alice_client.get(f"{pending.get_absolute_url()}share/").content.decode()
    assert "are not all done" in dialog


def test_viewers_cannot_share_nonmembers_get_404(user, comparison, django_user_model):
    team = workspace_services.create_workspace(creator=user, name="Team")
    comparison.workspace = team
    comparison.save()
    vera = django_user_model.objects.create_user(username="vera", password="pw-123-xyz")
    workspace_services.set_member(workspace=team, username="vera", role="viewer")
    nina = django_user_model.objects.create_user(username="nina", password="pw-123-xyz")
    for who, status in ((vera, 403), (nina, 404)):
        client = Client()
        client.force_login(who)
        assert client.get(f"{comparison.get_absolute_url()}share/").status_code == status
        response = client.post(
            "/api/shares", {"comparison_id": comparison.pk}, content_type="application/json"
        )
        assert response.status_code == status
    assert not ShareLink.objects.exists()


def test_workspace_owners_see_and_revoke_links_of_the_workspace(
    user, comparison, django_user_model
):
    team = workspace_services.create_workspace(creator=user, name="Team")
    eddie = django_user_model.objects.create_user(username="eddie", password="pw-123-xyz")
    workspace_services.set_member(workspace=team, username="eddie", role="editor")
    comparison.workspace = team
    comparison.save()
    link, _ = targets.create_share(user=eddie, target=comparison)
    assert link.workspace == team
    assert list(services.visible_links(user)) == [link]  # alice owns Team
