"""The pages' plotly.js: the vendored partial bundle, small, with every trace type we draw."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import plotly.graph_objects as go
from django.contrib.staticfiles import finders

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = "vendor/plotly/plotly-basic.min.js"
CHART_MODULES = [
    ROOT / "contextlab" / "runs" / "charts.py",
    ROOT / "contextlab" / "tuning" / "charts.py",
]
#: issue #12: at most 1.5 MB of JavaScript over the wire on the report page (uncompressed here)
MAX_BUNDLE_BYTES = 1_300_000


def _trace_types_drawn() -> set[str]:
    """Trace types of every ``go.<Trace>(...)`` the chart modules build."""
    types = set()
    for module in CHART_MODULES:
        for node in ast.walk(ast.parse(module.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "go"
                and node.func.attr not in ("Figure",)
            ):
                types.add(getattr(go, node.func.attr)().type)
    return types


def test_the_bundle_is_found_and_small():
    found = finders.find(BUNDLE)
    assert found is not None
    assert Path(found).stat().st_size <= MAX_BUNDLE_BYTES
    assert (Path(found).parent / "LICENSE").read_text().startswith("MIT License")


def test_the_bundle_registers_every_trace_type_the_pages_draw():
    bundle = Path(finders.find(BUNDLE)).read_text()
    registered = set(re.findall(r'moduleType:"trace",name:"(\w+)"', bundle))
    drawn = _trace_types_drawn()
    assert drawn, "no traces found in the chart modules"
    assert drawn <= registered, f"the bundle lacks {sorted(drawn - registered)}"


def test_pages_load_the_bundle_without_blocking_rendering():
    for template in ("runs/report.html", "tuning/comparison.html", "tuning/sweep.html"):
        text = (ROOT / "templates" / template).read_text()
        tags = re.findall(r"<script [^>]*plotly[^>]*>", text)
        assert tags, template
        assert all(" defer" in tag and BUNDLE in tag for tag in tags), tags


def test_unknown_paths_are_not_found():
    assert finders.find("vendor/nothing.js") is None
