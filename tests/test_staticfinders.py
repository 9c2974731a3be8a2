"""plotly.js is served from the installed plotly package, never from a CDN or a copy."""

from __future__ import annotations

from pathlib import Path

import plotly
from django.contrib.staticfiles import finders


def test_plotly_bundle_comes_from_the_package():
    found = finders.find("vendor/plotly.min.js")
    assert found == str(Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js")


def test_unknown_paths_are_not_found():
    assert finders.find("vendor/nothing.js") is None
