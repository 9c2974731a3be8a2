"""Browser fixtures: Debian's Chromium, headless, driven by Playwright (never `playwright install`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.conftest import require_services

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_services()
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: apt-get install -y chromium", pytrace=False)
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are safe.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, live_server: Any, celery_worker_process: Any) -> Iterator[Any]:
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": 1400, "height": 1000}
    )
    page = context.new_page()
    page.set_default_timeout(30_000)
    # the machine may be shared and slow: expect() waits as long as the page's own calls
    expect.set_options(timeout=30_000)
    page.csp_errors = []
    page.dialogs = []
    page.on(
        "console",
        lambda msg: (
            page.csp_errors.append(msg.text) if "Content Security Policy" in msg.text else None
        ),
    )
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    yield page
    context.close()


def sign_up(page: Any, username: str = "browser-user") -> None:
    page.goto("/accounts/signup/")
    page.fill("#id_username", username)
    page.fill("#id_password1", "a-long-pass-42")
    page.fill("#id_password2", "a-long-pass-42")
    page.click("button[type=submit]")
    page.wait_for_url("**/sessions/")
