"""Screenshots of the pages a user sees, taken in headless Chromium from a running dashboard.

    make run                                   # in one shell: prints the demo login
    .venv/bin/python docs/screenshots.py --password PASSWORD [--out docs/screenshots/new]

It uses the pages as a user would: logs in, opens the sessions list, the report of the demo's
tool-heavy session, its explorer at the first event of the navigator (a compaction when there is
one), the glossary, the tune
page, and runs an A/B comparison (``auto`` against ``autocompact 70 %``) to shoot the
comparison and its per-request view. Every page at 1280 and at 390 px wide. Nothing here is
a test: it is how the pictures in README.md and docs/ are made; look at them.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

WIDTHS = (1280, 390)


def shoot(page: Any, out: Path, name: str, *, full_page: bool = True) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(400)  # charts re-layout on resize
        target = out / f"{name}-{width}.png"
        page.screenshot(path=str(target), full_page=full_page and width == WIDTHS[0])
        print(f"wrote {target}")
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--url", default=os.environ.get("CONTEXTLAB_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--username", default="demo")
    parser.add_argument("--password", required=True)
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    parser.add_argument("--chromium", default=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
    parser.add_argument(
        "--upload", type=Path, help="upload this transcript first (through the page) and use it"
    )
    parser.add_argument(
        "--session", default="tool_heavy", help="the session to shoot: part of its row's text"
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=args.chromium, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_context(base_url=args.url).new_page()
        page.set_default_timeout(60_000)
        page.goto("/accounts/login/")
        shoot(page, args.out, "login")
        page.fill("#id_username", args.username)
        page.fill("#id_password", args.password)
        page.click("button[type=submit]")
        page.wait_for_url("**/sessions/")
        if args.upload:
            page.set_input_files("#upload-input", str(args.upload))
            page.locator(".upload-item").last.locator("text=Open the report").wait_for(
                timeout=600_000
            )
            page.goto("/sessions/")
            args.session = args.upload.name
        shoot(page, args.out, "sessions")

        row = page.locator("tr.session-row", has_text=args.session).first
        if row.count() == 0:
            row = page.locator("tr.session-row").first
        row.locator("a").first.click()
        page.wait_for_url(re.compile(r".*/sessions/\d+/$"))
        session_url = page.url
        page.locator("#chart-context .main-svg").first.wait_for()
        shoot(page, args.out, "report")

        # the explorer at the request with the most events the navigator lists
        page.goto(session_url + "requests/0/")
        page.locator("#explorer").wait_for()
        compactions = page.locator(".event-item.k-compaction a")
        events = compactions if compactions.count() else page.locator(".event-item a")
        if events.count():
            events.first.click()
            page.wait_for_timeout(1500)
        shoot(page, args.out, "explorer")
        # README.md's picture: the first screen of the explorer at that request
        page.set_viewport_size({"width": 1280, "height": 1100})
        page.screenshot(path=str(args.out / "readme-explorer.png"))

        page.goto("/glossary/")
        shoot(page, args.out, "glossary")
        page.goto("/tune/")
        shoot(page, args.out, "tune")

        page.goto(session_url)
        page.click("#compare-configs")
        page.wait_for_url(re.compile(r".*/compare/new/\?session=\d+$"))
        page.select_option("#id_a_config", "preset:auto")
        page.select_option("#id_b_config", "preset:auto")
        page.fill("#id_b_overrides", '{"autocompact_pct_override": 70}')
        page.click("#start-comparison")
        page.wait_for_url(re.compile(r".*/compare/\d+/$"))
        page.locator("#delta-table").wait_for(timeout=900_000)
        page.locator("#chart-context .main-svg").first.wait_for()
        shoot(page, args.out, "compare")
        divergence = page.locator("#first-divergence")
        if divergence.count():
            divergence.click()
            page.wait_for_url(re.compile(r".*/compare/\d+/requests/\d+/.*"))
            # the rows run for thousands of pixels: the first screen says what differs
            shoot(page, args.out, "compare-request", full_page=False)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
