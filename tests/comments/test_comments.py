"""Comments: who may write, edit and delete; limits; the explorer, report and API; one query."""

from __future__ import annotations

import re

import pytest
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import Http404
from django.test.utils import CaptureQueriesContext, override_settings

from contextlab.comments import services
from contextlab.comments.models import Comment
from contextlab.workspaces import services as workspace_services

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


def add(team, gated, who="eddie", index=0, body="looks **heavy**", block=""):
    user = team["users"][who]
    return services.create_comment(
        user=user,
        transcript=gated(user, team["session"]),
        request_index=index,
        body=body,
        block=block,
    )


def explorer(team, who, index=3):
    return team["clients"][who].get(f"/sessions/{team['session'].pk}/requests/{index}/")


# --- services: who may ------------------------------------------------------------------------


def test_editors_and_owners_comment_viewers_do_not(team, gated):
    assert add(team, gated, "eddie").author == team["users"]["eddie"]
    assert add(team, gated, "olive", block="b-1-0").block == "b-1-0"
    with pytest.raises(PermissionDenied):
        add(team, gated, "vera")
    with pytest.raises(Http404):
        add(team, gated, "nora")
    assert Comment.objects.count() == 2


def test_authors_edit_their_own_only(team, gated):
    comment = add(team, gated, "eddie")
    edited = services.edit_comment(
        user=team["users"]["eddie"],
        gated=services.comment_for(team["users"]["eddie"], comment.pk),
        body="now *lighter*",
    )
    assert edited.body == "now *lighter*"
    assert edited.edited_at is not None
    for who in ("olive", "vera"):  # an owner moderates by deleting, never rewrites
        with pytest.raises(PermissionDenied):
            services.edit_comment(
                user=team["users"][who],
                gated=services.comment_for(team["users"][who], comment.pk),
                body="x",
            )
    with pytest.raises(Http404):
        services.comment_for(team["users"]["nora"], comment.pk)
    comment.refresh_from_db()
    assert comment.body == "now *lighter*"


def test_authors_and_owners_delete(team, gated):
    mine = add(team, gated, "eddie")
    other = add(team, gated, "eddie")
    with pytest.raises(PermissionDenied):
        services.delete_comment(
            user=team["users"]["vera"], gated=services.comment_for(team["users"]["vera"], mine.pk)
        )
    services.delete_comment(
        user=team["users"]["eddie"], gated=services.comment_for(team["users"]["eddie"], mine.pk)
    )
    services.delete_comment(
        user=team["users"]["olive"], gated=services.comment_for(team["users"]["olive"], other.pk)
    )
    assert Comment.objects.count() == 0  # no soft delete: the rows are gone


def test_losing_membership_ends_access_at_once(team, gated):
    comment = add(team, gated, "eddie")
    workspace_services.remove_member(workspace=team["workspace"], username="eddie")
    with pytest.raises(Http404):
        services.comment_for(team["users"]["eddie"], comment.pk)
    assert explorer(team, "eddie").status_code == 404


def test_a_demoted_author_can_no_longer_edit(team, gated):
    comment = add(team, gated, "eddie")
    workspace_services.set_member(workspace=team["workspace"], username="eddie", role="viewer")
    gate = services.comment_for(team["users"]["eddie"], comment.pk)
    with pytest.raises(PermissionDenied):
        services.edit_comment(user=team["users"]["eddie"], gated=gate, body="x")


# --- services: input --------------------------------------------------------------------------


def test_body_limits_and_control_characters(team, gated):
    comment = add(team, gated, body="a\x00b\x1b[31mc\r\nd\te\x7f\u0085")
    assert comment.body == "ab[31mc\nd\te"
    with pytest.raises(services.CommentError, match="at most 10,000") as exc:
        add(team, gated, body="x" * (services.MAX_BODY + 1))
    assert exc.value.field == "body"
    assert len(add(team, gated, body="x" * services.MAX_BODY).body) == services.MAX_BODY
    with pytest.raises(services.CommentError, match="empty"):
        add(team, gated, body=" \x00\n ")


def test_requests_and_blocks_must_exist(team, gated):
    count = services.request_count(team["session"])
    assert count > 1
    add(team, gated, index=count - 1)
    with pytest.raises(services.CommentError, match="does not exist") as exc:
        add(team, gated, index=count)
    assert exc.value.field == "request"
    for block in ("b-1", "x-1-0", "b-1-0 x", "<b>", "b-" + "1" * 20 + "-0"):
        with pytest.raises(services.CommentError) as exc:
            add(team, gated, block=block)
        assert exc.value.field == "block"
    assert add(team, gated, block="b-s-2").block == "b-s-2"


# --- pages -------------------------------------------------------------------------------------


def post_comment(team, who, index=3, htmx=True, **data):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    return team["clients"][who].post(
        f"/sessions/{team['session'].pk}/requests/{index}/comments/",
        {"body": "hello", "from": "explorer", **data},
        **headers,
    )


def test_explorer_form_adds_a_comment_and_the_gutter_shows_it(team):
    page = explorer(team, "eddie").content.decode()
    assert "{#" not in page  # no template comment shows (a {# #} spans one line only)
    assert 'id="comment-form"' in page
    assert page.count('class="cm-add"') > 0
    response = post_comment(team, "eddie", body="see **this** block", block="b-1-0")
    assert response.status_code == 201
    html = response.content.decode()
    assert "<strong>this</strong>" in html
    # the block's gutter mark, out of band
    assert re.search(
        r'<span class="cmark" id="cm-b-1-0" hx-swap-oob="true"><a class="cm-count"[^>]*>1</a>', html
    )
    page = explorer(team, "eddie").content.decode()
    assert re.search(r'id="cm-b-1-0"><a class="cm-count"[^>]*>1</a>', page)
    assert "see <strong>this</strong> block" in page


def test_a_viewer_sees_comments_but_no_form(team, gated):
    add(team, gated, "eddie", index=3, body="visible to *all* members", block="b-1-0")
    page = explorer(team, "vera").content.decode()
    assert "visible to <em>all</em> members" in page
    assert 'id="comment-form"' not in page
    assert 'class="cm-add"' not in page
    assert re.search(r'id="cm-b-1-0"><a class="cm-count"[^>]*>1</a></span>', page)
    assert "comment-delete" not in page
    assert "comment-edit" not in page
    assert post_comment(team, "vera").status_code == 403
    assert post_comment(team, "nora").status_code == 404
    report = team["clients"]["vera"].get(f"/sessions/{team['session'].pk}/").content.decode()
    assert "visible to <em>all</em> members" in report


def test_script_in_a_comment_is_text_on_every_page(team, gated):
    payload = '<script>alert("x")</script><img src=x onerror=alert(1)>[a](javascript:alert(1))'
    add(team, gated, "eddie", index=3, body=payload, block="b-1-0")
    pk = team["session"].pk
    pages = [
        explorer(team, "vera").content.decode(),
        team["clients"]["vera"].get(f"/sessions/{pk}/").content.decode(),
    ]
    for page in pages:
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
        assert '<script>alert("x")' not in page
        assert "<img src=x" not in page
        assert 'href="javascript:' not in page


def test_bad_input_answers_422_beside_the_field_and_keeps_the_text(team):
    response = post_comment(team, "eddie", body="y" * (services.MAX_BODY + 5))
    assert response.status_code == 422
    html = response.content.decode()
    assert 'id="comment-body-error"' in html
    assert "at most 10,000" in html
    assert "y" * 100 in html  # what was typed is not lost
    response = post_comment(team, "eddie", block="nope")
    assert response.status_code == 422
    assert 'id="comment-block-error"' in response.content.decode()
    assert Comment.objects.count() == 0


def test_without_htmx_the_form_redirects_to_the_comment(team):
    response = post_comment(team, "eddie", htmx=False)
    assert response.status_code == 302
    comment = Comment.objects.get()
    assert response["Location"].endswith(f"/requests/3/#c-{comment.pk}")


def test_edit_and_delete_pages(team, gated):
    comment = add(team, gated, "eddie", block="b-1-0")
    edit = f"/comments/{comment.pk}/edit/"
    hx = {"HTTP_HX_REQUEST": "true"}
    assert team["clients"]["olive"].post(edit, {"body": "x"}, **hx).status_code == 403
    assert team["clients"]["vera"].post(edit, {"body": "x"}, **hx).status_code == 403
    assert team["clients"]["nora"].post(edit, {"body": "x"}, **hx).status_code == 404
    response = team["clients"]["eddie"].post(edit, {"body": "[link](javascript:alert(1))"}, **hx)
    assert response.status_code == 200
    assert "javascript:" not in re.sub(
        r"<textarea.*?</textarea>", "", response.content.decode(), flags=re.S
    ).replace("[link](javascript:alert(1))", "")
    assert "(edited)" in response.content.decode()
    response = team["clients"]["eddie"].post(edit, {"body": ""}, **hx)
    assert response.status_code == 422
    assert "empty" in response.content.decode()
    comment.refresh_from_db()
    assert comment.body == "[link](javascript:alert(1))"
    delete = f"/comments/{comment.pk}/delete/"
    assert team["clients"]["vera"].post(delete, **hx).status_code == 403
    response = team["clients"]["eddie"].post(delete, {"from": "explorer"}, **hx)
    assert response.status_code == 200
    assert 'id="cm-b-1-0" hx-swap-oob="true"' in response.content.decode()
    assert "cm-count" not in response.content.decode()
    assert not Comment.objects.exists()
    assert team["clients"]["eddie"].post(delete, **hx).status_code == 404


def test_owner_deletes_anyones_comment_from_the_report(team, gated):
    comment = add(team, gated, "eddie")
    report = team["clients"]["olive"].get(f"/sessions/{team['session'].pk}/").content.decode()
    assert f'action="/comments/{comment.pk}/delete/"' in report
    assert f'action="/comments/{comment.pk}/edit/"' not in report  # not hers to rewrite
    assert team["clients"]["olive"].post(f"/comments/{comment.pk}/delete/").status_code == 302
    assert not Comment.objects.exists()


def test_report_lists_every_comment_linking_to_its_request(team, gated):
    add(team, gated, "eddie", index=0, body="first")
    add(team, gated, "olive", index=2, body="third", block="b-1-0")
    run = team["session"].runs.get()
    report = team["clients"]["vera"].get(f"/sessions/{team['session'].pk}/").content.decode()
    section = report[report.index('id="report-comments"') :]
    assert section.index("first") < section.index("third")
    pk = team["session"].pk
    assert f'href="/sessions/{pk}/requests/2/?run={run.pk}#b-1-0"' in section
    assert f'href="/sessions/{pk}/requests/0/?run={run.pk}"' in section


@override_settings(COMMENT_RATE="2/m")
@pytest.mark.usefixtures("pinned_rate_clock")
def test_comments_are_rate_limited(team):
    from django.core.cache import cache

    cache.clear()
    assert post_comment(team, "eddie").status_code == 201
    assert post_comment(team, "eddie").status_code == 201
    response = post_comment(team, "eddie")
    assert response.status_code == 429
    assert "Too many comments" in response.content.decode()
    assert Comment.objects.count() == 2
    # the API counts with the pages
    api = team["clients"]["eddie"].post(
        f"/api/sessions/{team['session'].pk}/comments",
        {"request": 0, "body": "x"},
        content_type="application/json",
        **token_header(team["users"]["eddie"]),
    )
    assert api.status_code == 429
    assert "Too many comments" in api.json()["detail"]


def test_explorer_reads_comments_in_one_query(team, gated):
    for i in range(5):
        add(team, gated, "eddie", block=f"b-{i}-0")
    client = team["clients"]["eddie"]
    url = f"/sessions/{team['session'].pk}/requests/3/"
    client.get(url)  # warm the caches the explorer keeps
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    comment_queries = [q for q in queries if "comments_comment" in q["sql"]]
    assert len(comment_queries) == 1, [q["sql"] for q in comment_queries]


def test_report_reads_comments_in_one_query(team, gated):
    for i in range(4):
        add(team, gated, "eddie", index=i, block=f"b-{i}-0")
    client = team["clients"]["olive"]
    url = f"/sessions/{team['session'].pk}/"
    client.get(url)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(url).content.decode()
    assert page.count('class="comment"') == 4
    assert len([q for q in queries if "comments_comment" in q["sql"]]) == 1


def test_share_findings_say_which_comment(team, gated):
    from contextlab.sharing import services as sharing

    add(team, gated, "eddie", index=2, block="b-1-0", body="mail me: carol.danvers@corp-mail.io")
    findings = sharing.preview_findings(team["session"])
    email = next(f for f in findings if f["category"] == "email")
    # index 2 is request 3: the dialog numbers requests from 1, as the pages do, and names the
    # row (anchor b-1-0) by its message and block, also from 1, never by its anchor
    assert "comment on request 3, message 2, block 1" in email["locations"]


# --- API ---------------------------------------------------------------------------------------


def token_header(user):
    from contextlab.accounts.services import create_api_token

    return {"HTTP_AUTHORIZATION": f"Bearer {create_api_token(username=user.username)[1]}"}


def test_api_create_list_edit_delete(team, client):
    eddie = token_header(team["users"]["eddie"])
    url = f"/api/sessions/{team['session'].pk}/comments"
    response = client.post(
        url,
        {"request": 1, "block": "b-1-0", "body": "<script>x</script> **ok**"},
        content_type="application/json",
        **eddie,
    )
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["author"] == "eddie"
    assert created["request"] == 1
    assert created["request_number"] == 2  # the page's number, from 1
    assert "<script>" not in created["html"]
    assert "<strong>ok</strong>" in created["html"]
    listed = client.get(url, **token_header(team["users"]["vera"])).json()
    assert [c["id"] for c in listed] == [created["id"]]
    assert client.get(url + "?request_index=0", **eddie).json() == []
    one = f"/api/comments/{created['id']}"
    vera = token_header(team["users"]["vera"])
    assert (
        client.patch(one, {"body": "x"}, content_type="application/json", **vera).status_code == 403
    )
    response = client.patch(one, {"body": "edited"}, content_type="application/json", **eddie)
    assert response.status_code == 200
    assert response.json()["edited_at"]
    bad = client.patch(one, {"body": "z" * 10_001}, content_type="application/json", **eddie)
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"] == ["body", "body"]
    nora = token_header(team["users"]["nora"])
    assert client.delete(one, **nora).status_code == 404
    assert client.delete(one, **vera).status_code == 403
    assert client.delete(one, **token_header(team["users"]["olive"])).status_code == 204
    assert client.get(url, **eddie).json() == []


def test_api_refuses_what_pages_refuse(team, client):
    url = f"/api/sessions/{team['session'].pk}/comments"
    vera = token_header(team["users"]["vera"])
    body = {"request": 0, "body": "hi"}
    assert client.post(url, body, content_type="application/json", **vera).status_code == 403
    nora = token_header(team["users"]["nora"])
    assert client.post(url, body, content_type="application/json", **nora).status_code == 404
    assert client.get(url, **nora).status_code == 404
    eddie = token_header(team["users"]["eddie"])
    far = {"request": 10_000, "body": "hi"}
    response = client.post(url, far, content_type="application/json", **eddie)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "request"]
    assert "/api/sessions/{session_id}/comments" in client.get("/api/openapi.json").json()["paths"]
