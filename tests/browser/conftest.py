"""What every module in this folder shares: the browser and page fixtures (defined in
test_browser.py), and the marks each of its tests carries, set here once instead of a
``pytestmark`` per module: ``browser`` and ``integration`` (a real Chromium against a live
server and a real worker), a transactional database (the live server's threads must see the
rows a test writes) and ``clean_media`` (no upload left behind)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.test_browser import browser, page  # noqa: F401

HERE = Path(__file__).resolve().parent
MARKS = (
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
)


def pytest_itemcollected(item: pytest.Item) -> None:
    # as each test is collected, so ``-m`` and pytest-django's ordering (transactional tests
    # last, in pytest_collection_modifyitems) see the marks as if the module had set them
    if HERE in item.path.parents:
        for mark in MARKS:
            item.add_marker(mark)


@pytest.fixture(autouse=True)
def _browser_test_cleans_media(clean_media: None) -> None:
    """``clean_media`` for every test here (a ``usefixtures`` mark added after collection would
    not reach the test's fixtures)."""
