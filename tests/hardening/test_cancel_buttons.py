"""Cancel buttons on the run, comparison and sweep pages: editors see them while work is queued
or running, and the htmx POST stops it (runs end failed, "Cancelled"); viewers get no button
and a 403; a finished run answers that nothing was cancelled. Then the same in Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from contextlab.runs.models import Run
from contextlab.tuning import configs as tuning_configs
from contextlab.tuning import services as tuning
from contextlab.workspaces import services as workspaces
from tests.conftest import flush_broker

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def session(make_transcript: Any, short_jsonl: Path) -> Any:
    return make_transcript(short_jsonl)


def _sweep(user: Any, session: Any) -> Any:
    return tuning.create_sweep(
        owner=user,
        transcripts=[session],
        base=tuning_configs.ConfigSpec(),
        field_name="autocompact_pct_override",
        values="50, 60",
    )


def test_an_editor_cancels_a_queued_run_from_its_page(alice_client: Client, session: Any) -> None:
    run = session.runs.get()
    page = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert f'hx-post="/runs/{run.pk}/cancel/"' in page
    response = alice_client.post(f"/runs/{run.pk}/cancel/", **HTMX)
    assert response.status_code == 204
    assert response["HX-Refresh"] == "true"
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error == "Cancelled by its owner."
    after = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert "Cancelled by its owner." in after
    assert "/cancel/" not in after  # ended: no button
    assert f"Run {run.pk} was cancelled." in after  # the message, on the reloaded page
    again = alice_client.post(f"/runs/{run.pk}/cancel/")
    assert again.status_code == 302
    assert "had already ended" in str(list(get_messages(again.wsgi_request))[-1])


def test_a_viewer_sees_no_cancel_button_and_may_not_cancel(
    django_user_model: Any, user: Any, make_transcript: Any, short_jsonl: Path
) -> None:
    team = workspaces.create_workspace(creator=user, name="Team")
    viewer = django_user_model.objects.create_user(username="vic", password="pw-vic-12345")
    workspaces.set_member(workspace=team, username="vic", role="viewer")
    from contextlab.transcripts import services as transcripts

    with short_jsonl.open("rb") as fh:
        transcript, _ = transcripts.create_transcript(
            owner=user, name="t.jsonl", content=[fh.read()], workspace=team
        )
    run = transcript.runs.get()
    client = Client()
    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/")
    assert page.status_code == 200
    assert "/cancel/" not in page.content.decode()
    assert client.post(f"/runs/{run.pk}/cancel/", **HTMX).status_code == 403
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def test_cancel_a_sweep_and_a_comparison_from_their_pages(
    alice_client: Client, user: Any, session: Any, mallory_client: Client
) -> None:
    sweep = _sweep(user, session)
    page = alice_client.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert f'hx-post="/sweeps/{sweep.pk}/cancel/"' in page
    assert mallory_client.post(f"/sweeps/{sweep.pk}/cancel/").status_code == 404
    response = alice_client.post(f"/sweeps/{sweep.pk}/cancel/", **HTMX)
    assert response.status_code == 204
    runs = [item.run for item in sweep.items.select_related("run")]
    for run in runs:
        run.refresh_from_db()
        assert (run.status, run.error) == ("failed", "Cancelled by its owner (the sweep).")
    after = alice_client.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert "Cancelled 2 runs of" in after
    assert "/cancel/" not in after

    comparison = tuning.create_comparison(
        owner=user,
        transcripts=[session],
        a=tuning_configs.ConfigSpec(preset="aggressive"),
        b=tuning_configs.ConfigSpec(preset="budget-on"),
    )
    other = _sweep(user, session)  # shares nothing with the comparison
    assert alice_client.post(f"/compare/{comparison.pk}/cancel/").status_code == 302
    statuses = {item.run.status for item in comparison.items.select_related("run")}
    assert statuses == {"failed"}
    assert {item.run.status for item in other.items.select_related("run")} == {"queued"}


# --- in Chromium --------------------------------------------------------------------------------


@pytest.fixture
def logged_in_page(live_server: Any, user: Any) -> Iterator[Any]:
    from tests.browser.test_browser import CHROMIUM, CHROMIUM_ARGS

    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium not found at {CHROMIUM}")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    client = Client()
    client.force_login(user)
    cookie = client.cookies["sessionid"].value
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(base_url=live_server.url)
        context.add_cookies([{"name": "sessionid", "value": cookie, "url": live_server.url}])
        page = context.new_page()
        page.set_default_timeout(20_000)
        yield page
        browser.close()


@pytest.mark.browser
@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_the_cancel_buttons_work_in_a_browser(logged_in_page: Any, user: Any, session: Any) -> None:
    flush_broker()  # no worker here: the work stays queued until cancelled
    page = logged_in_page
    run = session.runs.get()
    page.goto(f"/runs/{run.pk}/")
    page.get_by_role("button", name="Cancel run").click()
    page.locator("text=Cancelled by its owner.").wait_for()
    assert page.get_by_role("button", name="Cancel run").count() == 0
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED

    sweep = _sweep(user, session)
    page.goto(f"/sweeps/{sweep.pk}/")
    page.get_by_role("button", name="Cancel sweep").click()
    page.locator("text=Cancelled 2 runs of").wait_for()
    assert {item.run.status for item in sweep.items.select_related("run")} == {"failed"}
