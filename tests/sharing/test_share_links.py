"""Share links end to end: a seeded session shared, opened logged out, read-only, redacted
(asserted on the bytes served), counted, revoked and expired."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from contextlab import redaction
from contextlab.jobs import replay as runner
from contextlab.runs.services import session_messages
from contextlab.sharing import services
from contextlab.sharing.models import ShareLink
from contextlab.transcripts import services as transcript_services
from contextlab.transcripts.models import TranscriptMessages
from contextlab.workspaces import services as workspace_services
from tests.sharing.seeded import make_secrets, seeded_transcript

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

SECRETS = make_secrets()
#: the session's name holds an e-mail address too
NAME = "leaky carol.danvers@corp-mail.io.jsonl"


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def seeded(tmp_path, user):
    path = seeded_transcript(tmp_path / "seeded.jsonl", SECRETS)
    with path.open("rb") as fh:
        transcript, _ = transcript_services.create_transcript(owner=user, name=NAME, content=fh)
    runner.execute_run(transcript.runs.get().pk)
    add_seeded_comments(transcript, user)
    return transcript


#: in every seeded comment, to tell the comments are there at all
COMMENT_MARK = "comment-marker-7f3a"


def add_seeded_comments(transcript, user) -> None:
    """Comments holding every secret: as typed, inside Markdown (code, emphasis, a link) and
    behind Markdown escapes that only join the secret up once rendered."""
    from contextlab.comments import services as comments
    from contextlab.workspaces import access

    gated = access.session_for(user, transcript.pk)
    last = comments.request_count(transcript) - 1
    plain = "\n".join(f"{COMMENT_MARK} {s.kind}: {s.text}" for s in SECRETS)
    formatted = "\n\n".join(
        f"{COMMENT_MARK} **{s.kind}** `{s.text}` [link](https://example.com/?k={s.text})"
        for s in SECRETS
    )
    escaped = "\n\n".join(
        f"{COMMENT_MARK} " + s.text.replace("-", "\\-").replace("_", "\\_") for s in SECRETS
    )
    for index, body, block in ((0, plain, ""), (last, formatted, "b-1-0"), (last, escaped, "")):
        comments.create_comment(
            user=user, transcript=gated, request_index=index, body=body, block=block
        )


@pytest.fixture
def shared(seeded, user):
    link, token = services.create_share(user=user, transcript=seeded)
    return link, token


def leaks(body: bytes | str) -> list[str]:
    """The secrets (their random cores) and home paths present in ``body``."""
    text = body.decode() if isinstance(body, bytes) else body
    # the HTML and JSON forms of the same characters
    text = text.replace("&#x27;", "'").replace("&quot;", '"').replace("&amp;", "&")
    text = text.replace("\\u002F", "/").replace("\\/", "/")
    found = [f"{s.kind}: {core}" for s in SECRETS for core in s.cores if core in text]
    found += [m for m in ("/Users/alex", "/Users/quentinmac", "/home/ursulalinux") if m in text]
    return found


def everything_shared(client: Client, token: str, link: ShareLink) -> dict[str, bytes]:
    """Every page and fragment a link serves: the report, every request of the explorer (with
    the replaced history shown, every page of rows) and every block's full text."""
    root = f"/s/{token}/"
    out = {root: client.get(root).content}
    snapshot = link.snapshot.data
    count = len(snapshot["result"]["requests"])
    assert count > 3
    for index in range(count):
        for query in ("", "?replaced=1"):
            url = f"{root}requests/{index}/{query}"
            response = client.get(url)
            assert response.status_code == 200, url
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


def test_the_seed_reaches_every_place_text_appears(seeded):
    """Before sharing, the stored session holds the secrets in prompts, thinking, text, tool
    input and output, the persisted preview, the summary and the name."""
    messages = json.dumps(session_messages(seeded))
    for secret in SECRETS:
        assert secret.cores[0] in messages, secret.kind
    assert "persisted-output" in messages
    assert "carol.danvers" in seeded.name


def test_no_secret_survives_in_anything_a_link_serves(shared, seeded):
    link, token = shared
    anonymous = Client()
    served = everything_shared(anonymous, token, link)
    assert len(served) > 20
    for url, body in served.items():
        assert leaks(body) == [], url
    # the snapshot itself, and what the dialog stored, hold none either
    assert leaks(json.dumps(link.snapshot.data)) == []
    assert leaks(json.dumps(link.findings)) == []
    # ... but the redaction markers are there, by category
    report = served[f"/s/{token}/"].decode()
    assert "[REDACTED:email]" in report  # the session's name
    # the comments are there (redacted), on the report and beside their request
    assert report.count(COMMENT_MARK) >= 3 * len(SECRETS)
    last = len(link.snapshot.data["result"]["requests"]) - 1
    assert COMMENT_MARK in served[f"/s/{token}/requests/{last}/"].decode()
    assert b"[REDACTED:anthropic-key]" in b"".join(served.values())
    categories = {f["category"] for f in link.findings}
    assert len(categories) >= 15, categories
    assert sum(f["count"] for f in link.findings) >= 30


def test_the_original_is_never_changed(shared, seeded):
    stored = json.dumps(TranscriptMessages.objects.get(transcript=seeded).read())
    assert SECRETS[0].cores[0] in stored
    seeded.refresh_from_db()
    assert seeded.name == NAME


def test_the_json_export_is_redacted_by_default(seeded, alice_client):
    response = alice_client.get(f"/api/sessions/{seeded.pk}/export?format=json")
    assert response.status_code == 200
    assert leaks(response.content) == []
    body = response.json()
    assert body["redaction"]["redacted"] is True
    assert body["result"]["requests"]
    assert len(body["comments"]) == 3
    assert COMMENT_MARK in body["comments"][0]["body"]
    raw = alice_client.get(f"/api/sessions/{seeded.pk}/export?format=json&redact=false")
    assert leaks(raw.content) != []
    # unredacted, the comments are as their authors wrote them (escapes and all)
    bodies = [c.body for c in seeded.comments.all()]
    assert [c["body"] for c in raw.json()["comments"]] == bodies


def test_the_html_export_is_self_contained_redacted_and_strict(seeded, alice_client):
    response = alice_client.get(f"/sessions/{seeded.pk}/export.html")
    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    html = response.content.decode()
    api = alice_client.get(f"/api/sessions/{seeded.pk}/export?format=html")
    assert api.status_code == 200
    assert api["Content-Type"].startswith("text/html")
    for body in (html, api.content.decode()):
        assert leaks(body) == []
    assert "[REDACTED:anthropic-key]" in html
    assert html.count(COMMENT_MARK) >= 3 * len(SECRETS)  # the comments, redacted
    # offline: nothing is loaded from anywhere (no src/href to a server), strict CSP by hash
    scripts = re.findall(r"<script\b([^>]*)>", html)
    assert all("src=" not in attrs for attrs in scripts)
    assert not re.search(r"<link\b", html)
    assert "default-src 'none'" in html
    assert "script-src 'sha256-" in html
    # no inline handlers in the markup (the inlined plotly.js code is left out of the check)
    markup = re.sub(r"<script>.*?</script>", "", html, flags=re.S)
    assert not re.search(r"\son[a-z]+\s*=", markup)
    # the last request and every compaction are shown side by side, numbered from 1
    assert 'id="view-' in html
    last = max(int(i) for i in re.findall(r'id="view-(\d+)"', html))
    assert (
        f'<section class="card explorer-body" id="view-{last}">\n  <h2>Request {last + 1} ·' in html
    )
    assert len(response.content) < 10_000_000


def test_shared_pages_are_read_only_and_say_who_shared_and_when_it_expires(shared, user):
    link, token = shared
    served = everything_shared(Client(), token, link)
    for url, body in served.items():
        assert b"<form" not in body, url
        assert b"/runs/" not in body, url  # no what-if, no run pages
        assert b"hx-post" not in body, url
        assert b"hx-delete" not in body, url
        assert b"Delete session" not in body, url
    report = served[f"/s/{token}/"].decode()
    assert f"shared by {user.username}" in report
    assert "expires" in report
    assert "costs are those of the original replay" in report
    explorer = served[f"/s/{token}/requests/0/"].decode()
    assert f"/s/{token}/requests/1/" in explorer  # the explorer stays under the link's path
    # numbered from 1, as the owner's pages are (the address keeps the index)
    assert '<strong id="req-number">1</strong>' in explorer
    assert f'<a href="/s/{token}/requests/0/">1</a>' in report


def test_the_token_is_long_random_shown_once_and_only_its_hash_is_stored(shared):
    link, token = shared
    assert token.startswith(services.TOKEN_PREFIX)
    assert len(token) - len(services.TOKEN_PREFIX) >= 22  # 128 bits in url-safe base64
    assert link.token_hash == services.hash_token(token)
    stored = json.dumps(next(iter(ShareLink.objects.filter(pk=link.pk).values())), default=str)
    assert token not in stored
    assert token[len(services.TOKEN_PREFIX) :] not in stored


def test_shared_pages_are_never_cached(shared):
    _, token = shared
    response = Client().get(f"/s/{token}/")
    assert "no-store" in response["Cache-Control"]


def test_views_are_counted(shared):
    link, token = shared
    client = Client()
    client.get(f"/s/{token}/")
    client.get(f"/s/{token}/requests/0/")
    link.refresh_from_db()
    assert link.views == 2
    assert link.last_viewed_at is not None


def test_revoked_and_expired_links_answer_410_unknown_404(shared, alice_client, user):
    from django.core.cache import cache

    cache.clear()  # wrong tokens of earlier tests count towards the rate limit
    link, token = shared
    assert Client().get(f"/s/{services.TOKEN_PREFIX}wrong/").status_code == 404
    assert Client().get("/s/not-a-token/").status_code == 404
    response = alice_client.post(f"/shares/{link.pk}/revoke/")
    assert response.status_code == 302
    for url in (f"/s/{token}/", f"/s/{token}/requests/0/", f"/s/{token}/messages/main/0/0/"):
        gone = Client().get(url)
        assert gone.status_code == 410, url
        assert b"revoked" in gone.content
    other, token2 = services.create_share(user=user, transcript=link.transcript)
    ShareLink.objects.filter(pk=other.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    gone = Client().get(f"/s/{token2}/")
    assert gone.status_code == 410
    assert b"expired" in gone.content


def test_a_burst_of_wrong_tokens_is_rate_limited(shared, pinned_rate_clock):
    from django.core.cache import cache

    cache.clear()
    _link, token = shared
    client = Client()
    statuses = [client.get(f"/s/{services.TOKEN_PREFIX}guess{i}/").status_code for i in range(40)]
    assert statuses[:30] == [404] * 30
    assert set(statuses[30:]) == {429}
    # the limit never refuses a right token: the link works for everyone, this client included
    assert client.get(f"/s/{token}/").status_code == 200
    assert Client().get(f"/s/{token}/").status_code == 200
    # the limit counts per client: another address still gets its plain 404
    assert Client().get("/s/guess-more/", REMOTE_ADDR="10.9.9.9").status_code == 404


def test_behind_a_proxy_the_wrong_token_limit_counts_each_client(
    shared, settings, pinned_rate_clock
):
    from django.core.cache import cache

    cache.clear()
    settings.CLIENT_ADDRESS_META_KEY = "HTTP_X_FORWARDED_FOR"
    _link, token = shared
    proxy = {"REMOTE_ADDR": "10.0.0.250"}
    for i in range(31):
        Client().get(f"/s/guess{i}/", HTTP_X_FORWARDED_FOR="203.0.113.66", **proxy)
    assert (
        Client().get("/s/guess-x/", HTTP_X_FORWARDED_FOR="203.0.113.66", **proxy).status_code == 429
    )
    # everyone else behind the same proxy: unaffected
    assert (
        Client().get("/s/guess-y/", HTTP_X_FORWARDED_FOR="203.0.113.67", **proxy).status_code == 404
    )
    assert (
        Client().get(f"/s/{token}/", HTTP_X_FORWARDED_FOR="203.0.113.66", **proxy).status_code
        == 200
    )


def test_workspace_links_need_a_member(seeded, user, bob_team):
    team, bob, stranger = bob_team
    seeded.workspace = team
    seeded.save()
    link, token = services.create_share(
        user=user, transcript=seeded, audience="workspace", days=None
    )
    assert link.expires_at is None
    response = Client().get(f"/s/{token}/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    assert login(stranger).get(f"/s/{token}/").status_code == 404
    assert login(bob).get(f"/s/{token}/").status_code == 200
    workspace_services.remove_member(workspace=team, username="bob")
    assert login(bob).get(f"/s/{token}/").status_code == 404


@pytest.fixture
def bob_team(user, django_user_model):
    bob = django_user_model.objects.create_user(username="bob", password="pw-bob-123")
    stranger = django_user_model.objects.create_user(username="zed", password="pw-zed-123")
    team = workspace_services.create_workspace(creator=user, name="Team")
    workspace_services.set_member(workspace=team, username="bob", role="editor")
    return team, bob, stranger


def test_anyone_links_must_expire(seeded, user):
    with pytest.raises(services.ShareError) as error:
        services.create_share(user=user, transcript=seeded, audience="link", days=None)
    assert error.value.field == "expires_in_days"
    with pytest.raises(services.ShareError):
        services.create_share(user=user, transcript=seeded, days=3)


def test_the_dialog_shows_findings_and_keep_keeps_a_category(seeded, alice_client):
    page = alice_client.get(f"/sessions/{seeded.pk}/share/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Anyone with the link" in text
    assert 'data-category="anthropic-key"' in text
    findings = text[text.index('id="share-findings"') :]
    assert leaks(findings) == []  # hints are masked
    response = alice_client.post(
        f"/sessions/{seeded.pk}/share/",
        {"audience": "link", "expires_in_days": "1", "keep": ["email"]},
    )
    assert response.status_code == 201
    url = re.search(r'value="(http[^"]+/s/[^"]+)"', response.content.decode()).group(1)
    token = url.rstrip("/").rsplit("/", 1)[1]
    report = Client().get(f"/s/{token}/").content.decode()
    assert "carol.danvers@corp-mail.io" in report  # kept, as asked
    assert "(kept by the sharer: email)" in report
    assert SECRETS[0].cores[0] not in report


def test_outgoing_bytes_with_a_finding_block_publishing():
    with pytest.raises(services.ShareBlocked):
        services.check_outgoing('{"text": "' + SECRETS[2].text + '"}', keep=[])
    services.check_outgoing('{"text": "' + SECRETS[2].text + '"}', keep=["github-token"])


def test_links_page_lists_own_links_and_owners_see_all(seeded, user, bob_team, shared):
    team, bob, _ = bob_team
    seeded.workspace = team
    seeded.save()
    bobs_link, _ = services.create_share(user=bob, transcript=seeded)
    mine = login(bob).get("/shares/").content.decode()
    assert f'id="link-{bobs_link.pk}"' in mine
    own_link = shared[0]
    assert f'id="link-{own_link.pk}"' not in mine
    # alice owns the team workspace: she sees and can revoke bob's link
    page = login(user).get("/shares/").content.decode()
    assert f'id="link-{bobs_link.pk}"' in page
    assert login(user).post(f"/shares/{bobs_link.pk}/revoke/").status_code == 302
    bobs_link.refresh_from_db()
    assert bobs_link.state == "revoked"
    # bob (editor) cannot revoke alice's link
    assert login(bob).post(f"/shares/{own_link.pk}/revoke/").status_code == 404


def test_share_api(seeded, alice_client):
    response = alice_client.post(
        "/api/shares",
        {"session_id": seeded.pk, "audience": "link", "expires_in_days": 7},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert {f["category"] for f in body["findings"]} >= {"anthropic-key", "email", "home-path"}
    path = body["url"].split("testserver", 1)[1]
    assert Client().get(path).status_code == 200
    listed = alice_client.get("/api/shares").json()
    assert [s["id"] for s in listed] == [body["id"]]
    assert listed[0]["state"] == "live"
    assert alice_client.delete(f"/api/shares/{body['id']}").status_code == 204
    assert Client().get(path).status_code == 410
    bad = alice_client.post(
        "/api/shares",
        {"session_id": seeded.pk, "audience": "link", "expires_in_days": None},
        content_type="application/json",
    )
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"] == ["body", "expires_in_days"]


def test_categories_offered_cover_every_finding(shared):
    link, _ = shared
    assert {f["category"] for f in link.findings} <= set(redaction.categories())


def test_findings_say_which_request_and_block(shared):
    link, _ = shared
    locations = [loc for f in link.findings for loc in f["locations"]]
    assert any(re.fullmatch(r"request \d+ · message \d+, block \d+", loc) for loc in locations)
    emails = next(f for f in link.findings if f["category"] == "email")
    assert "session name" in emails["locations"]


def test_the_shared_explorer_has_the_owners_navigator_and_breakdown(shared, seeded, alice_client):
    """One builder serves both explorers: the link's shows the event navigator, the mini chart
    and the prompt's breakdown too, built from the redacted snapshot (nothing leaks there,
    nor in its changed-rows and htmx answers), with its links under the link's path."""
    link, token = shared
    anonymous = Client()
    count = len(link.snapshot.data["result"]["requests"])
    for index in range(count):
        for query in ("?changed=1", "?replaced=1&changed=1"):
            body = anonymous.get(f"/s/{token}/requests/{index}/{query}").content
            assert leaks(body) == [], (index, query)
        partial = anonymous.get(f"/s/{token}/requests/{index}/", HTTP_HX_REQUEST="true")
        assert b"<html" not in partial.content
        assert leaks(partial.content) == [], index
    shared_page = anonymous.get(f"/s/{token}/requests/{count - 1}/").content.decode()
    owner_page = alice_client.get(f"/sessions/{seeded.pk}/requests/{count - 1}/").content.decode()
    for marker in ('id="navigator"', 'id="breakdown"', 'id="mini-chart"', 'id="stack-bar"'):
        assert marker in shared_page, marker
        assert marker in owner_page, marker
    assert f'href="/s/{token}/requests/{count - 1}/?changed=1"' in shared_page
    assert "/sessions/" not in shared_page


@pytest.mark.parametrize(
    ("audience", "expiry", "days"),
    [
        ("link", {}, 7),  # left out: a link anyone can open must expire
        ("workspace", {}, None),  # left out: no expiry, as the dialog offers
        ("workspace", {"expires_in_days": None}, None),
        ("workspace", {"expires_in_days": 30}, 30),
    ],
)
def test_share_api_expiry_when_left_out_follows_the_audience(
    seeded, alice_client, audience, expiry, days
):
    response = alice_client.post(
        "/api/shares",
        {"session_id": seeded.pk, "audience": audience, **expiry},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    expires_at = response.json()["expires_at"]
    if days is None:
        assert expires_at is None
    else:
        left = datetime.fromisoformat(expires_at) - timezone.now()
        assert timedelta(days=days) - timedelta(minutes=5) < left <= timedelta(days=days)


def test_human_facing_exports_write_dates_as_the_pages_do_machine_ones_keep_iso(
    shared, seeded, alice_client
):
    """The HTML export and the shared report write the session's date (and each comment's) as
    the pages do: ``Y-m-d H:i`` in UTC, then the reader's zone by script (``time.local-time``,
    ISO 8601 in its ``datetime``); never the raw ISO text. The JSON export keeps ISO 8601."""
    _link, token = shared
    when = seeded.when.astimezone(UTC)
    shown = when.strftime("%Y-%m-%d %H:%M") + " UTC"
    iso = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")
    comment = seeded.comments.first().created_at.astimezone(UTC)
    for body in (
        alice_client.get(f"/sessions/{seeded.pk}/export.html").content.decode(),
        Client().get(f"/s/{token}/").content.decode(),
    ):
        date = re.search(r"<dt>Date</dt><dd>(<time [^>]*>)([^<]*)</time></dd>", body)
        assert date is not None
        tag, text = date.groups()
        assert text == shown
        assert 'class="local-time short"' in tag
        stamp = re.search(r'datetime="([^"]+)"', tag)
        assert stamp is not None
        assert datetime.fromisoformat(stamp.group(1)) == when
        # no date of ours written as ISO text (the transcript's own text stays as it is)
        facts = re.search(r'<dl class="facts">.*?</dl>', body, flags=re.S)
        assert facts is not None
        headers = re.findall(r'<header class="small">.*?</header>', body, flags=re.S)
        assert headers
        for ours in (facts.group(0), *headers):
            assert not iso.search(re.sub(r"<[^>]+>", "", ours)), ours
        assert comment.strftime("%Y-%m-%d %H:%M") + " UTC" in body
    exported = alice_client.get(f"/api/sessions/{seeded.pk}/export?format=json").json()
    assert datetime.fromisoformat(exported["session"]["started_at"]) == when
    assert iso.match(exported["session"]["started_at"])
    assert all(iso.match(c["created_at"]) for c in exported["comments"])
