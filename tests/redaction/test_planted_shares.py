"""The planted corpus end to end: a session written from scratch carries secrets of every kind
in every place the product shows text; it is shared (and its comparison and sweep, named after
configs and a workspace that hold secrets too) by a user whose username is an e-mail address.
Every byte a logged-out visitor can reach from the links, and both exports, are read: no
secret may be visible, not even 12 characters of one. Values are random on every run; the seed
is printed on failure (``CONTEXTLAB_REDACTION_SEED`` reproduces it)."""

from __future__ import annotations

import pytest
from django.test import Client

from contextlab.jobs import replay
from contextlab.runs.models import Run
from contextlab.sharing import services, targets
from contextlab.transcripts import services as transcript_services
from contextlab.tuning import services as tuning
from contextlab.workspaces import services as workspace_services
from tests.redaction import planted as p

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media"), pytest.mark.slow]

PLANTED = p.make_planted()
WANTED = p.pieces(PLANTED)


@pytest.fixture
def sharer(django_user_model):
    """A user whose username is a (planted) e-mail address, with no first or last name."""
    email = p.by_kind(PLANTED)["email"]
    return django_user_model.objects.create_user(username=email.text, password="pw-sharer-123")


@pytest.fixture
def planted_world(tmp_path, sharer):
    """The planted session in a workspace named with a secret, replayed, with comments holding
    every secret, and a comparison and a sweep of configs named with secrets."""
    from contextlab.comments import services as comments
    from contextlab.workspaces import access

    workspace = workspace_services.create_workspace(
        creator=sharer, name=f"team {p.short(PLANTED, 2).text}"[:100]
    )
    path = p.planted_session(tmp_path / "planted.jsonl", PLANTED)
    with path.open("rb") as fh:
        transcript, _ = transcript_services.create_transcript(
            owner=sharer,
            name=f"deploy {p.short(PLANTED, 0).text}.jsonl",
            content=fh,
            workspace=workspace,
        )
    replay.execute_run(transcript.runs.get().pk)
    gated = access.session_for(sharer, transcript.pk)
    # a comment holds at most 10,000 characters: as many comments as that takes
    lines = [f"{item.kind}: {item.text}" for item in PLANTED]
    chunk: list[str] = []
    for line in [*lines, ""]:
        if not line or sum(len(x) + 1 for x in chunk) + len(line) > 9_000:
            comments.create_comment(
                user=sharer, transcript=gated, request_index=0, body="\n".join(chunk), block=""
            )
            chunk = []
        if line:
            chunk.append(line)
    configs = [
        tuning.save_config(
            owner=sharer,
            name=f"cfg {p.short(PLANTED, i).text}"[:100],
            preset="auto",
            overrides={"autocompact_pct_override": 10 * (i + 1)},
            workspace=workspace,
        )
        for i in (3, 4)
    ]
    comparison = tuning.create_comparison(
        owner=sharer,
        transcripts=[transcript],
        a=tuning.ConfigSpec(version=configs[0]),
        b=tuning.ConfigSpec(version=configs[1]),
        workspace=workspace,
    )
    sweep = tuning.create_sweep(
        owner=sharer,
        transcripts=[transcript],
        base=tuning.ConfigSpec(version=configs[0]),
        field_name="autocompact_pct_override",
        values=[20, 80],
        workspace=workspace,
    )
    for pk in Run.objects.filter(status=Run.Status.QUEUED).values_list("pk", flat=True):
        replay.execute_run(pk)
    return transcript, comparison, sweep


def _served(client: Client, token: str, snapshot: dict) -> dict[str, bytes]:
    """Every page and fragment a session link serves."""
    root = f"/s/{token}/"
    out = {root: client.get(root).content}
    for index in range(len(snapshot["result"]["requests"])):
        for query in ("", "?replaced=1"):
            url = f"{root}requests/{index}/{query}"
            response = client.get(url)
            assert response.status_code == 200, (url, p.seed_note(), response.content[-2000:])
            out[url] = response.content
    for thread, messages in snapshot["messages"].items():
        for m, message in enumerate(messages):
            for b in range(len(message.get("blocks") or [])):
                url = f"{root}messages/{thread}/{m}/{b}/"
                out[url] = client.get(url).content
            if message.get("original_output") is not None:
                url = f"{root}messages/{thread}/{m}/0/?original=1"
                out[url] = client.get(url).content
    return out


def test_the_planted_session_carries_every_kind_everywhere(planted_world):
    transcript, _, _ = planted_world
    from contextlab.runs.services import session_messages

    stored = str(session_messages(transcript))
    missing = [item.kind for item in PLANTED if item.cores[0] not in stored]
    assert missing == [], p.seed_note()
    assert len(p.kinds(PLANTED)) >= 100


def test_no_planted_secret_reaches_a_shared_byte_or_an_export(planted_world, sharer):
    transcript, comparison, sweep = planted_world
    anonymous = Client()
    leaks: dict[str, dict[str, str]] = {}

    link, token = services.create_share(user=sharer, transcript=transcript)
    served = _served(anonymous, token, link.snapshot.data)
    assert len(served) > 20
    for target in (comparison, sweep):
        _, target_token = targets.create_share(user=sharer, target=target)
        url = f"/s/{target_token}/"
        response = anonymous.get(url)
        assert response.status_code == 200, (url, p.seed_note(), response.content[-2000:])
        served[url] = response.content
    owner = Client()
    owner.force_login(sharer)
    for url in (
        f"/sessions/{transcript.pk}/export.html",
        f"/api/sessions/{transcript.pk}/export?format=json",
        f"/api/sessions/{transcript.pk}/export?format=html",
    ):
        response = owner.get(url)
        assert response.status_code == 200, (url, p.seed_note(), response.content[-2000:])
        served[url] = response.content
    for url, body in served.items():
        found = p.find_leaks(body, WANTED)
        if found:
            leaks[url] = found
    assert leaks == {}, p.leak_report(leaks)
    # the banner names the sharer without their address
    report = served[f"/s/{token}/"].decode()
    assert "shared by " in report
    assert sharer.username not in report


def test_home_folders_are_not_announced_as_secrets(planted_world, sharer):
    transcript, _, _ = planted_world
    findings = services.preview_findings(transcript)
    kinds = {f["category"]: f["kind"] for f in findings}
    assert kinds.get("home-path") == "home folder", findings
    assert all(
        kind == "secret"
        for category, kind in kinds.items()
        if category not in ("home-path", "email")
    )
