"""The advice pages, and session reports that fold a sweep's, comparison's or advice's runs."""

from __future__ import annotations

import json
import re

import pytest
from django.utils.html import escape

from contextlab.advice.models import Advice
from contextlab.runs.models import Run
from contextlab.tuning import services as tuning_services
from contextlab.tuning.configs import ConfigSpec

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


@pytest.fixture
def evil_session(make_transcript, tool_heavy_jsonl):
    return make_transcript(tool_heavy_jsonl, name="<img src=x onerror=alert(1)>.jsonl")


def _form(session, **extra):
    data = {
        "choose": "sessions",
        "sessions": [str(session.pk)],
        "goal": "lowest_cost",
        "knob": ["autocompact_pct_override", "cache_ttl"],
        "values_autocompact_pct_override": "10, 90",
        "values_cache_ttl": "1h",
    }
    data.update(extra)
    return data


def test_form_starts_advice_then_the_page_shows_the_recommendation(
    alice_client, evil_session, finish
):
    page = alice_client.get("/advice/new/")
    assert page.status_code == 200
    assert "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE" in page.content.decode()
    response = alice_client.post("/advice/new/", _form(evil_session))
    assert response.status_code == 302, response.content.decode()[:2000]
    advice = Advice.objects.get()
    assert response["Location"] == advice.get_absolute_url()
    assert advice.knobs == {"autocompact_pct_override": [10, 90], "cache_ttl": ["1h"]}
    queued = alice_client.get(advice.get_absolute_url()).content.decode()
    assert 'id="advice-progress"' in queued
    assert "0 of 4 replays done" in queued
    finish()
    text = alice_client.get(advice.get_absolute_url()).content.decode()
    assert 'id="recommendation"' in text
    assert "Copy settings" in text or "change nothing" in text
    assert 'id="chart-pareto"' in text
    assert "env_lines" not in text  # template text never leaks
    data = json.loads(
        re.search(
            r'<script id="chart-pareto-data" type="application/json">(.*?)</script>', text, re.S
        ).group(1)
    )
    assert {trace["name"] for trace in data["data"]} >= {"candidates", "Pareto front"}
    # the session's name is escaped wherever it shows
    assert "<img src=x onerror" not in text
    # the Tune page links to advice; the advice list shows it with what it recommended
    tune = alice_client.get("/tune/").content.decode()
    assert "/advice/new/" in tune
    assert "/advice/" in tune
    listed = alice_client.get("/advice/").content.decode()
    assert f'href="{advice.get_absolute_url()}"' in listed
    advice.refresh_from_db()
    assert escape(advice.result["recommendations"][0]["label"]) in listed


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"knob": []}, "tick at least one knob"),
        ({"values_autocompact_pct_override": "ten"}, "must be a number"),
        ({"values_autocompact_pct_override": "1" * 500}, "at most 200 characters"),
        ({"goal": "cost_cap", "cost_cap": "lots"}, "a number of USD"),
        ({"goal": "cost_cap"}, "give the cost cap"),
        ({"knob": ["snip_enabled"]}, "cannot be explored"),
        ({"choose": "workspace", "workspace_id": ""}, "choose a workspace"),
        ({"choose": "workspace", "workspace_id": "1", "since": "2026-13-01"}, "YYYY-MM-DD"),
        ({"sessions": []}, "name sessions"),
        ({"choose": "workspace", "workspace_id": "1", "project": "a\x00b"}, "Null characters"),
        ({"values_cache_ttl": "5m\x00"}, "cache_ttl"),
    ],
)
def test_form_errors_are_shown_and_nothing_is_started(alice_client, evil_session, extra, message):
    response = alice_client.post("/advice/new/", _form(evil_session, **extra))
    assert response.status_code == 422
    assert message in response.content.decode()
    assert not Advice.objects.exists()


def test_session_report_folds_each_sweep_and_advice_under_one_row(
    alice_client, user, evil_session, finish
):
    sweep = tuning_services.create_sweep(
        owner=user,
        transcripts=[evil_session],
        base=ConfigSpec(preset="auto", overrides={}),
        field_name="autocompact_pct_override",
        values=[20, 40, 60],
    )
    alice_client.post("/advice/new/", _form(evil_session))
    advice = Advice.objects.get()
    finish()
    text = alice_client.get(evil_session.get_absolute_url()).content.decode()
    runs_card = text[text.index('id="runs"') : text.index("</section>", text.index('id="runs"'))]
    assert f'id="run-group-sweep-{sweep.pk}"' in runs_card
    assert f'id="run-group-advice-{advice.pk}"' in runs_card
    assert f'href="{sweep.get_absolute_url()}"' in runs_card
    # loose rows: only the runs no sweep or advice made (the upload's recorded run)
    loose = runs_card[: runs_card.index('class="run-group"')]
    recorded = Run.objects.filter(transcript=evil_session, mode=Run.Mode.RECORDED).count()
    assert loose.count("<tr ") == recorded
    group = runs_card[runs_card.index(f'id="run-group-sweep-{sweep.pk}"') :]
    assert "3 runs" in group[: group.index("</summary>")]
