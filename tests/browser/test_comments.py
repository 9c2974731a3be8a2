"""Comments in headless Chromium: an editor comments on a request and on a block in the
explorer, sees the gutter mark and the report's list, edits and deletes; a viewer reads them
and has no form. A screenshot of the explorer's comments goes to the test's temporary folder,
or to SCREENSHOTS_DIR when set (docs/screenshots/comments.png is the committed one)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from contextlab.jobs import replay as runner
from tests.conftest import corpus_file

expect.set_options(timeout=30_000)
PASSWORD = "a-long-pass-42"


def log_in(page: Any, username: str) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/sessions/")


@pytest.fixture
def team_session(django_user_model: Any) -> Any:
    from contextlab.transcripts import services as transcript_services
    from contextlab.workspaces import services

    owner = django_user_model.objects.create_user(username="c-olive", password=PASSWORD)
    for name in ("c-eddie", "c-vera"):
        django_user_model.objects.create_user(username=name, password=PASSWORD)
    workspace = services.create_workspace(creator=owner, name="Team")
    services.set_member(workspace=workspace, username="c-eddie", role="editor")
    services.set_member(workspace=workspace, username="c-vera", role="viewer")
    with corpus_file("marot__spotter__tool_heavy.jsonl").open("rb") as fh:
        session, _ = transcript_services.create_transcript(
            owner=owner, name="team.jsonl", content=fh, workspace=workspace
        )
    run = session.runs.get()
    runner.execute_run(run.pk)
    return session, run


def test_comment_in_the_explorer_see_it_on_the_report_edit_delete_viewer_reads(
    page: Any, browser: Any, live_server: Any, team_session: Any, tmp_path: Path
) -> None:
    session, run = team_session
    log_in(page, "c-eddie")
    explorer = f"/sessions/{session.pk}/requests/3/?run={run.pk}"
    page.goto(explorer)
    expect(page.locator("#no-comments")).to_be_visible()

    # a comment on the whole request; Markdown rendered, raw HTML shown as text
    page.fill("#comment-body", "The cache **missed** here <img src=x onerror=alert(1)>")
    page.click("#comment-submit")
    first = page.locator("#comment-list .comment").first
    expect(first.locator(".comment-body strong")).to_have_text("missed")
    expect(first.locator(".comment-body")).to_contain_text("<img src=x onerror=alert(1)>")
    assert page.locator(".comment-body img").count() == 0

    # a comment on one block: the + in its gutter points the form at it
    row = page.locator("#b-1-0")
    row.hover()
    row.locator(".cm-add").click()
    expect(page.locator("#comment-target")).to_have_text("block b-1-0")
    expect(page.locator("#comment-body")).to_be_focused()
    page.fill(
        "#comment-body",
        "This tool result is what fills the context; see [the glossary](/glossary/).",
    )
    page.click("#comment-submit")
    expect(page.locator("#comment-list .comment")).to_have_count(2)
    expect(page.locator("#cm-b-1-0 .cm-count")).to_have_text("1")
    expect(page.locator("#comments-count")).to_have_text("2")
    # the form is back on the whole request, empty
    expect(page.locator("#comment-target")).to_have_text("the whole request")
    expect(page.locator("#comment-body")).to_have_value("")
    expect(page.locator("tr.commenting")).to_have_count(0)
    assert page.locator("#comment-on-request").is_hidden()

    out = Path(os.environ.get("SCREENSHOTS_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    page.locator("#comments-panel").evaluate(
        "(el) => window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY - 10)"
    )
    page.screenshot(path=str(out / "comments.png"))

    # too long: the message beside the field, the text kept
    page.locator("#comment-body").evaluate("(el) => el.removeAttribute('maxlength')")
    page.fill("#comment-body", "x" * 10_001)
    page.click("#comment-submit")
    expect(page.locator("#comment-body-error")).to_contain_text("at most 10,000 characters")
    expect(page.locator("#comment-body")).to_have_value("x" * 10_001)
    page.fill("#comment-body", "")

    # edit the first comment in place
    first.locator(".comment-edit summary").click()
    first.locator("textarea").fill("The cache *missed* here (edited)")
    first.locator("button", has_text="Save").click()
    expect(first.locator(".comment-body em")).to_have_text("missed")
    expect(first.locator("header")).to_contain_text("(edited)")

    # the report lists both, each linking to its request (and block)
    page.goto(f"/sessions/{session.pk}/")
    listed = page.locator("#report-comments .comment")
    expect(listed).to_have_count(2)
    page.locator("#report-comments").screenshot(path=str(out / "comments-report.png"))
    listed.nth(1).locator("a.comment-where").click()
    page.wait_for_url(re.compile(rf".*/requests/3/\?run={run.pk}#b-1-0$"))
    expect(page.locator("#b-1-0")).to_have_class(re.compile(r"\btarget\b"))

    # delete the block comment: the gutter mark goes with it
    page.evaluate("window.confirm = () => true")
    block_comment = page.locator("#comment-list .comment").nth(1)
    block_comment.locator("button.comment-delete").click()
    expect(page.locator("#comment-list .comment")).to_have_count(1)
    expect(page.locator("#cm-b-1-0 .cm-count")).to_have_count(0)
    expect(page.locator("#comments-count")).to_have_text("1")
    assert page.csp_errors == []

    # a viewer reads the comment, with no form, no + and no edit or delete
    context = browser.new_context(base_url=live_server.url)
    viewer = context.new_page()
    log_in(viewer, "c-vera")
    viewer.goto(explorer)
    expect(viewer.locator("#comment-list .comment")).to_have_count(1)
    expect(viewer.locator("#comment-list .comment-body")).to_contain_text("(edited)")
    assert viewer.locator("#comment-form").count() == 0
    assert viewer.locator(".cm-add").count() == 0
    assert viewer.locator(".comment-edit, .comment-delete").count() == 0
    viewer.goto(f"/sessions/{session.pk}/")
    expect(viewer.locator("#report-comments .comment")).to_have_count(1)
    context.close()

    # a share link made now carries the comment, read-only, to a logged-out reader
    from contextlab.sharing import services as sharing

    _, token = sharing.create_share(user=session.workspace.created_by, transcript=session)
    stranger = browser.new_context(base_url=live_server.url)
    other = stranger.new_page()
    other.goto(f"/s/{token}/")
    expect(other.locator("#shared-comments .comment")).to_have_count(1)
    expect(other.locator("#shared-comments .comment-body em")).to_have_text("missed")
    other.locator("#shared-comments a.comment-where").click()
    other.wait_for_url(re.compile(r".*/s/cls_[^/]+/requests/3/$"))
    expect(other.locator("#comments-request-3 .comment")).to_have_count(1)
    # numbered from 1 on the page, as the owner's explorer says (the address keeps index 3)
    expect(other.locator("#comments-request-3 h2")).to_contain_text("Comments on request 4")
    expect(other.locator("#req-number")).to_have_text("4")
    other.locator("#comments-request-3").screenshot(path=str(out / "comments-shared.png"))
    assert other.locator("form, .cm-add, .comment-edit, .comment-delete").count() == 0
    stranger.close()
