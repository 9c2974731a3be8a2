"""The browser and page fixtures (defined in test_browser.py) for every module in this folder."""

from tests.browser.test_browser import browser, page  # noqa: F401
