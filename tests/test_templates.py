"""Template sources that Django would render differently from what their author meant."""

from __future__ import annotations

from pathlib import Path

import pytest

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
SOURCES = sorted(TEMPLATES.rglob("*.html"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_no_comment_tag_spans_lines(path: Path) -> None:
    """``{# … #}`` is a one-line comment: one that runs over a line break is printed on the
    page as text (the explorer showed one in every cell). Use ``{% comment %}`` instead."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        rest = line
        while "{#" in rest:
            rest = rest[rest.index("{#") + 2 :]
            assert "#}" in rest, f"{path.name}:{number}: '{{#' without '#}}' on the same line"
            rest = rest[rest.index("#}") + 2 :]


def test_the_check_catches_the_mistake(tmp_path: Path) -> None:
    """The rule above is the reason: Django prints a comment split over two lines."""
    from django.template import engines

    rendered = engines["django"].from_string("{# one\ntwo #}<p>x</p>").render({})
    assert "{# one" in rendered
