"""The explorer's cells come from ``{% explorer_cell %}``, which renders ``runs/_cell.html`` once
per distinct cell and reuses it: every cell must be exactly what including the template in the
page's context gives, on the owner's explorer and on a share link's (``block_prefix``)."""

from __future__ import annotations

import pytest
from django.template import Context, Template

from contextlab.jobs import replay as runner
from contextlab.runs import explorer as explorer_builder
from contextlab.runs import report as report_parts
from contextlab.runs import services
from contextlab.runs.templatetags import explorer_cells

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

INCLUDED = Template('{% include "runs/_cell.html" with cell=cell is_open=is_open %}')
TAGGED = Template("{% load explorer_cells %}{% explorer_cell cell is_open %}")


@pytest.fixture
def done_transcript(make_transcript, tool_heavy_jsonl):
    transcript = make_transcript(tool_heavy_jsonl)
    runner.execute_run(transcript.runs.get().pk)
    return transcript


def _pages(transcript):
    run = transcript.runs.get()
    data = services.result_data(run)
    count = len(data["requests"])
    for index in sorted({0, count // 2, count - 1}):
        yield explorer_builder.build(
            data,
            services.session_messages(transcript),
            index,
            flags=explorer_builder.Flags(show_replaced=True),
            request_url=report_parts.request_url_factory(transcript, run),
            cache_key=None,
        )


@pytest.mark.parametrize("shared", [False, True])
def test_every_cell_is_what_the_included_template_gives(done_transcript, shared):
    explorer_cells._RENDERED.clear()
    transcript = {"pk": None, "name": "x"} if shared else done_transcript
    prefix = "/s/token/messages/" if shared else ""
    compared = folded = 0
    for page in _pages(done_transcript):
        for row in page["rows"]:
            for side, is_open in (("repl", row["repl_open"]), ("model", True)):
                cell = row.get(side)
                if not cell:
                    continue
                context = {
                    **page,
                    "transcript": transcript,
                    "block_prefix": prefix,
                    "row": row,
                    "cell": cell,
                    "is_open": is_open,
                }
                expected = INCLUDED.render(Context(context))
                first = TAGGED.render(Context(context))  # rendered, then kept
                again = TAGGED.render(Context(context))  # from the cache
                assert first == again == expected, (side, row["anchor"])
                compared += 1
                folded += bool(cell["fold"]["rest"])
    assert compared > 20
    assert folded, "a folded cell (its load link) was compared"
    assert explorer_cells._RENDERED, "cells were kept"


def test_a_kept_cell_is_not_reused_for_another_block(done_transcript):
    """Two cells differing only in their block (the load link's address) are two entries."""
    explorer_cells._RENDERED.clear()
    page = next(_pages(done_transcript))
    row = next(r for r in page["rows"] if r.get("repl"))
    base = {**page, "transcript": done_transcript, "cell": row["repl"], "is_open": False}
    cell = {**row["repl"], "fold": {"head": "same text", "rest": 10}}
    one = TAGGED.render(Context({**base, "cell": cell, "row": {**row, "block": 0}}))
    two = TAGGED.render(Context({**base, "cell": cell, "row": {**row, "block": 1}}))
    assert one != two
    assert "/0/" in one
    assert "/1/" in two


def test_every_part_of_a_prompt_has_its_colour():
    """Each kind the composition names (``engine.results.composition.ORDER``) gets a class the
    stylesheet colours: a renamed kind without its rule would draw an uncoloured bar."""
    from contextlab.engine.results.composition import ORDER
    from tests.conftest import ROOT

    css = (ROOT / "static" / "css" / "app.css").read_text()
    parts = [{"kind": kind, "tokens": 1} for kind in ORDER]
    for part in explorer_builder.styled_parts(parts):
        for name in part["css"].split():
            if name.startswith("part-"):
                assert f".{name}" in css, part["kind"]
